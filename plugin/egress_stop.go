package plugin

import (
	"context"
	"fmt"
	"io"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/egress"
)

type egressStopOptions struct {
	rm     bool
	format string
}

// egressStopJSON is `egress stop --format json`.
type egressStopJSON struct {
	Stopped         bool     `json:"stopped"` // there was a sidecar, and it is stopped (or removed)
	Removed         bool     `json:"removed"` // with --rm
	NetworksRemoved []string `json:"networks_removed"`
}

func newEgressStopCommand(dockerCli command.Cli) *cobra.Command {
	var o egressStopOptions
	cmd := &cobra.Command{
		Use:   "stop [--rm]",
		Short: "Stop the egress sidecar (with --rm: remove it and the unused scope networks; policies and credentials stay)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := dockerCli.Out()
			c, err := loadConfig()
			if err != nil {
				return fail(out, o.format, err)
			}
			return fail(out, o.format, runEgressStop(cmd.Context(), egressManager(dockerCli, c), out, dockerCli.Err(), o))
		},
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().BoolVar(&o.rm, "rm", false, "Remove the sidecar and the scope networks no sandbox uses")
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: json or a Go template")
	return cmd
}

// egressStopper is what egress stop asks of the sidecar manager.
type egressStopper interface {
	Stop(ctx context.Context, remove bool) (bool, []string, error)
}

func runEgressStop(ctx context.Context, m egressStopper, out, errOut io.Writer, o egressStopOptions) error {
	found, nets, err := m.Stop(ctx, o.rm)
	if err != nil {
		return err
	}
	if nets == nil {
		nets = []string{}
	}
	j := egressStopJSON{Stopped: found, Removed: found && o.rm, NetworksRemoved: nets}
	return writeFormatted(out, o.format, j, func() error {
		switch {
		case found && o.rm:
			fmt.Fprintln(out, "removed the egress sidecar "+egress.SidecarName)
		case found:
			fmt.Fprintln(out, "stopped the egress sidecar "+egress.SidecarName)
		default:
			fmt.Fprintln(errOut, "docker sandbox: no egress sidecar")
		}
		for _, n := range nets {
			fmt.Fprintln(out, "removed network "+n)
		}
		return nil
	})
}
