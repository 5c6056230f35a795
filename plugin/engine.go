package plugin

import (
	"errors"
	"os"
	"sync"

	"github.com/docker/cli/cli/command"
	"github.com/docker/cli/cli/context/docker"
	"github.com/docker/cli/cli/context/store"
	"github.com/docker/docker/client"
)

// engineConn is a CLI's engine: its endpoint and its Engine API client,
// built as the docker CLI builds its own (the current context from the
// context store, the endpoint's options, the config file's HTTP headers,
// the CLI's user agent) but without the CLI's ping of the engine at its
// first Client() or DockerEndpoint(). The client negotiates its API
// version at its first request instead, as every client of
// client.WithAPIVersionNegotiation does. A call that an exec channel
// serves thus asks the engine nothing: over ssh:// that ping was one ssh
// login per call.
type engineConn struct {
	once  sync.Once
	ep    docker.Endpoint
	epErr error
	api   client.APIClient
	err   error // no api
}

// engines holds one engineConn per CLI.
var engines sync.Map // command.Cli → *engineConn

// resolveEngine builds dockerCli's engineConn, once. Where it cannot (not
// the docker CLI's own DockerCli, no context store yet, DOCKER_CUSTOM_HEADERS that only the CLI reads, an
// endpoint the store cannot resolve), err is set and the callers use the
// CLI's own client, with the CLI's own errors.
func resolveEngine(dockerCli command.Cli) *engineConn {
	v, _ := engines.LoadOrStore(dockerCli, &engineConn{})
	e := v.(*engineConn)
	e.once.Do(func() {
		var s store.Store
		if real, ok := dockerCli.(*command.DockerCli); ok {
			s = real.ContextStore()
		}
		if s == nil {
			e.epErr, e.err = errNoEngineConn, errNoEngineConn
			return
		}
		var meta docker.EndpointMeta
		m, err := s.GetMetadata(dockerCli.CurrentContext())
		if err == nil {
			meta, err = docker.EndpointFromContext(m)
		}
		if err == nil {
			e.ep, err = docker.WithTLSData(s, dockerCli.CurrentContext(), meta)
		}
		if err != nil {
			e.epErr, e.err = err, err
			return
		}
		if os.Getenv("DOCKER_CUSTOM_HEADERS") != "" {
			e.err = errNoEngineConn
			return
		}
		opts, err := e.ep.ClientOpts()
		if err != nil {
			e.err = err
			return
		}
		if cf := dockerCli.ConfigFile(); cf != nil && len(cf.HTTPHeaders) > 0 {
			opts = append(opts, client.WithHTTPHeaders(cf.HTTPHeaders))
		}
		opts = append(opts, client.WithUserAgent(command.UserAgent()))
		e.api, e.err = client.NewClientWithOpts(opts...)
	})
	return e
}

// errNoEngineConn: the CLI's own client serves.
var errNoEngineConn = errors.New("no engine connection of the plugin's own")

// engineAPI is the Engine API client of dockerCli's engine (see
// engineConn); engineAPI(dockerCli) where the plugin cannot build its own.
// It does no I/O.
func engineAPI(dockerCli command.Cli) client.APIClient {
	if e := resolveEngine(dockerCli); e.err == nil {
		return e.api
	}
	return dockerCli.Client()
}

// engineEndpoint is dockerCli's engine endpoint, as DockerEndpoint() gives
// it, without the CLI's ping of the engine.
func engineEndpoint(dockerCli command.Cli) docker.Endpoint {
	if e := resolveEngine(dockerCli); e.epErr == nil {
		return e.ep
	}
	return dockerCli.DockerEndpoint()
}
