package plugin

import (
	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"
)

func newRmCommand(dockerCli command.Cli) *cobra.Command {
	var o removalOptions
	cmd := &cobra.Command{
		Use:     "rm [OPTIONS] SCOPE[/SESSION]...",
		Aliases: []string{"remove"},
		Short:   "Remove sandboxes and their data (a scope: every session and the long-term volume)",
		Long: `Remove sandboxes: their containers and their data. SCOPE removes the scope's
container, every session's container and workspace, and the scope's long-term
volume; SCOPE/SESSION removes that session's container and workspace. Refuses
(exit 125, scope_busy) while an exec, copy or shell runs in one of them, unless
--force, which kills the running work first.`,
		Example: `  docker sandbox rm u1/chatA
  docker sandbox rm -f ci-job-42            # idempotent: no error when it is gone
  docker sandbox rm --all --filter state=expired-with-data`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRemoval(cmd.Context(), dockerCli, cmd, args, o, true)
		},
		ValidArgsFunction: completeTargets(dockerCli, 0),
	}
	addRemovalFlags(cmd, &o, "Remove every sandbox and all data of the plugin's scopes")
	return cmd
}
