package plugin

import (
	"context"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/docker/cli/cli/command"
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
  docker sandbox ls --format 'table {{.Scope}}\t{{.Session}}\t{{.LastUsed}}'
  docker sandbox ls --format '{{.scope}} {{.last_used}}'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := dockerCli.Out()
			lo, err := o.listOptions(time.Now())
			if err != nil {
				return fail(out, o.format, err)
			}
			m, err := lsManager(dockerCli, o.size)
			if err != nil {
				return fail(out, o.format, err)
			}
			return fail(out, o.format, runLs(cmd.Context(), m, out, lo, o))
		},
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.SetFlagErrorFunc(flagError)
	f := cmd.Flags()
	f.BoolVarP(&o.all, "all", "a", false, "Also show sandboxes whose container is gone but whose data stays")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "Only print SCOPE[/SESSION] names")
	f.BoolVarP(&o.size, "size", "s", false, "Show the size of each sandbox's data (read by a short-lived probe container: slower)")
	f.StringArrayVarP(&o.filters, "filter", "f", nil, "Filter: scope=NAME, session=NAME (empty: none), state=STATE, label=KEY[=VALUE]")
	f.StringVar(&o.format, "format", "", "Output format: table, json (one object per line), table TEMPLATE, or a Go template; fields: the JSON names ({{.last_used}}) or the table's columns ({{.LastUsed}})")
	return cmd
}

// lsManager is ls's manager: sizes are measured by a probe container of
// the helper image, which needs the configuration.
func lsManager(dockerCli command.Cli, size bool) (sandboxLister, error) {
	if !size {
		return manager(dockerCli, nil), nil
	}
	c, err := loadConfig()
	if err != nil {
		return nil, err
	}
	return manager(dockerCli, c), nil
}

// listOptions are the manager's options for these flags.
func (o lsOptions) listOptions(now time.Time) (sbexec.ListOptions, error) {
	flt, err := sbexec.ParseFilters(o.filters)
	if err != nil {
		return sbexec.ListOptions{}, err
	}
	// Asking for expired sandboxes is asking for them.
	all := o.all || slices.Contains(flt.States, sbexec.StateExpired)
	return sbexec.ListOptions{All: all, Filter: flt, Size: o.size, Now: now}, nil
}

func runLs(ctx context.Context, m sandboxLister, out io.Writer, lo sbexec.ListOptions, o lsOptions) error {
	rows, err := m.List(ctx, lo)
	if err != nil {
		return err
	}
	return lsFormat(lo.Now, o.size).write(out, o.format, o.quiet, rows)
}

// lsFormat is how ls prints: the default table's columns, with SIZE when
// sizes were measured.
func lsFormat(now time.Time, size bool) listFormat[*sbexec.Sandbox] {
	type S = *sbexec.Sandbox
	cols := []column[S]{
		{"Target", "TARGET", func(s S) string { return s.Target().String() }},
		{"Scope", "SCOPE", func(s S) string { return s.Scope }},
		{"Session", "SESSION", func(s S) string { return dash(s.Session) }},
		{"State", "STATE", func(s S) string { return core.TermText(s.State) }},
		{"Container", "CONTAINER", func(s S) string { return dash(s.Container) }},
		// Labels and image names can come from an image: quoted.
		{"Image", "IMAGE", func(s S) string { return core.TermText(dash(s.Image)) }},
		{"Network", "NETWORK", func(s S) string { return core.TermText(dash(s.Network)) }},
		{"Runtime", "RUNTIME", func(s S) string {
			if s.Container != "" && s.Runtime == "" {
				return "default"
			}
			return core.TermText(dash(s.Runtime))
		}},
		{"Created", "CREATED", func(s S) string { return lcAgo(&s.Created, now) }},
		{"LastUsed", "LAST USED", func(s S) string {
			if s.State == sbexec.StateRunning {
				return "now"
			}
			return lcAgo(s.LastUsed, now)
		}},
		{"IdleTTL", "IDLE TTL", func(s S) string {
			if s.IdleTTL == "0s" {
				return "never"
			}
			return core.TermText(dash(s.IdleTTL))
		}},
		{"Volumes", "VOLUMES", func(s S) string { return core.TermText(dash(strings.Join(s.Volumes, ","))) }},
		{"Size", "SIZE", func(s S) string {
			if s.Size == nil {
				return "-"
			}
			return units.HumanSize(float64(*s.Size))
		}},
	}
	table := `table {{.Scope}}\t{{.Session}}\t{{.State}}\t{{.Image}}\t{{.Network}}\t{{.Runtime}}\t{{.Created}}\t{{.LastUsed}}\t{{.IdleTTL}}`
	if size {
		table += `\t{{.Size}}`
	}
	return listFormat[S]{columns: cols, table: table, quiet: "{{.Target}}"}
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
