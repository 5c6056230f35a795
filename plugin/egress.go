package plugin

import (
	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// newEgressCommand is a placeholder until its issue lands: hidden, and it says so.
func newEgressCommand(dockerCli command.Cli) *cobra.Command {
	return &cobra.Command{
		Use:    "egress",
		Short:  "Manage the egress proxy and per-scope allowlists (not implemented yet)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fail(dockerCli.Out(), "", sbexec.Errorf(sbexec.CodeNotImplemented, "docker sandbox egress is not implemented in this version"))
		},
	}
}
