package plugin

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// sandboxRemover is what rm asks of the sandbox manager.
type sandboxRemover interface {
	sandboxLister
	// ScopeNetworkScopes are the scopes that have an egress network.
	ScopeNetworkScopes(ctx context.Context, labels []string) ([]string, error)
	RemoveSandbox(ctx context.Context, t core.Target, force bool) (bool, error)
	RemoveScopeNetwork(ctx context.Context, scope string) (bool, error)
}

// storedPolicies is what rm asks of the sidecar manager: whether a scope's
// policy stays in the sidecar (known: there is a sidecar to read it from).
type storedPolicies interface {
	StoredPolicy(ctx context.Context, scope string) (has, known bool, err error)
}

func newRmCommand(dockerCli command.Cli) *cobra.Command {
	var o removalOptions
	cmd := &cobra.Command{
		Use:     "rm [OPTIONS] SCOPE[/SESSION]...",
		Aliases: []string{"remove"},
		Short:   "Remove sandboxes and their data (a scope: every session and the long-term volume)",
		Long: `Remove sandboxes: their containers and their data. SCOPE removes the scope's
container, every session's container and workspace, and the scope's long-term
volume; SCOPE/SESSION removes that session's container and workspace. Refuses
(exit 125, scope_busy) while an exec, copy or shell runs in one of them, unless
--force, which kills the running work first.`,
		Example: `  docker sandbox rm u1/chatA
  docker sandbox rm -f ci-job-42            # idempotent: no error when it is gone
  docker sandbox rm --all --filter state=expired-with-data`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkRemovalArgs(cmd, args, o); err != nil {
				return err
			}
			m := &auditedRemover{sandboxRemover: manager(dockerCli, nil), au: newAuditor(dockerCli, auditConfig())}
			eg := egressManager(dockerCli, nil)
			return fail(dockerCli.Out(), o.format, runRm(cmd.Context(), m, eg, dockerCli.Out(), dockerCli.Err(), args, o))
		},
		ValidArgsFunction: completeTargets(dockerCli, 0),
	}
	addRemovalFlags(cmd, &o, "Remove every sandbox and all data of the plugin's scopes")
	return cmd
}

// runRm removes the targets in args, or with --all every sandbox listed
// (with or without a container) and the scopes left with only their egress
// network. A scope's removal removes its egress network too.
func runRm(ctx context.Context, m sandboxRemover, eg storedPolicies, out, errOut io.Writer, args []string, o removalOptions) error {
	var ts []core.Target
	if o.all {
		flt, err := sbexec.ParseFilters(o.filters)
		if err != nil {
			return err
		}
		var networkOnly func(seen map[core.Target]bool) ([]core.Target, error)
		if len(flt.Sessions) == 0 && len(flt.States) == 0 {
			networkOnly = func(seen map[core.Target]bool) ([]core.Target, error) {
				scopes, err := m.ScopeNetworkScopes(ctx, flt.Labels)
				if err != nil {
					return nil, err
				}
				var ts []core.Target
				for _, s := range scopes {
					t := core.Target{Scope: s}
					if !seen[t] && (len(flt.Scopes) == 0 || slices.Contains(flt.Scopes, s)) {
						ts = append(ts, t)
					}
				}
				return ts, nil
			}
		}
		if ts, err = listedTargets(ctx, m, flt, true, networkOnly); err != nil {
			return err
		}
	} else {
		var err error
		if ts, err = parseTargets(args); err != nil {
			return err
		}
	}
	return removeEach(out, errOut, ts, o, "container or data", func(t core.Target) (bool, error) {
		found, err := m.RemoveSandbox(ctx, t, o.force)
		if err != nil || t.Session != "" {
			return found, err
		}
		// The scope is gone: so is its egress network, also when the scope
		// had no container or data left (its policy stays, as
		// configuration, and a line says so).
		removed, err := m.RemoveScopeNetwork(ctx, t.Scope)
		found = found || removed
		if found {
			if note := egressPolicyNote(ctx, eg, t.Scope); note != "" {
				fmt.Fprintf(errOut, "docker sandbox: %s\n", note)
			}
		}
		return found, err
	})
}

// egressPolicyNote is the line `rm SCOPE` prints when the scope's egress
// policy stays in the sidecar (it is configuration, like a [scope.NAME]
// table), or "" when it has none (or there is no sidecar container to
// read it from). Nothing is started or run in the sidecar.
func egressPolicyNote(ctx context.Context, m storedPolicies, scope string) string {
	has, known, err := m.StoredPolicy(ctx, scope)
	if err != nil || !known || !has {
		return ""
	}
	return fmt.Sprintf("the egress policy of scope %s stays in the sidecar (`docker sandbox egress policy %s --clear` removes it)", scope, scope)
}
