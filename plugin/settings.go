package plugin

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/docker/cli/cli/command"
	cliconfig "github.com/docker/cli/cli/config"
	"github.com/docker/docker/api/types/network"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/exec/channel"
	"github.com/docker-sandbox/docker-sandbox/files"
	"github.com/docker-sandbox/docker-sandbox/images"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

// loadConfig reads the user file, the project file and the environment, and
// warns on standard error about the values of an untrusted project file it
// ignored.
func loadConfig() (*config.Config, error) {
	c, err := loadConfigQuiet()
	if err != nil {
		return nil, err
	}
	warnRefused(os.Stderr, c)
	return c, nil
}

// loadConfigQuiet is loadConfig without the warning (for `config`, which
// shows what was ignored in its output).
func loadConfigQuiet() (*config.Config, error) {
	wd, _ := os.Getwd()
	c, err := config.Load(config.LoadOptions{DockerConfigDir: cliconfig.Dir(), WorkDir: wd, LookupEnv: os.LookupEnv})
	if err != nil {
		return nil, asConfigError(err)
	}
	return c, nil
}

// warnRefused tells what an untrusted project file asked for and did not
// get, and how to trust it.
func warnRefused(w io.Writer, c *config.Config) {
	if len(c.Refused) == 0 {
		return
	}
	fmt.Fprintf(w, "docker sandbox: warning: project file %s is %s: these values were ignored (an untrusted project file may only narrow the user file and defaults):\n",
		core.TermText(c.ProjectFile), trustStateText(c.Project.State))
	for _, r := range c.Refused {
		fmt.Fprintf(w, "  %s\n", core.TermText(r.String()))
	}
	fmt.Fprintf(w, "docker sandbox: after reading it, trust it with `docker sandbox config trust %s` (or set %s=1)\n", core.TermText(c.ProjectFile), config.TrustEnv)
}

func trustStateText(state string) string {
	switch state {
	case config.TrustStateChanged:
		return "not trusted (it changed since it was trusted)"
	case config.TrustStateTrusted:
		return "trusted"
	case config.TrustStateEnv:
		return "trusted (" + config.TrustEnv + "=1)"
	}
	return "not trusted"
}

func asConfigError(err error) error {
	if ce, ok := err.(*config.Error); ok {
		code := ce.Code
		if code == "" {
			code = core.CodeBadConfig
		}
		return &core.Error{Code: code, Message: ce.Error(), Exit: 125, Err: err}
	}
	return core.Wrap(core.CodeBadConfig, err, "configuration")
}

// builder returns the image builder for the CLI's engine (c nil: a verb
// that reads no configuration and builds no runtime image).
func builder(dockerCli command.Cli, c *config.Config) *images.Builder {
	base := ""
	if c != nil {
		base = c.RuntimeBase
	}
	return &images.Builder{Engine: engineAPI(dockerCli), Version: Version, Base: base, Progress: dockerCli.Err()}
}

// sandboxLister is what ls, stop and rm ask of the sandbox manager.
type sandboxLister interface {
	List(ctx context.Context, o sbexec.ListOptions) ([]*sbexec.Sandbox, error)
}

// manager returns the sandbox manager for the CLI's engine, with its
// images and its egress side: the one place they are wired. c is nil for
// the verbs that read no configuration (stop, rm, ls), which build no image.
func manager(dockerCli command.Cli, c *config.Config) *sbexec.Manager {
	max := 0
	if c != nil {
		max = c.MaxSandboxes
	}
	m := &sbexec.Manager{Engine: engineAPI(dockerCli), Images: builder(dockerCli, c), Network: egressManager(dockerCli, c),
		Version: Version, MaxSandboxes: max, Podman: podmanAPI{cli: engineAPI(dockerCli)},
		Warnf: func(format string, args ...any) {
			fmt.Fprintf(dockerCli.Err(), "docker sandbox: warning: "+format+"\n", args...)
		}}
	if c == nil || c.ExecChannel {
		if ch := execChannel(dockerCli); ch != nil {
			m.Channel = ch
		}
	}
	return m
}

