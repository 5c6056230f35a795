package exec

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/api/types/volume"
	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// fakePodmanAPI answers Podman's own inspect with fixed namespace modes.
type fakePodmanAPI struct{ cgroup, ipc string }

func (p fakePodmanAPI) PodmanNamespaces(ctx context.Context, id string) (string, string, error) {
	return p.cgroup, p.ipc, nil
}

func podmanRun(t *testing.T, f *fakeEngine, spec Spec) (Result, error) {
	t.Helper()
	res, _, err := podmanRunNS(t, f, spec, fakePodmanAPI{"private", "shareable"})
	return res, err
}

// podmanRunNS runs with Podman's namespace modes; it returns the warnings.
func podmanRunNS(t *testing.T, f *fakeEngine, spec Spec, api PodmanInspector) (Result, []string, error) {
	t.Helper()
	f.helper = func([]string, []byte, []byte) (string, string, wire.RunStatus) { return "ran", "", wire.RunStatus{} }
	var warnings []string
	m := &Manager{Engine: f, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64", Os: "linux"}}, Version: "0.1.0",
		Podman: api, Warnf: func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }}
	var out strings.Builder
	res, err := m.Run(context.Background(), spec, Request{Lang: languages["sh"], Code: []byte("echo"), Workdir: core.WorkspaceDir,
		Timeout: 1e9, MaxOutput: 100, Stdout: &out, Stderr: &out})
	return res, warnings, err
}

// Podman's namespaces, read from its own API: the host's IPC namespace is
// refused; the host's cgroup namespace (Podman on cgroup v1) is said.
func TestRunPodmanNamespaces(t *testing.T) {
	f := newFake()
	f.podman = true
	_, w, err := podmanRunNS(t, f, testSpec(), fakePodmanAPI{"host", "shareable"})
	if err != nil || len(w) != 1 || !strings.Contains(w[0], "host's cgroup namespace") || !strings.Contains(w[0], "u1/s") {
		t.Fatalf("cgroupns host: %v %q", err, w)
	}
	for _, api := range []PodmanInspector{fakePodmanAPI{"private", "host"}, nil} {
		f = newFake()
		f.podman = true
		_, _, err = podmanRunNS(t, f, testSpec(), api)
		var ce *core.Error
		if !errors.As(err, &ce) || ce.Code != core.CodeEngineUnsupported || !strings.Contains(ce.Message, "IPC") || len(f.containers) != 0 {
			t.Fatalf("%v: want engine_unsupported naming IPC, nothing left; got %v, containers %v", api, err, f.containers)
		}
	}
}

// A volume list's label filters are ANDed again (Podman 4.3 ORs them).
func TestWithLabels(t *testing.T) {
	vs := []*volume.Volume{
		{Name: "a", Labels: map[string]string{"m": "true", "s": "a"}},
		{Name: "b", Labels: map[string]string{"m": "true", "s": "b"}},
		{Name: "h", Labels: map[string]string{"m": "true"}},
		{Name: "x", Labels: map[string]string{"s": "a"}},
		nil,
	}
	names := func(vs []*volume.Volume) (n []string) {
		for _, v := range vs {
			n = append(n, v.Name)
		}
		return n
	}
	for _, c := range []struct {
		f    filters.Args
		want []string
	}{
		{filters.NewArgs(filters.Arg("label", "m=true"), filters.Arg("label", "s=a")), []string{"a"}},
		{filters.NewArgs(filters.Arg("label", "m=true")), []string{"a", "b", "h"}},
		{filters.NewArgs(filters.Arg("label", "s")), []string{"a", "b", "x"}},
		{filters.NewArgs(), []string{"a", "b", "h", "x"}},
	} {
		if d := cmp.Diff(c.want, names(withLabels(vs, c.f))); d != "" {
			t.Errorf("%v (-want +got):\n%s", c.f.Get("label"), d)
		}
	}
}

