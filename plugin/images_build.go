package plugin

import (
	"context"
	"fmt"
	"io"

	"github.com/docker/cli/cli/command"
	"github.com/docker/docker/api/types/system"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

type imagesBuildOptions struct {
	format string
}

// engineInfo is the engine call images build makes.
type engineInfo interface {
	Info(ctx context.Context) (system.Info, error)
}

// imageBuilder is what images build asks of the image builder.
type imageBuilder interface {
	EnsureHelper(ctx context.Context, arch string, readable bool) (string, string, error)
	BuildRuntime(ctx context.Context) error
	HelperRef(arch string, readable bool) string
	RuntimeRef() string
}

func newImagesBuildCommand(dockerCli command.Cli) *cobra.Command {
	var o imagesBuildOptions
	cmd := &cobra.Command{
		Use:   "build [OPTIONS]",
		Short: "Build the helper image and the runtime image (from the configured base)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := dockerCli.Out()
			c, err := loadConfig()
			if err != nil {
				return fail(out, o.format, err)
			}
			if err := applyFlags(cmd.Flags(), c); err != nil {
				return fail(out, o.format, err)
			}
			return fail(out, o.format, runImagesBuild(cmd.Context(), engineAPI(dockerCli), builder(dockerCli, c), out, c.RuntimeBase, o))
		},
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	config.AddFlags(cmd.Flags(), config.FlagsBuild)
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: json or a Go template")
	return cmd
}

// imagesBuildJSON is the images build --format json schema (in the
// order of its keys).
type imagesBuildJSON struct {
	Base    string `json:"base"`
	Helper  string `json:"helper"`
	Runtime string `json:"runtime"`
}

func runImagesBuild(ctx context.Context, e engineInfo, b imageBuilder, out io.Writer, base string, o imagesBuildOptions) error {
	info, err := e.Info(ctx)
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
	res := imagesBuildJSON{Helper: b.HelperRef(arch, readable), Runtime: b.RuntimeRef(), Base: base}
	return writeFormatted(out, o.format, res, func() error {
		_, err := fmt.Fprintf(out, "%s\n%s\n", res.Helper, res.Runtime)
		return err
	})
}
