package plugin

import (
	"context"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

type rmOptions struct {
	format string
}

func newRmCommand(dockerCli command.Cli) *cobra.Command {
	var o rmOptions
	cmd := &cobra.Command{
		Use:     "rm SCOPE[/SESSION]...",
		Aliases: []string{"remove"},
		Short:   "Remove sandboxes and their data (a scope: every session and the long-term volume)",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError(cmd, "%q requires at least 1 argument", cmd.CommandPath())
			}
			return fail(dockerCli.Out(), o.format, runRm(cmd.Context(), dockerCli, args, o))
		},
	}
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: json or a Go template")
	return cmd
}

func runRm(ctx context.Context, dockerCli command.Cli, args []string, o rmOptions) error {
	ts, err := parseTargets(args)
	if err != nil {
		return err
	}
	m := &sbexec.Manager{Engine: dockerCli.Client(), Version: Version}
	return eachTarget(dockerCli, o.format, ts, func(t sbexec.Target) (bool, error) { return m.Remove(ctx, t) })
}
