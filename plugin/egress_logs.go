package plugin

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/docker/cli/cli/command"
	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress"
	"github.com/docker-sandbox/docker-sandbox/egress/proxy"
)

type egressLogsOptions struct {
	scope   string
	follow  bool
	summary bool
	tail    int
	format  string
}

// egressLogSource is what egress logs asks of the sidecar manager: the
// helper's log lines, written to out.
type egressLogSource interface {
	Logs(ctx context.Context, follow bool, tail int, out io.Writer) error
}

func newEgressLogsCommand(dockerCli command.Cli) *cobra.Command {
	var o egressLogsOptions
	cmd := &cobra.Command{
		Use:   "logs [OPTIONS]",
		Short: "Show the egress decisions: one line per allowed or denied connection",
		Example: `  docker sandbox egress logs --scope ci-job -f
  docker sandbox egress logs --format json | jq 'select(.decision == "deny")'
  docker sandbox egress logs --format 'table {{.Time}}\t{{.Target}}\t{{.Reason}}'
  docker sandbox egress logs --scope ci-job --summary     # what to put in a tight policy`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := dockerCli.Out()
			if err := o.validate(); err != nil {
				return fail(out, o.format, err)
			}
			c, err := loadConfig()
			if err != nil {
				return fail(out, o.format, err)
			}
			ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			return fail(out, o.format, runEgressLogs(ctx, egressManager(dockerCli, c), out, o))
		},
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	f := cmd.Flags()
	f.StringVarP(&o.scope, "scope", "s", "", "Only this scope's decisions")
	f.BoolVarP(&o.follow, "follow", "f", false, "Keep printing new decisions")
	f.BoolVar(&o.summary, "summary", false, "The distinct hosts allowed and denied, and the policy that allows what was used")
	f.IntVar(&o.tail, "tail", -1, "Only the last N decisions (-1: all)")
	f.StringVar(&o.format, "format", "", "Output format: table, json (one object per line; with --summary, one object), table TEMPLATE, or a Go template; fields: the JSON names ({{.host}}) or the table's columns ({{.Target}})")
	return cmd
}

func (o egressLogsOptions) validate() error {
	if o.scope != "" {
		if err := core.ValidateName("scope", o.scope); err != nil {
			return err
		}
	}
	if o.summary && o.follow {
		return core.Errorf(core.CodeBadFlag, "--summary and --follow cannot be combined")
	}
	return nil
}

// runEgressLogs prints the decisions (-f: until ctx ends, which is not an
// error). A call that fails (no sidecar) prints only its error: the
// table's header comes with the first line, or at a successful end.
func runEgressLogs(ctx context.Context, m egressLogSource, out io.Writer, o egressLogsOptions) error {
	var rows *listStream[proxy.Record]
	if !o.summary && !isJSON(o.format) {
		var err error
		if rows, err = egressLogsFormat.stream(out, o.format, o.follow); err != nil {
			return err
		}
	}
	// The helper tails before the scope filter: with a filter, tail here.
	helperTail := o.tail
	if o.scope != "" || o.summary {
		helperTail = -1
	}
	pr, pw := io.Pipe()
	defer pr.Close() // a failed print ends the copy
	errc := make(chan error, 1)
	go func() {
		err := m.Logs(ctx, o.follow, helperTail, pw)
		pw.CloseWithError(err)
		errc <- err
	}()
	lines := egFilterTail(pr, o.scope, o.tail)
	if o.summary {
		s, err := egress.Summarize(lines, "")
		if err != nil {
			return err
		}
		if err := <-errc; err != nil {
			return err
		}
		return writeFormatted(out, o.format, s, func() error { return egPrintSummary(out, s) })
	}
	sc := bufio.NewScanner(lines)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if rows == nil {
			fmt.Fprintf(out, "%s\n", line) // json: the lines as they are
			continue
		}
		var r proxy.Record
		if json.Unmarshal(line, &r) != nil {
			continue
		}
		if err := rows.row(r); err != nil {
			return err
		}
	}
	err := <-errc
	if ctx.Err() != nil {
		err = nil // Ctrl-C ends -f
	}
	if rows != nil {
		if ferr := rows.end(err == nil); err == nil {
			err = ferr
		}
	}
	return err
}