// execChannel is the client of the sandboxes' exec channels on the CLI's
// engine, or nil where there is none: no private socket directory, or an
// endpoint the channel process could not reach as this CLI does. Local
// sockets (unix://), plain tcp:// and ssh:// (the channel process dials it
// through the docker CLI's ssh connection helper, with the environment this
// process has) get one; a TLS endpoint does not: its keys (the context's
// TLS store, DOCKER_CERT_PATH) would have to go to a detached process that
// lives on after the call, and an error there could only ever show as a
// slower call.
func execChannel(dockerCli command.Cli) *channel.Client {
	ep := engineEndpoint(dockerCli)
	switch {
	case ep.TLSData != nil:
		return nil
	case strings.HasPrefix(ep.Host, "tcp://"):
		if ep.SkipTLSVerify { // --tls without keys: TLS all the same
			return nil
		}
	case strings.HasPrefix(ep.Host, "unix://"), strings.HasPrefix(ep.Host, "ssh://"):
	default:
		return nil
	}
	dir, err := channel.Dir("")
	if err != nil {
		core.Debugf("exec channel: %v", err)
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return &channel.Client{Endpoint: ep.Host, Dir: dir, Exe: exe}
}

// networkEngine is what checkNetwork asks the engine.
type networkEngine interface {
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkInspect(ctx context.Context, network string, options network.InspectOptions) (network.Inspect, error)
}

// reservedNetworkPrefix starts every name the plugin uses, for sandboxes
// ("docker-sandbox-SCOPE") and for its own objects ("docker-sandbox.net.SCOPE",
// see sbexec.IsPluginObjectName); compared without regard to case.
const reservedNetworkPrefix = "docker-sandbox"

// checkNetwork refuses a sandbox network that is not the user's to give:
// the Docker modes that share a namespace (host, container:ID, default),
// and any network of the plugin's: a name in its namespaces, or a network
// that carries a com.docker.sandbox.* label (a scope's egress network; a
// network of the user's that copied those labels is refused too). The
// engine resolves a network by name, by ID and by ID prefix: every network
// that the value could name is checked. none and proxy pass (proxy is the
// scope's own network, made by the egress code). src is where the value
// came from; the error's code is bad_flag for a flag, else bad_config.
func checkNetwork(ctx context.Context, e networkEngine, name string, src config.Source) error {
	if name == "none" || name == "proxy" {
		return nil
	}
	code := core.CodeBadConfig
	if src.Kind == config.KindFlag {
		code = core.CodeBadFlag
	}
	refuse := func(why string) error {
		return core.Errorf(code, "network %q (%s) is refused: %s; a sandbox joins none, proxy (its scope's own egress network) or a Docker network of yours that is not the plugin's", name, src, why)
	}
	switch {
	case name == "":
		return refuse("it is empty")
	case name == "host" || name == "default":
		return refuse("it shares the engine host's network namespace")
	case strings.HasPrefix(name, "container:"):
		return refuse("it shares another container's network namespace")
	case strings.ContainsAny(name, " \t\r\n/\\:\x00"):
		return refuse("it is not a Docker network name")
	case isReservedNetworkName(name):
		return refuse("the name is in the plugin's namespace (docker-sandbox*): it may be another scope's network")
	}
	nets, err := e.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return core.EngineError(err, "cannot list the engine's networks")
	}
	for _, n := range nets {
		if n.Name != name && !strings.HasPrefix(n.ID, name) {
			continue
		}
		if why := pluginNetwork(n.Name, n.Labels); why != "" {
			return refuse(fmt.Sprintf("it names network %s (ID %.12s), which %s", n.Name, n.ID, why))
		}
	}
	// The engine's own lookup, in case it resolves what the list did not
	// show (a network made since).
	if n, err := e.NetworkInspect(ctx, name, network.InspectOptions{}); err == nil {
		if why := pluginNetwork(n.Name, n.Labels); why != "" {
			return refuse(fmt.Sprintf("it names network %s (ID %.12s), which %s", n.Name, n.ID, why))
		}
	}
	return nil
}

func isReservedNetworkName(name string) bool {
	return core.IsPluginObjectName(name) ||
		len(name) >= len(reservedNetworkPrefix) && strings.EqualFold(name[:len(reservedNetworkPrefix)], reservedNetworkPrefix)
}

// pluginNetwork says why a network is the plugin's, or "".
func pluginNetwork(name string, labels map[string]string) string {
	if isReservedNetworkName(name) {
		return "is in the plugin's namespace (docker-sandbox*)"
	}
	for k := range labels {
		if strings.HasPrefix(k, core.LabelPrefix) {
			return "carries the plugin's label " + k
		}
	}
	return ""
}

// checkedRunner checks the configured network before a copy that may have
// to create its sandbox.
type checkedRunner struct {
	files.Runner
	engine networkEngine
	src    config.Source
}

func (r checkedRunner) HelperExec(ctx context.Context, spec sbexec.Spec, rr sbexec.RawRequest) (int, sbexec.Result, error) {
	if err := checkNetwork(ctx, r.engine, spec.Network, r.src); err != nil {
		return 0, sbexec.Result{}, err
	}
	return r.Runner.HelperExec(ctx, spec, rr)
}

// egressManager returns the sidecar manager for the CLI's engine (c nil: see
// builder).
func egressManager(dockerCli command.Cli, c *config.Config) *egress.Manager {
	return &egress.Manager{Engine: engineAPI(dockerCli), Images: builder(dockerCli, c), Version: Version, HelperID: images.HelperID()}
}
