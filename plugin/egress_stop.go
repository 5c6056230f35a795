package plugin

import (
	"context"
	"fmt"

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
			return fail(dockerCli.Out(), o.format, runEgressStop(cmd.Context(), dockerCli, o))
		},
	}
	cmd.Flags().BoolVar(&o.rm, "rm", false, "Remove the sidecar and the scope networks no sandbox uses")
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: json or a Go template")
	return cmd
}

func runEgressStop(ctx context.Context, dockerCli command.Cli, o egressStopOptions) error {
	c, err := loadConfig()
	if err != nil {
		return err
	}
	found, nets, err := egressManager(dockerCli, c).Stop(ctx, o.rm)
	if err != nil {
		return err
	}
	if nets == nil {
		nets = []string{}
	}
	j := egressStopJSON{Stopped: found, Removed: found && o.rm, NetworksRemoved: nets}
	return writeFormatted(dockerCli.Out(), o.format, j, func() error {
		switch {
		case found && o.rm:
			fmt.Fprintln(dockerCli.Out(), "removed the egress sidecar "+egress.SidecarName)
		case found:
			fmt.Fprintln(dockerCli.Out(), "stopped the egress sidecar "+egress.SidecarName)
		default:
			fmt.Fprintln(dockerCli.Err(), "docker sandbox: no egress sidecar")
		}
		for _, n := range nets {
			fmt.Fprintln(dockerCli.Out(), "removed network "+n)
		}
		return nil
	})
}
