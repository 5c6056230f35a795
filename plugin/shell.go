package plugin

import (
	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// newShellCommand is a placeholder until its issue lands: hidden, and it says so.
func newShellCommand(dockerCli command.Cli) *cobra.Command {
	return &cobra.Command{
		Use:    "shell",
		Short:  "Open an interactive shell in a sandbox (not implemented yet)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fail(dockerCli.Out(), "", sbexec.Errorf(sbexec.CodeNotImplemented, "docker sandbox shell is not implemented in this version"))
		},
	}
}
