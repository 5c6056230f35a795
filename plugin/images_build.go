package plugin

import (
	"context"
	"fmt"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

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