// On Podman the volumes are created with their labels, the seeder is
// started (Podman fills volumes at start) and the sandbox gets RLIMIT_NPROC
// and read-only tmpfs over /run and /var/tmp; its settings are read back.
func TestRunPodman(t *testing.T) {
	f := newFake()
	f.podman = true
	res, err := podmanRun(t, f, testSpec())
	if err != nil || !res.Created {
		t.Fatal(err, res)
	}
	want := []string{"VolumeCreate docker-sandbox-u1.user kind=user", "VolumeCreate docker-sandbox-u1.s.ws kind=workspace",
		"VolumeCreate docker-sandbox.helper.vol-amd64 kind=helper", "CreateSeeder", "StartSeeder", "Wait", "Create", "Start", "ExecCreate", "ExecAttach"}
	if d := cmp.Diff(want, settledCalls(t, f.calls)); d != "" {
		t.Fatalf("calls (-want +got):\n%s", d)
	}
	hc := f.hostcfg["docker-sandbox-u1.s"]
	if d := cmp.Diff(podmanUlimits(1024), hc.Ulimits); d != "" {
		t.Errorf("ulimits (-want +got):\n%s", d)
	}
	for _, p := range []string{"/run", "/var/tmp"} {
		if hc.Tmpfs[p] != podmanTmpfsRO {
			t.Errorf("tmpfs %s: %q", p, hc.Tmpfs[p])
		}
	}
	// Docker: none of it.
	f = newFake()
	if _, err := podmanRun(t, f, testSpec()); err != nil {
		t.Fatal(err)
	}
	hc = f.hostcfg["docker-sandbox-u1.s"]
	if len(hc.Ulimits) != 1 || hc.Tmpfs["/run"] != "" || strings.Contains(strings.Join(f.calls, " "), "StartSeeder") || strings.Contains(strings.Join(f.calls, " "), "VolumeCreate") {
		t.Fatalf("Docker got Podman's settings: %v %v %v", hc.Ulimits, hc.Tmpfs, f.calls)
	}
}

// A setting Podman did not apply refuses the sandbox (engine_unsupported,
// 125) and leaves neither the container nor the new volumes.
func TestRunPodmanRefusesIgnoredSetting(t *testing.T) {
	for _, c := range []struct {
		name string
		drop func(*container.HostConfig)
		says string
	}{
		{"read-only root", func(hc *container.HostConfig) { hc.ReadonlyRootfs = false }, "ReadonlyRootfs"},
		{"no-new-privileges", func(hc *container.HostConfig) { hc.SecurityOpt = nil }, "no-new-privileges"},
		{"pids", func(hc *container.HostConfig) { hc.PidsLimit = nil }, "PidsLimit"},
		{"memory", func(hc *container.HostConfig) { hc.Memory = 0 }, "Memory"},
		{"nofile", func(hc *container.HostConfig) { hc.Ulimits = hc.Ulimits[1:] }, "nofile"},
		{"writable /run", func(hc *container.HostConfig) {
			hc.Tmpfs = map[string]string{"/tmp": hc.Tmpfs["/tmp"], "/run": "rw,rprivate,nosuid,nodev,tmpcopyup"}
		}, "Tmpfs /run"},
		{"capability", func(hc *container.HostConfig) { hc.CapAdd = []string{"NET_RAW"} }, "CapAdd"},
		{"auto remove", func(hc *container.HostConfig) { hc.AutoRemove = false }, "AutoRemove"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			f.podman, f.podmanDrop = true, c.drop
			_, err := podmanRun(t, f, testSpec())
			var ce *core.Error
			if !errors.As(err, &ce) || ce.Code != core.CodeEngineUnsupported || ce.Exit != 125 || !strings.Contains(ce.Message, c.says) || !strings.Contains(ce.Message, "Podman") {
				t.Fatalf("want engine_unsupported naming %s; got %v", c.says, err)
			}
			if len(f.containers) != 0 || f.volumes["docker-sandbox-u1.user"] || f.volumes["docker-sandbox-u1.s.ws"] {
				t.Fatalf("left behind: containers %v, volumes %v", f.containers, f.volumes)
			}
		})
	}
}

// Any network but none is refused on Podman before anything is made.
func TestRunPodmanRefusesNetwork(t *testing.T) {
	f := newFake()
	f.podman = true
	s := testSpec()
	s.Network = "bridge"
	_, err := podmanRun(t, f, s)
	var ce *core.Error
	if !errors.As(err, &ce) || ce.Code != core.CodeEngineUnsupported || !strings.Contains(ce.Message, "network none") {
		t.Fatalf("got %v", err)
	}
	if len(f.containers) != 0 || len(f.volumes) != 0 {
		t.Fatalf("left behind: %v %v", f.containers, f.volumes)
	}
	// AttachNetwork (proxy mode) refuses before the sidecar.
	m := &Manager{Engine: f, Network: nil}
	s.Network = "proxy"
	m.Network = failingNetwork{t: t}
	if _, err := m.AttachNetwork(context.Background(), &s, nil); !errors.As(err, &ce) || ce.Code != core.CodeEngineUnsupported {
		t.Fatalf("proxy: %v", err)
	}
}

