package plugin

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/docker/cli/cli"
	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// removalOptions are the options of stop and rm.
type removalOptions struct {
	all     bool
	force   bool
	filters []string
	format  string
}

func addRemovalFlags(cmd *cobra.Command, o *removalOptions, allHelp string) {
	cmd.SetFlagErrorFunc(flagError)
	f := cmd.Flags()
	f.BoolVarP(&o.all, "all", "a", false, allHelp)
	f.BoolVarP(&o.force, "force", "f", false, "Kill whatever runs in the sandboxes first, and ignore names that do not exist")
	f.StringArrayVar(&o.filters, "filter", nil, "With --all: only the sandboxes that match (as ls --filter)")
	f.StringVar(&o.format, "format", "", "Output format: json or a Go template")
}

func newStopCommand(dockerCli command.Cli) *cobra.Command {
	var o removalOptions
	cmd := &cobra.Command{
		Use:   "stop [OPTIONS] SCOPE[/SESSION]...",
		Short: "Remove sandbox containers and keep their data",
		Long: `Remove the containers of sandboxes and keep their data; the next call creates
the container again with the same data. SCOPE stops the scope's container and
those of all its sessions. Refuses (exit 125, scope_busy) while an exec, copy or
shell runs in one of them, unless --force.`,
		Example: `  docker sandbox stop u1/chatA
  docker sandbox stop --all
  docker sandbox stop --force u1`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRemoval(cmd.Context(), dockerCli, cmd, args, o, false)
		},
		ValidArgsFunction: completeTargets(dockerCli, 0),
	}
	addRemovalFlags(cmd, &o, "Stop every sandbox that has a container")
	return cmd
}

// targetResult is one element of stop/rm --format json.
type targetResult struct {
	Target  string     `json:"target"`
	Removed bool       `json:"removed"`
	Error   *errorBody `json:"error"`
}

// runRemoval is stop (data=false) and rm (data=true).
func runRemoval(ctx context.Context, dockerCli command.Cli, cmd *cobra.Command, args []string, o removalOptions, data bool) error {
	switch {
	case o.all && len(args) > 0:
		return usageError(cmd, "give names or --all, not both")
	case !o.all && len(args) == 0:
		return usageError(cmd, "%q requires at least 1 argument, or --all", cmd.CommandPath())
	case !o.all && len(o.filters) > 0:
		return usageError(cmd, "--filter needs --all")
	}
	out := dockerCli.Out()
	m := &sbexec.Manager{Engine: dockerCli.Client(), Version: Version}
	var (
		ts    []core.Target
		exact bool
	)
	if o.all {
		flt, err := sbexec.ParseFilters(o.filters)
		if err != nil {
			return fail(out, o.format, err)
		}
		rows, err := m.List(ctx, sbexec.ListOptions{All: data, Filter: flt})
		if err != nil {
			return fail(out, o.format, err)
		}
		seen := map[core.Target]bool{}
		for _, r := range rows {
			ts = append(ts, r.Target())
			seen[r.Target()] = true
		}
		if data && len(flt.Sessions) == 0 && len(flt.States) == 0 {
			// Scopes with nothing left but their egress network.
			scopes, err := m.ScopeNetworkScopes(ctx, flt.Labels)
			if err != nil {
				return fail(out, o.format, err)
			}
			for _, s := range scopes {
				t := core.Target{Scope: s}
				if !seen[t] && (len(flt.Scopes) == 0 || slices.Contains(flt.Scopes, s)) {
					ts = append(ts, t)
				}
			}
		}
		// Sessions first: removing a scope removes its sessions too.
		sort.SliceStable(ts, func(i, j int) bool { return ts[i].Session != "" && ts[j].Session == "" })
		exact = !data // stop --all: each listed container, not its scope's others
	} else {
		var err error
		if ts, err = parseTargets(args); err != nil {
			return fail(out, o.format, err)
		}
	}
	res := []targetResult{}
	var firstErr error
	for _, t := range ts {
		var (
			found bool
			err   error
		)
		switch {
		case data:
			found, err = m.RemoveSandbox(ctx, t, o.force)
		case exact:
			found, err = m.StopExact(ctx, t, o.force)
		default:
			found, err = m.StopSandbox(ctx, t, o.force)
		}
		if err == nil && data && t.Session == "" {
			// The scope is gone: so is its egress network, also when the
			// scope had no container or data left (its policy stays, as
			// configuration, and a line says so).
			removed, nerr := m.RemoveScopeNetwork(ctx, t.Scope)
			found = found || removed
			err = nerr
			if found {
				eg := &egress.Manager{Engine: dockerCli.Client(), Version: Version}
				if note := egressPolicyNote(ctx, eg, t.Scope); note != "" {
					fmt.Fprintf(dockerCli.Err(), "docker sandbox: %s\n", note)
				}
			}
		}
		if err == nil && !found {
			if o.all || o.force {
				continue // gone meanwhile (a scope took its sessions), or -f
			}
			what := "container"
			if data {
				what = "container or data"
			}
			err = core.Errorf(core.CodeNotFound, "no sandbox %s (no %s): see `docker sandbox ls -a`", t, what)
		}
		r := targetResult{Target: t.String(), Removed: err == nil}
		if err != nil {
			e := core.AsError(err)
			r.Error = newErrorBody(e)
			if firstErr == nil {
				firstErr = e
			}
			if o.format == "" {
				fmt.Fprintf(dockerCli.Err(), "docker sandbox: %s\n", e.Message)
			}
		}
		res = append(res, r)
	}
	if err := writeFormatted(out, o.format, res, func() error {
		for _, r := range res {
			if r.Removed {
				fmt.Fprintln(out, r.Target)
			}
		}
		return nil
	}); err != nil {
		return fail(out, "", err)
	}
	if firstErr != nil {
		if o.format != "" {
			fmt.Fprintf(dockerCli.Err(), "docker sandbox: %s\n", core.AsError(firstErr).Message)
		}
		return cli.StatusError{StatusCode: core.AsError(firstErr).Exit}
	}
	return nil
}

// egressPolicyNote is the line `rm SCOPE` prints when the scope's egress
// policy stays in the sidecar (it is configuration, like a [scope.NAME]
// table), or "" when it has none (or there is no sidecar container to
// read it from). Nothing is started or run in the sidecar.
func egressPolicyNote(ctx context.Context, m *egress.Manager, scope string) string {
	has, known, err := m.StoredPolicy(ctx, scope)
	if err != nil || !known || !has {
		return ""
	}
	return fmt.Sprintf("the egress policy of scope %s stays in the sidecar (`docker sandbox egress policy %s --clear` removes it)", scope, scope)
}
