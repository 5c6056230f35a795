package plugin

import (
	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// newInspectCommand is a placeholder until its issue lands: hidden, and it says so.
func newInspectCommand(dockerCli command.Cli) *cobra.Command {
	return &cobra.Command{
		Use:    "inspect",
		Short:  "Show sandboxes in detail (not implemented yet)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fail(dockerCli.Out(), "", sbexec.Errorf(sbexec.CodeNotImplemented, "docker sandbox inspect is not implemented in this version"))
		},
	}
}
