package plugin

import (
	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// newPruneCommand is a placeholder until its issue lands: hidden, and it says so.
func newPruneCommand(dockerCli command.Cli) *cobra.Command {
	return &cobra.Command{
		Use:    "prune",
		Short:  "Remove idle sandboxes and orphaned objects (not implemented yet)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fail(dockerCli.Out(), "", sbexec.Errorf(sbexec.CodeNotImplemented, "docker sandbox prune is not implemented in this version"))
		},
	}
}
