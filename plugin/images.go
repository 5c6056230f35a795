package plugin

import (
	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"
)

func newImagesCommand(dockerCli command.Cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Build or list the helper and runtime images",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newImagesBuildCommand(dockerCli), newImagesLsCommand(dockerCli))
	return cmd
}
