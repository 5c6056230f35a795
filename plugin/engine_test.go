package plugin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/docker/cli/cli/command"
	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/context/docker"
	"github.com/docker/cli/cli/context/store"
	cliflags "github.com/docker/cli/cli/flags"
)

// pingEngine is an engine of API 1.41 that counts the requests it gets
// and keeps the path of the last.
func pingEngine(t *testing.T) (host string, requests *atomic.Int32, last *atomic.Value) {
	requests, last = new(atomic.Int32), new(atomic.Value)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		last.Store(r.URL.Path)
		w.Header().Set("Api-Version", "1.41")
		w.Header().Set("Ostype", "linux")
		if strings.HasSuffix(r.URL.Path, "/_ping") {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	}))
	t.Cleanup(srv.Close)
	return "tcp://" + strings.TrimPrefix(srv.URL, "http://"), requests, last
}

// newTestCLI is a DockerCli as plugin.Run makes one, initialised with
// opts and a config directory of its own (restored afterwards).
func newTestCLI(t *testing.T, opts *cliflags.ClientOptions) *command.DockerCli {
	t.Helper()
	old := config.Dir()
	t.Cleanup(func() { config.SetDir(old) })
	if opts.ConfigDir == "" {
		opts.ConfigDir = t.TempDir()
	}
	cli, err := command.NewDockerCli()
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.Initialize(opts); err != nil {
		t.Fatal(err)
	}
	return cli
}

// TestEngineConnAsksNothing: the plugin's endpoint and client are the
// CLI's, and getting them sends the engine nothing (the CLI's own
// DockerEndpoint() and Client() ping it first); the client's first request
// negotiates the API version.
func TestEngineConnAsksNothing(t *testing.T) {
	for _, how := range []string{"flag", "env"} {
		t.Run(how, func(t *testing.T) {
			host, requests, last := pingEngine(t)
			opts := cliflags.NewClientOptions()
			if how == "flag" {
				opts.Hosts = []string{host}
			} else {
				t.Setenv("DOCKER_HOST", host)
			}
			cli := newTestCLI(t, opts)
			ep := engineEndpoint(cli)
			api := engineAPI(cli)
			if ep.Host != host {
				t.Errorf("endpoint %q, want %q", ep.Host, host)
			}
			if n := requests.Load(); n != 0 {
				t.Fatalf("the engine got %d requests before any call", n)
			}
			if _, err := api.Info(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := requests.Load(); n != 2 {
				t.Errorf("the first request made %d requests, want 2 (the version's ping, the request)", n)
			}
			if got := last.Load(); got != "/v1.41/info" {
				t.Errorf("the request went to %v, want /v1.41/info (the engine's API version)", got)
			}
			// The CLI's own view (which pings) is the same endpoint.
			if want := cli.DockerEndpoint(); want.Host != ep.Host || want.SkipTLSVerify != ep.SkipTLSVerify || (want.TLSData == nil) != (ep.TLSData == nil) {
				t.Errorf("endpoint %+v, the CLI's %+v", ep, want)
			}
			if engineAPI(cli) != api {
				t.Error("a second engineAPI built another client")
			}
		})
	}
}

// TestEngineConnContexts: a named context's endpoint comes from the
// context store as the CLI reads it, with its TLS data (which keeps the
// exec channel off); DOCKER_CUSTOM_HEADERS, which only the CLI's own client
// reads, leaves the CLI's client in charge.
func TestEngineConnContexts(t *testing.T) {
	cfgDir := t.TempDir()
	writeContext := func(name, host string, tlsData *store.EndpointTLSData) {
		t.Helper()
		st := store.New(cfgDir+"/contexts", command.DefaultContextStoreConfig())
		if err := st.CreateOrUpdate(store.Metadata{Name: name, Metadata: command.DockerContext{},
			Endpoints: map[string]any{docker.DockerEndpoint: docker.EndpointMeta{Host: host}}}); err != nil {
			t.Fatal(err)
		}
		if tlsData != nil {
			if err := st.ResetEndpointTLSMaterial(name, docker.DockerEndpoint, tlsData); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeContext("over-ssh", "ssh://someone@127.0.0.1:1", nil)
	writeContext("with-tls", "tcp://127.0.0.1:1", &store.EndpointTLSData{Files: map[string][]byte{"ca.pem": []byte("not a real CA")}})

	for _, c := range []struct {
		context, host string
		tls           bool
		channel       bool
	}{
		{"over-ssh", "ssh://someone@127.0.0.1:1", false, true},
		{"with-tls", "tcp://127.0.0.1:1", true, false},
	} {
		t.Run(c.context, func(t *testing.T) {
			opts := cliflags.NewClientOptions()
			opts.ConfigDir = cfgDir
			opts.Context = c.context
			cli := newTestCLI(t, opts)
			ep := engineEndpoint(cli)
			if ep.Host != c.host || (ep.TLSData != nil) != c.tls {
				t.Errorf("endpoint host %q, TLS %v; want %q, %v", ep.Host, ep.TLSData != nil, c.host, c.tls)
			}
			if c.tls && string(ep.TLSData.CA) != "not a real CA" {
				t.Errorf("TLS CA %q, want the context's", ep.TLSData.CA)
			}
			if got := execChannel(cli) != nil; got != c.channel {
				t.Errorf("exec channel %v, want %v", got, c.channel)
			}
		})
	}

	t.Run("custom headers", func(t *testing.T) {
		host, _, _ := pingEngine(t)
		t.Setenv("DOCKER_CUSTOM_HEADERS", "X-Test=1")
		opts := cliflags.NewClientOptions()
		opts.Hosts = []string{host}
		cli := newTestCLI(t, opts)
		if engineAPI(cli) != cli.Client() {
			t.Error("with DOCKER_CUSTOM_HEADERS, the plugin built a client of its own")
		}
	})
}
