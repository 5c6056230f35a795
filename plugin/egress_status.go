package plugin

import (
	"context"
	"io"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"
)

type egressStatusOptions struct{ format string }

func newEgressStatusCommand(dockerCli command.Cli) *cobra.Command {
	var o egressStatusOptions
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the egress sidecar, its networks, policies and counters",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := dockerCli.Out()
			c, err := loadConfig()
			if err != nil {
				return fail(out, o.format, err)
			}
			return fail(out, o.format, runEgressStatus(cmd.Context(), egressManager(dockerCli, c), out, o))
		},
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: json or a Go template (fields: the JSON names, {{.counters.allowed}})")
	return cmd
}

func runEgressStatus(ctx context.Context, m egressStatuser, out io.Writer, o egressStatusOptions) error {
	st, err := m.Status(ctx)
	if err != nil {
		return err
	}
	return writeFormatted(out, o.format, st, func() error { return printEgressStatus(out, st) })
}
