package plugin

import (
	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// newCpCommand is a placeholder until its issue lands: hidden, and it says so.
func newCpCommand(dockerCli command.Cli) *cobra.Command {
	return &cobra.Command{
		Use:    "cp",
		Short:  "Copy files between the host and sandboxes (not implemented yet)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fail(dockerCli.Out(), "", sbexec.Errorf(sbexec.CodeNotImplemented, "docker sandbox cp is not implemented in this version"))
		},
	}
}
