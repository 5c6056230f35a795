package plugin

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/docker/cli/cli/command"
	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/images"
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

type imagesBuildOptions struct {
	base   string
	format string
}

func newImagesBuildCommand(dockerCli command.Cli) *cobra.Command {
	var o imagesBuildOptions
	cmd := &cobra.Command{
		Use:   "build [OPTIONS]",
		Short: "Build the helper image and the runtime image (from the configured base)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fail(dockerCli.Out(), o.format, runImagesBuild(cmd.Context(), dockerCli, cmd, o))
		},
	}
	cmd.Flags().StringVar(&o.base, "base", "", "Base image of the runtime image (default: config runtime_base)")
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: json or a Go template")
	return cmd
}

func runImagesBuild(ctx context.Context, dockerCli command.Cli, cmd *cobra.Command, o imagesBuildOptions) error {
	c, err := loadConfig()
	if err != nil {
		return err
	}
	if err := applyFlags(cmd, c, map[string]string{"base": "runtime_base"}); err != nil {
		return err
	}
	b := builder(dockerCli, c)
	info, err := dockerCli.Client().Info(ctx)
	if err != nil {
		return core.EngineError(err, "cannot read the engine's architecture and runtimes")
	}
	arch := info.Architecture
	readable := !sbexec.ExecOnlyRuntime(info, "")
	// The helper image's tag names its binary's hash: one that exists is
	// this helper already, and is kept as it is. (The variant for the
	// engine's default runtime; another is built on first use.)
	if _, _, err := b.EnsureHelper(ctx, arch, readable); err != nil {
		return err
	}
	if err := b.BuildRuntime(ctx); err != nil {
		return err
	}
	res := map[string]string{"helper": b.HelperRef(arch, readable), "runtime": b.RuntimeRef(), "base": c.RuntimeBase}
	return writeFormatted(dockerCli.Out(), o.format, res, func() error {
		fmt.Fprintf(dockerCli.Out(), "%s\n%s\n", res["helper"], res["runtime"])
		return nil
	})
}

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