// failingNetwork fails the test when the egress side is asked for anything.
type failingNetwork struct {
	Network
	t *testing.T
}

func (n failingNetwork) Attach(context.Context, string, *policy.Rules, []string) (Attachment, error) {
	n.t.Fatal("the egress side was asked on Podman")
	return Attachment{}, nil
}

// versionCounter counts the engine's version calls; versionErr fails the
// next ones (and is not counted as an answer).
type versionCounter struct {
	*fakeEngine
	n          atomic.Int32
	versionErr error
}

func (c *versionCounter) ServerVersion(ctx context.Context) (types.Version, error) {
	c.n.Add(1)
	if c.versionErr != nil {
		return types.Version{}, c.versionErr
	}
	return c.fakeEngine.ServerVersion(ctx)
}

// Whether the engine is Podman is asked once per client: two creates by
// two Managers (as the MCP server makes one per call) and a proxy-mode
// attach ask the engine's version once; another client asks its own; a
// failed ask is not kept.
func TestEngineIsPodmanAskedOnce(t *testing.T) {
	f := newFake()
	f.podman = true
	e := &versionCounter{fakeEngine: f}
	f.helper = func([]string, []byte, []byte) (string, string, wire.RunStatus) { return "ran", "", wire.RunStatus{} }
	for _, session := range []string{"s1", "s2"} {
		m := &Manager{Engine: e, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64", Os: "linux"}}, Version: "0.1.0",
			Podman: fakePodmanAPI{"private", "shareable"}}
		s := testSpec()
		s.Target.Session = session
		var out strings.Builder
		res, err := m.Run(context.Background(), s, Request{Lang: languages["sh"], Code: []byte("echo"), Workdir: core.WorkspaceDir,
			Timeout: 1e9, MaxOutput: 100, Stdout: &out, Stderr: &out})
		if err != nil || !res.Created {
			t.Fatalf("%s: %v %+v", session, err, res)
		}
	}
	s := testSpec()
	s.Network = "proxy"
	var ce *core.Error
	if _, err := (&Manager{Engine: e, Network: failingNetwork{t: t}}).AttachNetwork(context.Background(), &s, nil); !errors.As(err, &ce) || ce.Code != core.CodeEngineUnsupported {
		t.Fatalf("proxy on Podman: %v", err)
	}
	if n := e.n.Load(); n != 1 {
		t.Fatalf("ServerVersion asked %d times, want 1", n)
	}
	if seeders := strings.Count(strings.Join(f.calls, " "), "StartSeeder"); seeders != 2 {
		t.Fatalf("want both creates made as on Podman (2 seeders), got %d: %v", seeders, f.calls)
	}

	// Another client (a Docker Engine) asks its own; a failed ask is asked
	// again, then kept.
	d := &versionCounter{fakeEngine: newFake(), versionErr: errors.New("connection refused")}
	m := &Manager{Engine: d}
	if _, err := m.engineIsPodman(context.Background()); err == nil {
		t.Fatal("want the version error")
	}
	d.versionErr = nil
	for range 3 {
		if podman, err := m.engineIsPodman(context.Background()); podman || err != nil {
			t.Fatalf("Docker Engine: %v %v", podman, err)
		}
	}
	if n := d.n.Load(); n != 2 {
		t.Fatalf("ServerVersion asked %d times, want 2 (one failed, one answer)", n)
	}
}

// A first exec asks the engine's version only when its info does not show
// the Docker Engine (containerd's commit): dockerd answers the version by
// running runc and docker-init. Podman's info leaves that commit empty, so
// Podman is still told by its version.
func TestPodmanToldWithoutVersion(t *testing.T) {
	for name, tc := range map[string]struct {
		containerd   string
		podman       bool
		wantVersions int
	}{
		"docker's info":              {containerd: "1.6.20~ds1-1+deb12u3", wantVersions: 0},
		"an info that does not tell": {wantVersions: 1},
		"podman":                     {podman: true, wantVersions: 1},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake()
			f.helper = okHelper
			f.podman = tc.podman
			f.info = func(i *system.Info) { i.ContainerdCommit.ID = tc.containerd }
			if _, err := podmanRun(t, f, testSpec()); err != nil {
				t.Fatal(err)
			}
			calls := f.snapshotCalls()
			if f.versions != tc.wantVersions || slices.Contains(calls, "StartSeeder") != tc.podman {
				t.Errorf("version calls %d (want %d); calls %v", f.versions, tc.wantVersions, calls)
			}
		})
	}
}
