package plugin

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
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

func newEgressLogsCommand(dockerCli command.Cli) *cobra.Command {
	var o egressLogsOptions
	cmd := &cobra.Command{
		Use:   "logs [OPTIONS]",
		Short: "Show the egress decisions: one line per allowed or denied connection",
		Example: `  docker sandbox egress logs --scope ci-job -f
  docker sandbox egress logs --format json | jq 'select(.decision == "deny")'
  docker sandbox egress logs --scope ci-job --summary     # what to put in a tight policy`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fail(dockerCli.Out(), o.format, runEgressLogs(cmd.Context(), dockerCli, o))
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.scope, "scope", "s", "", "Only this scope's decisions")
	f.BoolVarP(&o.follow, "follow", "f", false, "Keep printing new decisions")
	f.BoolVar(&o.summary, "summary", false, "The distinct hosts allowed and denied, and the policy that allows what was used")
	f.IntVar(&o.tail, "tail", -1, "Only the last N decisions (-1: all)")
	f.StringVar(&o.format, "format", "", "Output format: json (one object per line; with --summary, one object), or a Go template")
	return cmd
}

func runEgressLogs(ctx context.Context, dockerCli command.Cli, o egressLogsOptions) error {
	if o.scope != "" {
		if err := core.ValidateName("scope", o.scope); err != nil {
			return err
		}
	}
	if o.summary && o.follow {
		return core.Errorf(core.CodeBadFlag, "--summary and --follow cannot be combined")
	}
	c, err := loadConfig()
	if err != nil {
		return err
	}
	m := egressManager(dockerCli, c)
	ctx, cancel := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer cancel()

	// The helper tails before the scope filter: with a filter, tail here.
	helperTail := o.tail
	if o.scope != "" || o.summary {
		helperTail = -1
	}
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		err := m.Logs(ctx, o.follow, helperTail, pw)
		pw.CloseWithError(err)
		errc <- err
	}()
	out := dockerCli.Out()
	if o.summary {
		s, err := egress.Summarize(egFilterTail(pr, o.scope, o.tail), "")
		if err != nil {
			return err
		}
		if err := <-errc; err != nil {
			return err
		}
		return writeFormatted(out, o.format, s, func() error { return egPrintSummary(out, s) })
	}
	// The table's header is written with the first line, or at a
	// successful end: a call that fails (no sidecar) prints only its error.
	var tw *tabwriter.Writer
	header := func() {}
	if o.format == "" {
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		header = func() {
			fmt.Fprintln(tw, "TIME\tSCOPE\tDECISION\tMETHOD\tTARGET\tIP\tSTATUS\tBYTES OUT/IN\tDURATION\tREASON")
			header = func() {}
		}
	}
	sc := bufio.NewScanner(egFilterTail(pr, o.scope, o.tail))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if isJSON(o.format) {
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		var r proxy.Record
		if json.Unmarshal(line, &r) != nil {
			continue
		}
		if tw == nil {
			if err := writeFormatted(out, o.format, r, nil); err != nil {
				return err
			}
			continue
		}
		header()
		// Scope, method, target and reason come from a sandbox's request.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s/%s\t%.1fms\t%s\n", r.Time.Format("2006-01-02T15:04:05Z07:00"), egTerm(r.Scope), egTerm(r.Decision), egTerm(r.Method),
			egTerm(egTarget(r)), egTerm(egDash(r.IP)), r.Status, units.HumanSize(float64(r.BytesOut)), units.HumanSize(float64(r.BytesIn)), r.DurationMS, egTerm(r.Reason))
		if o.follow {
			_ = tw.Flush()
		}
	}
	err = <-errc
	if ctx.Err() != nil {
		err = nil // Ctrl-C ends -f
	}
	if tw != nil {
		if err == nil {
			header()
		}
		_ = tw.Flush()
	}
	return err
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

// egBacklogMark is the line the helper's `logs -f` writes after the lines
// that were already there.
const egBacklogMark = `{"mark":"backlog_end"}`

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
			if line == egBacklogMark {
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
		for _, scope := range egSortedKeys(s.Suggested) {
			fmt.Fprintf(out, "  %s\n", egTerm(s.Suggested[scope]))
		}
	}
	return nil
}

func egSortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}
