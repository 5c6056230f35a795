package plugin

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/docker/cli/cli/command"
	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/images"
)

type imagesLsOptions struct {
	format string
	quiet  bool
}

func newImagesLsCommand(dockerCli command.Cli) *cobra.Command {
	var o imagesLsOptions
	cmd := &cobra.Command{
		Use:     "ls [OPTIONS]",
		Aliases: []string{"list"},
		Short:   "List the plugin's images",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fail(dockerCli.Out(), o.format, runImagesLs(cmd.Context(), dockerCli, o))
		},
	}
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: json, table or a Go template")
	cmd.Flags().BoolVarP(&o.quiet, "quiet", "q", false, "Only show image references")
	return cmd
}

func runImagesLs(ctx context.Context, dockerCli command.Cli, o imagesLsOptions) error {
	b := &images.Builder{Engine: dockerCli.Client(), Version: Version}
	list, err := b.List(ctx)
	if err != nil {
		return err
	}
	if list == nil {
		list = []images.Summary{}
	}
	out := dockerCli.Out()
	return writeFormatted(out, o.format, list, func() error {
		if o.quiet {
			for _, s := range list {
				fmt.Fprintf(out, "%s:%s\n", s.Repository, s.Tag)
			}
			return nil
		}
		tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
		fmt.Fprintln(tw, "REPOSITORY\tTAG\tIMAGE ID\tKIND\tCREATED\tSIZE")
		for _, s := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Repository, s.Tag, s.ID, s.Kind, s.Created, units.HumanSize(float64(s.Size)))
		}
		return tw.Flush()
	})
}
