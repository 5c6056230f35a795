package plugin

import (
	"context"
	"io"
	"runtime"
	"strings"

	"github.com/docker/cli/cli/command"
	"github.com/docker/docker/api/types"
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
	Transport        string      `json:"transport"`
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

// versionClient is what version asks the engine (ServerVersion first: the
// client's API version is known once it negotiated).
type versionClient interface {
	ServerVersion(ctx context.Context) (types.Version, error)
	ClientVersion() string
}

func newVersionCommand(dockerCli command.Cli) *cobra.Command {
	var o versionOptions
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show the versions of the plugin, the engine and the API, and the context in use",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runVersion(cmd.Context(), engineAPI(dockerCli), dockerCli.Out(), dockerCli.CurrentContext(), engineEndpoint(dockerCli).Host, o)
		},
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: json or a Go template (fields: the JSON names, {{.engine.api_version}})")
	return cmd
}

// versionTemplate is version's human form, as docker version's: a template
// on the JSON form.
const versionTemplate = `Plugin:
 Version:     {{.plugin.version}}
 Helper:      {{.plugin.helper_id}}
 Go version:  {{.plugin.go}}
 OS/Arch:     {{.plugin.os}}/{{.plugin.arch}}
Context:       {{.context}} ({{.host}})
{{- if .engine}}
Engine:
 Version:     {{.engine.version}}
 API version: {{.engine.api_version}} (client {{.client_api_version}}, minimum {{.engine.min_api_version}})
 OS/Arch:     {{.engine.os}}/{{.engine.arch}}
{{- end}}`

// runVersion prints the versions; contextName and host are the Docker
// context in use and its endpoint. An unreachable engine is in the output
// (engine null, and the error) and in the exit status.
func runVersion(ctx context.Context, c versionClient, out io.Writer, contextName, host string, o versionOptions) error {
	var v versionJSON
	v.Plugin.Version = Version
	v.Plugin.HelperID = images.HelperID()
	v.Plugin.Go = runtime.Version()
	v.Plugin.OS, v.Plugin.Arch = runtime.GOOS, runtime.GOARCH
	v.Context = contextName
	v.Host = host
	v.Transport = transportOf(host)
	sv, err := c.ServerVersion(ctx)
	v.ClientAPIVersion = c.ClientVersion()
	var engErr *core.Error
	if err != nil {
		engErr = core.EngineError(err, "cannot read the engine's version")
		v.Error = newErrorBody(engErr)
	} else {
		v.Engine = &engineJSON{Version: sv.Version, APIVersion: sv.APIVersion, MinAPI: sv.MinAPIVersion, OS: sv.Os, Arch: sv.Arch}
	}
	format := o.format
	if isDefault(format) {
		format = versionTemplate
	}
	if err := writeFormatted(out, format, v, nil); err != nil {
		return fail(out, o.format, err)
	}
	if engErr != nil {
		// The JSON object above already carries the error.
		return fail(nil, "", engErr)
	}
	return nil
}

// transportOf names how the plugin reaches the engine at host: the scheme
// of the endpoint (unix, tcp, ssh: the ssh binary running `docker system
// dial-stdio` on the remote, npipe, fd), "" when host has none.
func transportOf(host string) string {
	scheme, _, ok := strings.Cut(host, "://")
	if !ok {
		return ""
	}
	return strings.ToLower(scheme)
}
