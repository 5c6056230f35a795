package plugin

import (
	"context"
	"io"

	"github.com/docker/cli/cli/command"
	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/images"
)

type imagesLsOptions struct {
	format string
	quiet  bool
}

// imageLister is what images ls asks of the image builder.
type imageLister interface {
	List(ctx context.Context) ([]images.Summary, error)
}

func newImagesLsCommand(dockerCli command.Cli) *cobra.Command {
	var o imagesLsOptions
	cmd := &cobra.Command{
		Use:     "ls [OPTIONS]",
		Aliases: []string{"list"},
		Short:   "List the plugin's images",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b := &images.Builder{Engine: engineAPI(dockerCli), Version: Version}
			return fail(dockerCli.Out(), o.format, runImagesLs(cmd.Context(), b, dockerCli.Out(), o))
		},
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: table, json (one array), table TEMPLATE, or a Go template per image; fields: the JSON names ({{.repository}}) or the table's columns ({{.Repository}})")
	cmd.Flags().BoolVarP(&o.quiet, "quiet", "q", false, "Only show image references")
	return cmd
}

func runImagesLs(ctx context.Context, b imageLister, out io.Writer, o imagesLsOptions) error {
	list, err := b.List(ctx)
	if err != nil {
		return err
	}
	return imagesLsFormat.write(out, o.format, o.quiet, list)
}

// imagesLsFormat is how images ls prints; JSON is one array (its
// documented schema).
var imagesLsFormat = listFormat[images.Summary]{
	columns: []column[images.Summary]{
		{"Repository", "REPOSITORY", func(s images.Summary) string { return core.TermText(s.Repository) }},
		{"Tag", "TAG", func(s images.Summary) string { return core.TermText(s.Tag) }},
		{"ID", "IMAGE ID", func(s images.Summary) string { return core.TermText(s.ID) }},
		{"Kind", "KIND", func(s images.Summary) string { return core.TermText(s.Kind) }},
		{"Created", "CREATED", func(s images.Summary) string { return core.TermText(s.Created) }},
		{"Size", "SIZE", func(s images.Summary) string { return units.HumanSize(float64(s.Size)) }},
	},
	table:     `table {{.Repository}}\t{{.Tag}}\t{{.ID}}\t{{.Kind}}\t{{.Created}}\t{{.Size}}`,
	quiet:     `{{.Repository}}:{{.Tag}}`,
	jsonArray: true,
}
