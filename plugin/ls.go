package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/docker/cli/cli/command"
	"github.com/docker/cli/templates"
	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

type lsOptions struct {
	all     bool
	quiet   bool
	size    bool
	filters []string
	format  string
}

func newLsCommand(dockerCli command.Cli) *cobra.Command {
	var o lsOptions
	cmd := &cobra.Command{
		Use:     "ls [OPTIONS]",
		Aliases: []string{"list"},
		Short:   "List sandboxes",
		Long: `List sandboxes: those with a container (running: an exec, copy or shell runs
in it; idle), and with -a also those whose container expired but whose data
stays (expired-with-data). ls never runs anything in a sandbox.`,
		Example: `  docker sandbox ls
  docker sandbox ls -a --filter scope=u1
  docker sandbox ls --filter state=idle -q
  docker sandbox ls --format json
  docker sandbox ls --format 'table {{.scope}}\t{{.session}}\t{{.state}}'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fail(dockerCli.Out(), o.format, runLs(cmd.Context(), dockerCli, o))
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	f := cmd.Flags()
	f.BoolVarP(&o.all, "all", "a", false, "Also show sandboxes whose container is gone but whose data stays")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "Only print SCOPE[/SESSION] names")
	f.BoolVarP(&o.size, "size", "s", false, "Show the size of each sandbox's data (read by a short-lived probe container: slower)")
	f.StringArrayVarP(&o.filters, "filter", "f", nil, "Filter: scope=NAME, session=NAME (empty: none), state=STATE, label=KEY[=VALUE]")
	f.StringVar(&o.format, "format", "", "Output format: table, json (one object per line), table TEMPLATE, or a Go template")
	return cmd
}

func runLs(ctx context.Context, dockerCli command.Cli, o lsOptions) error {
	flt, err := sbexec.ParseFilters(o.filters)
	if err != nil {
		return err
	}
	all := o.all
	for _, s := range flt.States {
		if s == sbexec.StateExpired {
			all = true // asking for them is asking for them
		}
	}
	m := &sbexec.Manager{Engine: dockerCli.Client(), Version: Version}
	if o.size {
		// Sizes are measured by a probe container of the helper image.
		c, err := loadConfig()
		if err != nil {
			return err
		}
		m = manager(dockerCli, c)
	}
	now := time.Now()
	rows, err := m.List(ctx, sbexec.ListOptions{All: all, Filter: flt, Size: o.size, Now: now})
	if err != nil {
		return err
	}
	out := dockerCli.Out()
	if o.quiet {
		for _, s := range rows {
			fmt.Fprintln(out, s.Target())
		}
		return nil
	}
	return lcWriteRows(out, o.format, rows, now, o.size)
}

// lsColumns are the default table's columns: header, and the cell of a row.
func lsColumns(now time.Time, size bool) []lcColumn {
	cols := []lcColumn{
		{"SCOPE", func(s *sbexec.Sandbox) string { return s.Scope }},
		{"SESSION", func(s *sbexec.Sandbox) string { return dash(s.Session) }},
		{"STATE", func(s *sbexec.Sandbox) string { return s.State }},
		{"IMAGE", func(s *sbexec.Sandbox) string { return dash(s.Image) }},
		{"NETWORK", func(s *sbexec.Sandbox) string { return dash(s.Network) }},
		{"RUNTIME", func(s *sbexec.Sandbox) string {
			if s.Container != "" && s.Runtime == "" {
				return "default"
			}
			return dash(s.Runtime)
		}},
		{"CREATED", func(s *sbexec.Sandbox) string { return lcAgo(&s.Created, now) }},
		{"LAST USED", func(s *sbexec.Sandbox) string {
			if s.State == sbexec.StateRunning {
				return "now"
			}
			return lcAgo(s.LastUsed, now)
		}},
		{"IDLE TTL", func(s *sbexec.Sandbox) string {
			if s.IdleTTL == "0s" {
				return "never"
			}
			return dash(s.IdleTTL)
		}},
	}
	if size {
		cols = append(cols, lcColumn{"SIZE", func(s *sbexec.Sandbox) string {
			if s.Size == nil {
				return "-"
			}
			return units.HumanSize(float64(*s.Size))
		}})
	}
	return cols
}

type lcColumn struct {
	header string
	cell   func(*sbexec.Sandbox) string
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// lcAgo is a time as docker ps shows it ("5 minutes ago"), or "-".
func lcAgo(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	d := now.Sub(*t)
	if d < time.Second {
		return "now"
	}
	return units.HumanDuration(d) + " ago"
}

// lcWriteRows prints sandboxes in docker's list style: a table, one JSON
// object per line, `table TEMPLATE` (a header from the field names), or a
// template per row. Templates see the JSON field names.
func lcWriteRows(out io.Writer, format string, rows []*sbexec.Sandbox, now time.Time, size bool) error {
	switch {
	case format == "" || format == "table":
		tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
		cols := lsColumns(now, size)
		var hs []string
		for _, c := range cols {
			hs = append(hs, c.header)
		}
		fmt.Fprintln(tw, strings.Join(hs, "\t"))
		for _, s := range rows {
			var cells []string
			for _, c := range cols {
				// Labels and image names can come from an image:
				// quoted for the terminal.
				cells = append(cells, core.TermText(c.cell(s)))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		return tw.Flush()
	case isJSON(format):
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		for _, s := range rows {
			if err := enc.Encode(s); err != nil {
				return err
			}
		}
		return nil
	}
	table := false
	if t, ok := strings.CutPrefix(format, "table "); ok {
		table, format = true, t
	}
	// As docker ps: \t and \n typed in a shell's quotes are a tab and a newline.
	format = strings.NewReplacer(`\t`, "\t", `\n`, "\n").Replace(format)
	tmpl, err := templates.Parse(format)
	if err != nil {
		return core.Wrap(core.CodeBadFlag, err, "invalid --format template")
	}
	var w io.Writer = out
	var tw *tabwriter.Writer
	if table {
		tw = tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
		w = tw
		if err := lcTemplateHeader(w, tmpl.Execute); err != nil {
			return err
		}
	}
	for _, s := range rows {
		v, err := lcGeneric(s)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := tmpl.Execute(&buf, v); err != nil {
			return core.Wrap(core.CodeBadFlag, err, "executing the --format template")
		}
		buf.WriteByte('\n')
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
	}
	if tw != nil {
		return tw.Flush()
	}
	return nil
}

// lcTemplateHeader renders the header line of `table TEMPLATE`: the template
// run on a map whose every field is its own name in capitals.
func lcTemplateHeader(w io.Writer, exec func(io.Writer, any) error) error {
	h := map[string]any{}
	for _, k := range []string{"scope", "session", "state", "container", "image", "network", "runtime", "created",
		"last_used", "idle_ttl", "volumes", "size"} {
		h[k] = strings.ToUpper(strings.ReplaceAll(k, "_", " "))
	}
	var buf bytes.Buffer
	if err := exec(&buf, h); err != nil {
		return core.Wrap(core.CodeBadFlag, err, "executing the --format template")
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// lcGeneric is v as templates see it: its JSON form.
func lcGeneric(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	// Numbers keep their JSON text (2097152, not 2.097152e+06).
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var g any
	if err := dec.Decode(&g); err != nil {
		return nil, err
	}
	return g, nil
}
