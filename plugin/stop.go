package plugin

import (
	"context"
	"io"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// sandboxStopper is what stop asks of the sandbox manager.
type sandboxStopper interface {
	sandboxLister
	// StopSandbox removes the target's container (a scope: also its
	// sessions'); StopExact only that one container.
	StopSandbox(ctx context.Context, t core.Target, force bool) (bool, error)
	StopExact(ctx context.Context, t core.Target, force bool) (bool, error)
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
			if err := checkRemovalArgs(cmd, args, o); err != nil {
				return err
			}
			m := manager(dockerCli, nil)
			return fail(dockerCli.Out(), o.format, runStop(cmd.Context(), m, dockerCli.Out(), dockerCli.Err(), args, o))
		},
		ValidArgsFunction: completeTargets(dockerCli, 0),
	}
	addRemovalFlags(cmd, &o, "Stop every sandbox that has a container")
	return cmd
}

// runStop removes the containers of the targets in args, or with --all of
// every sandbox listed (each listed container, not its scope's others).
func runStop(ctx context.Context, m sandboxStopper, out, errOut io.Writer, args []string, o removalOptions) error {
	if !o.all {
		ts, err := parseTargets(args)
		if err != nil {
			return err
		}
		return removeEach(out, errOut, ts, o, "container", func(t core.Target) (bool, error) { return m.StopSandbox(ctx, t, o.force) })
	}
	flt, err := sbexec.ParseFilters(o.filters)
	if err != nil {
		return err
	}
	ts, err := listedTargets(ctx, m, flt, false, nil)
	if err != nil {
		return err
	}
	return removeEach(out, errOut, ts, o, "container", func(t core.Target) (bool, error) { return m.StopExact(ctx, t, o.force) })
}