// egressLogsFormat is how egress logs prints a decision. Scope, method,
// target and reason come from a sandbox's request: quoted.
var egressLogsFormat = listFormat[proxy.Record]{
	columns: []column[proxy.Record]{
		{"Time", "TIME", func(r proxy.Record) string { return r.Time.Format("2006-01-02T15:04:05Z07:00") }},
		{"Scope", "SCOPE", func(r proxy.Record) string { return egTerm(r.Scope) }},
		{"Decision", "DECISION", func(r proxy.Record) string { return egTerm(r.Decision) }},
		{"Method", "METHOD", func(r proxy.Record) string { return egTerm(r.Method) }},
		{"Target", "TARGET", func(r proxy.Record) string { return egTerm(egTarget(r)) }},
		{"IP", "IP", func(r proxy.Record) string { return egTerm(egDash(r.IP)) }},
		{"Status", "STATUS", func(r proxy.Record) string { return strconv.Itoa(r.Status) }},
		{"Bytes", "BYTES OUT/IN", func(r proxy.Record) string {
			return units.HumanSize(float64(r.BytesOut)) + "/" + units.HumanSize(float64(r.BytesIn))
		}},
		{"Duration", "DURATION", func(r proxy.Record) string { return fmt.Sprintf("%.1fms", r.DurationMS) }},
		{"Code", "CODE", func(r proxy.Record) string { return egTerm(egDash(r.Code)) }},
		{"Reason", "REASON", func(r proxy.Record) string { return egTerm(r.Reason) }},
	},
	table: `table {{.Time}}\t{{.Scope}}\t{{.Decision}}\t{{.Method}}\t{{.Target}}\t{{.IP}}\t{{.Status}}\t{{.Bytes}}\t{{.Duration}}\t{{.Reason}}`,
}

// egTerm quotes a string for a terminal table: control characters and
// escapes shown, never interpreted; a tab would also break the columns.
func egTerm(s string) string { return core.TermText(s) }

func egTarget(r proxy.Record) string {
	if r.Port == 0 {
		return r.Host
	}
	return fmt.Sprintf("%s:%d", r.Host, r.Port)
}

func egDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// egFilterTail keeps the lines of scope ("" = all), and of the existing
// lines only the last n (n < 0: all). The backlog ends at the helper's mark
// (with -f) or at the end of the input.
func egFilterTail(r io.Reader, scope string, n int) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var ring []string
		backlog := n >= 0
		flush := func() bool {
			for _, l := range ring {
				if _, err := io.WriteString(pw, l+"\n"); err != nil {
					return false
				}
			}
			ring, backlog = nil, false
			return true
		}
		for sc.Scan() {
			line := sc.Text()
			if line == proxy.BacklogMark {
				if !flush() {
					return
				}
				continue
			}
			if scope != "" {
				var rec struct {
					Scope string `json:"scope"`
				}
				if json.Unmarshal([]byte(line), &rec) != nil || rec.Scope != scope {
					continue
				}
			}
			if !backlog {
				if _, err := io.WriteString(pw, line+"\n"); err != nil {
					return
				}
				continue
			}
			if n > 0 {
				ring = append(ring, line)
				if len(ring) > n {
					ring = ring[1:]
				}
			}
		}
		flush()
		pw.CloseWithError(sc.Err())
	}()
	return pr
}

func egPrintSummary(out io.Writer, s egress.Summary) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	section := func(title string, es []egress.SummaryEntry) {
		fmt.Fprintf(tw, "%s\n", title)
		if len(es) == 0 {
			fmt.Fprintln(tw, "  (none)")
			return
		}
		fmt.Fprintln(tw, "  SCOPE\tTARGET\tCOUNT\tCODES\tLAST")
		for _, e := range es {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", egTerm(e.Scope), egTerm(fmt.Sprintf("%s:%d", e.Host, e.Port)), e.Count, egTerm(strings.Join(e.Codes, ",")), e.Last.Format("2006-01-02T15:04:05Z07:00"))
		}
	}
	section("ALLOWED", s.Allowed)
	fmt.Fprintln(tw)
	section("DENIED", s.Denied)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(s.Suggested) > 0 {
		fmt.Fprintln(out, "\nTo allow exactly what was used:")
		for _, scope := range slices.Sorted(maps.Keys(s.Suggested)) {
			fmt.Fprintf(out, "  %s\n", egTerm(s.Suggested[scope]))
		}
	}
	return nil
}
