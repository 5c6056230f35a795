package plugin

import (
	"context"
	"fmt"
	"runtime"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/images"
)

type versionOptions struct {
	format string
}

// versionJSON is the `version --format json` schema.
type versionJSON struct {
	Plugin struct {
		Version  string `json:"version"`
		HelperID string `json:"helper_id"`
		Go       string `json:"go"`
		OS       string `json:"os"`
		Arch     string `json:"arch"`
	} `json:"plugin"`
	Context          string      `json:"context"`
	Host             string      `json:"host"`
	ClientAPIVersion string      `json:"client_api_version"`
	Engine           *engineJSON `json:"engine"`
	Error            *errorBody  `json:"error,omitempty"`
}

type engineJSON struct {
	Version    string `json:"version"`
	APIVersion string `json:"api_version"`
	MinAPI     string `json:"min_api_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
}

func newVersionCommand(dockerCli command.Cli) *cobra.Command {
	var o versionOptions
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show the versions of the plugin, the engine and the API, and the context in use",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runVersion(cmd.Context(), dockerCli, o)
		},
	}
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: json or a Go template")
	return cmd
}

func runVersion(ctx context.Context, dockerCli command.Cli, o versionOptions) error {
	var v versionJSON
	v.Plugin.Version = Version
	v.Plugin.HelperID = images.HelperID()
	v.Plugin.Go = runtime.Version()
	v.Plugin.OS, v.Plugin.Arch = runtime.GOOS, runtime.GOARCH
	v.Context = dockerCli.CurrentContext()
	v.Host = dockerCli.DockerEndpoint().Host
	sv, err := dockerCli.Client().ServerVersion(ctx)
	v.ClientAPIVersion = dockerCli.Client().ClientVersion()
	var engErr *core.Error
	if err != nil {
		engErr = core.EngineError(err, "cannot read the engine's version")
		v.Error = newErrorBody(engErr)
	} else {
		v.Engine = &engineJSON{Version: sv.Version, APIVersion: sv.APIVersion, MinAPI: sv.MinAPIVersion, OS: sv.Os, Arch: sv.Arch}
	}
	out := dockerCli.Out()
	if err := writeFormatted(out, o.format, v, func() error {
		fmt.Fprintf(out, "Plugin:\n Version:     %s\n Helper:      %s\n Go version:  %s\n OS/Arch:     %s/%s\n", Version, v.Plugin.HelperID, v.Plugin.Go, v.Plugin.OS, v.Plugin.Arch)
		fmt.Fprintf(out, "Context:       %s (%s)\n", v.Context, v.Host)
		if v.Engine != nil {
			fmt.Fprintf(out, "Engine:\n Version:     %s\n API version: %s (client %s, minimum %s)\n OS/Arch:     %s/%s\n", v.Engine.Version, v.Engine.APIVersion, v.ClientAPIVersion, v.Engine.MinAPI, v.Engine.OS, v.Engine.Arch)
		}
		return nil
	}); err != nil {
		return fail(out, o.format, err)
	}
	if engErr != nil {
		// The JSON object above already carries the error.
		return fail(nil, "", engErr)
	}
	return nil
}
