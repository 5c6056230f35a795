package egress

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/api/types/volume"
	"github.com/google/go-cmp/cmp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
	"github.com/docker-sandbox/docker-sandbox/egress/proxy"
)

// fakeEngine is the part of the Engine API the tests below use; any other
// call panics (the embedded nil interface).
type fakeEngine struct {
	Engine
	mu         sync.Mutex
	containers map[string]container.InspectResponse // by name
	networks   []network.Summary
	volumes    map[string]volume.Volume
	files      map[string][]byte // container ID + ":" + path
	links      map[string]string // container ID + ":" + path -> link target
	execs      [][]string
	removed    []string
	created    []string
	stdin      [][]byte
	noLimits   bool // Info: an engine that enforces no cgroup limits (rootless on cgroup v1)
}

func notFoundErr() error { return cerrdefs.ErrNotFound.WithMessage("no such object") }

func (f *fakeEngine) ContainerInspect(ctx context.Context, name string) (container.InspectResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.containers[name]; ok {
		return c, nil
	}
	return container.InspectResponse{}, notFoundErr()
}

func (f *fakeEngine) NetworkList(ctx context.Context, o network.ListOptions) ([]network.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []network.Summary
	for _, n := range f.networks {
		ok := true
		for _, l := range o.Filters.Get("label") {
			k, v, _ := strings.Cut(l, "=")
			if n.Labels[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, n)
		}
	}
	return out, nil
}

func (f *fakeEngine) NetworkInspect(ctx context.Context, name string, o network.InspectOptions) (network.Inspect, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.networks {
		if n.Name == name || n.ID == name {
			return n, nil
		}
	}
	return network.Inspect{}, notFoundErr()
}

func (f *fakeEngine) NetworkRemove(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, "network "+id)
	return nil
}

func (f *fakeEngine) NetworkDisconnect(ctx context.Context, id, ctr string, force bool) error {
	return nil
}

func (f *fakeEngine) VolumeInspect(ctx context.Context, name string) (volume.Volume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.volumes[name]; ok {
		return v, nil
	}
	return volume.Volume{}, notFoundErr()
}

func (f *fakeEngine) CopyFromContainer(ctx context.Context, id, path string) (io.ReadCloser, container.PathStat, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.files[id+":"+path]
	if !ok {
		return nil, container.PathStat{}, notFoundErr()
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: path[strings.LastIndex(path, "/")+1:], Mode: 0o600, Size: int64(len(b)), Typeflag: tar.TypeReg})
	_, _ = tw.Write(b)
	_ = tw.Close()
	return io.NopCloser(&buf), container.PathStat{}, nil
}

func (f *fakeEngine) ContainerStatPath(ctx context.Context, id, path string) (container.PathStat, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t, ok := f.links[id+":"+path]; ok {
		return container.PathStat{Name: path, LinkTarget: t}, nil
	}
	if _, ok := f.files[id+":"+path]; ok {
		return container.PathStat{Name: path}, nil
	}
	return container.PathStat{}, notFoundErr()
}

func (f *fakeEngine) ContainerRemove(ctx context.Context, id string, o container.RemoveOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, "container "+id)
	for name, c := range f.containers {
		if c.ID == id {
			delete(f.containers, name)
		}
	}
	return nil
}

func (f *fakeEngine) Info(ctx context.Context) (system.Info, error) {
	if f.noLimits {
		return system.Info{Architecture: "x86_64", CgroupVersion: "1", CgroupDriver: "none", SecurityOptions: []string{"name=rootless"}}, nil
	}
	return system.Info{Architecture: "x86_64", MemoryLimit: true, SwapLimit: true, PidsLimit: true, CPUCfsQuota: true}, nil
}

func (f *fakeEngine) ContainerCreate(ctx context.Context, cfg *container.Config, hc *container.HostConfig, nc *network.NetworkingConfig, p *ocispec.Platform, name string) (container.CreateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, name)
	return container.CreateResponse{ID: "tmp1"}, nil
}

// errExec is what the fake sidecar's execs return: these tests look at
// which execs were asked for, not at their effect.
var errExec = errors.New("fake exec")

func (f *fakeEngine) ContainerExecCreate(ctx context.Context, id string, o container.ExecOptions) (container.ExecCreateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execs = append(f.execs, append([]string{id}, o.Cmd...))
	return container.ExecCreateResponse{}, errExec
}

type fakeImages struct{}

func (fakeImages) EnsureHelper(ctx context.Context, arch string, readable bool) (string, string, error) {
	return "helper:test", "", nil
}

func bridgeNet(name, subnet, gateway string, labels map[string]string, internal bool) network.Summary {
	return network.Summary{Name: name, ID: "id-" + name, Driver: "bridge", Internal: internal, Labels: labels,
		IPAM: network.IPAM{Config: []network.IPAMConfig{{Subnet: subnet, Gateway: gateway}}}}
}

func scopeLabels(scope string) map[string]string {
	return map[string]string{core.LabelManaged: "true", core.LabelKind: KindNetwork, core.LabelScope: scope}
}

// HostNetworks: every gateway, the first address of a subnet without one
// (the default bridge on API 1.41), auxiliary addresses, IPv6; scope
// subnets only from the plugin's own scope networks in the pool: a user's
// network with copied labels but another name, not internal, or outside
// the pool is not a scope's.
func TestHostNetworks(t *testing.T) {
	s, _ := Settings{}.Normalized()
	aux := bridgeNet("aux", "172.28.0.0/16", "172.28.0.1", nil, false)
	aux.IPAM.Config[0].AuxAddress = map[string]string{"host": "172.28.5.5"}
	v6 := bridgeNet("v6", "fd00:1::/64", "", nil, false)
	nets := []network.Summary{
		bridgeNet("bridge", "172.17.0.0/16", "", nil, false), // API 1.41: no gateway
		bridgeNet("later", "172.25.0.0/16", "172.25.0.1", nil, false),
		aux, v6,
		{Name: "host", Driver: "host"}, {Name: "none", Driver: "null"},
		bridgeNet(NetworkName("a"), "10.213.4.64/26", "10.213.4.65", scopeLabels("a"), true),
		bridgeNet("corp-lan", "10.213.9.0/26", "10.213.9.1", scopeLabels("b"), true),                                                             // wrong name
		bridgeNet(NetworkName("c"), "10.213.10.0/26", "10.213.10.1", scopeLabels("c"), false),                                                    // not internal
		bridgeNet(NetworkName("d"), "10.99.0.0/26", "10.99.0.1", scopeLabels("d"), true),                                                         // outside the pool
		bridgeNet(NetworkName("e"), "10.213.11.0/26", "10.213.11.1", scopeLabels("other"), true),                                                 // label says another scope
		bridgeNet(NetworkName("f"), "10.213.12.0/26", "10.213.12.1", map[string]string{core.LabelKind: KindNetwork, core.LabelScope: "f"}, true), // not managed
	}
	got := HostNetworks(nets, s)
	want := policy.Networks{Version: 1, Host: []netip.Addr{}, Scopes: map[string]netip.Prefix{"a": netip.MustParsePrefix("10.213.4.64/26")}}
	for _, a := range []string{"10.99.0.1", "10.213.4.65", "10.213.9.1", "10.213.10.1", "10.213.11.1", "10.213.12.1", "172.17.0.1", "172.25.0.1", "172.28.0.1", "172.28.5.5", "fd00:1::1"} {
		want.Host = append(want.Host, netip.MustParseAddr(a))
	}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Fatal(d)
	}
	// Canonical: the same networks in another order marshal the same.
	rev := append([]network.Summary(nil), nets...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if !bytes.Equal(HostNetworks(rev, s).Marshal(), got.Marshal()) {
		t.Fatal("not canonical")
	}
}

func sidecarCtr(id string, labels map[string]string, running bool) container.InspectResponse {
	c := container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: id, Name: "/" + SidecarName, State: &container.State{Running: running}},
		Config: &container.Config{Labels: labels}, NetworkSettings: &container.NetworkSettings{}}
	return c
}

func sidecarLabels(s Settings) map[string]string {
	l := s.labels()
	l[LabelRevision] = SidecarRevision
	return l
}

// Objects found by name are the plugin's only when name, labels and kind
// all say so.
func TestSquattedObjectsRefused(t *testing.T) {
	def, _ := Settings{}.Normalized()
	ctx := context.Background()
	// A user's container named like the sidecar, with copied labels of
	// another kind, or none.
	for _, labels := range []map[string]string{nil, {core.LabelManaged: "true", core.LabelKind: core.KindSandbox}, {core.LabelKind: KindSidecar}} {
		f := &fakeEngine{containers: map[string]container.InspectResponse{SidecarName: sidecarCtr("squat", labels, true)}}
		m := &Manager{Engine: f}
		if _, _, err := m.Ensure(ctx); err == nil || !strings.Contains(err.Error(), "not the egress sidecar") {
			t.Errorf("labels %v: Ensure: %v", labels, err)
		}
		if _, _, err := m.Stop(ctx, true); err == nil {
			t.Errorf("labels %v: Stop removed a look-alike", labels)
		}
		if len(f.execs) != 0 || len(f.removed) != 0 {
			t.Errorf("labels %v: acted on a look-alike: execs %v, removed %v", labels, f.execs, f.removed)
		}
	}
	// A container with the sidecar's labels under another name is not it.
	c := sidecarCtr("other", sidecarLabels(def), true)
	c.Name = "/not-the-sidecar"
	if isSidecar(c) {
		t.Error("a container with copied labels under another name passes for the sidecar")
	}
	// A user's network named like a scope network: left alone by rm, not
	// joined, not listed.
	f := &fakeEngine{networks: []network.Summary{
		bridgeNet(NetworkName("s"), "192.168.50.0/24", "192.168.50.1", scopeLabels("s"), false),
	}, containers: map[string]container.InspectResponse{}}
	m := &Manager{Engine: f}
	if ok, err := m.Release(ctx, "s"); ok || err != nil || len(f.removed) != 0 {
		t.Errorf("Release of a look-alike: %v %v, removed %v", ok, err, f.removed)
	}
	if nets, _ := m.scopeNetworks(ctx); len(nets) != 0 {
		t.Errorf("listed a look-alike: %v", nets)
	}
	// A volume named like the sidecar's data, not made by the plugin.
	f = &fakeEngine{volumes: map[string]volume.Volume{VolumeName: {Name: VolumeName, Labels: map[string]string{core.LabelManaged: "true"}}}}
	m = &Manager{Engine: f, Images: fakeImages{}}
	if _, err := m.Kept(ctx); err == nil || !strings.Contains(err.Error(), "not the egress data") {
		t.Errorf("Kept with a look-alike volume: %v", err)
	}
	// One with the right labels whose driver options bind a host folder.
	f = &fakeEngine{volumes: map[string]volume.Volume{VolumeName: {Name: VolumeName, Driver: "local",
		Labels:  map[string]string{core.LabelManaged: "true", core.LabelKind: KindData},
		Options: map[string]string{"type": "none", "o": "bind", "device": "/tmp/x"}}}}
	m = &Manager{Engine: f, Images: fakeImages{}}
	if _, err := m.Kept(ctx); err == nil || !strings.Contains(err.Error(), "not the egress data") {
		t.Errorf("Kept with a bind look-alike volume: %v", err)
	}
}

// The networks file is pushed only when it changed: when the link next to
// the sidecar's file names the same version, a refresh is a stat and a
// network list, and no exec.
func TestRefreshPushesOnlyChanges(t *testing.T) {
	def, _ := Settings{}.Normalized()
	nets := []network.Summary{bridgeNet("bridge", "172.17.0.0/16", "", nil, false)}
	f := &fakeEngine{networks: nets, files: map[string][]byte{}, links: map[string]string{}, containers: map[string]container.InspectResponse{
		SidecarName: sidecarCtr("sc1", sidecarLabels(def), true)}}
	m := &Manager{Engine: f}
	cur := HostNetworks(nets, def).Marshal()
	sum := sha256.Sum256(cur)
	f.links["sc1:"+NetworksHashLink] = DataDir + "/" + hex.EncodeToString(sum[:])
	if err := m.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(f.execs) != 0 {
		t.Fatalf("pushed an unchanged state: %v", f.execs)
	}
	// A network created since: pushed over the version seen (the fake
	// exec fails, after being asked for).
	f.networks = append(f.networks, bridgeNet("later", "172.25.0.0/16", "172.25.0.1", nil, false))
	err := m.Refresh(context.Background())
	want := "sc1 " + core.HelperPath + " proxy networks --networks " + NetworksFile + " --if-match " + hex.EncodeToString(sum[:]) + " set"
	if len(f.execs) != 1 || strings.Join(f.execs[0], " ") != want || err == nil {
		t.Fatalf("execs %v, err %v", f.execs, err)
	}
	// No link (a file written by an older helper): the file is read, and
	// pushed again so that the link exists from then on.
	f.networks = nets
	f.execs = nil
	delete(f.links, "sc1:"+NetworksHashLink)
	f.files["sc1:"+NetworksFile] = cur
	_ = m.Refresh(context.Background())
	if len(f.execs) != 1 || strings.Join(f.execs[0], " ") != want {
		t.Fatalf("without the link: execs %v", f.execs)
	}
}

// Kept settings: from the container's labels; when the container is
// gone, from the record in its volume; a plain start uses them, other
// settings are a mismatch (unless replace).
func TestKeptSettings(t *testing.T) {
	ctx := context.Background()
	pinned, _ := Settings{OutboundNetwork: "lab", Hosts: []string{"up.test=10.9.0.4"}, NoDNS: true}.Normalized()
	f := &fakeEngine{containers: map[string]container.InspectResponse{SidecarName: sidecarCtr("sc1", sidecarLabels(pinned), true)}}
	m := &Manager{Engine: f}
	k, err := m.Kept(ctx)
	if err != nil || k == nil || k.Hash() != pinned.Hash() {
		t.Fatalf("kept from labels: %+v %v", k, err)
	}
	// Other settings: a mismatch, and nothing is touched.
	_, _, err = m.Start(ctx, Settings{}, true, false)
	if err == nil || core.AsError(err).Code != CodeEgressMismatch || !strings.Contains(err.Error(), "lab") {
		t.Fatalf("start with the defaults against kept settings: %v", err)
	}
	if len(f.removed) != 0 || len(f.execs) != 0 {
		t.Fatalf("a refused start acted: %v %v", f.removed, f.execs)
	}
	// The settings record round-trips.
	back, err := parseSettingsRecord(pinned.record())
	if err != nil || back.Hash() != pinned.Hash() {
		t.Fatalf("record: %+v %v", back, err)
	}
	if _, err := parseSettingsRecord([]byte(`{"outbound_network":"x","subnet_pool":"10.213.0.0/16","subnet_bits":26,"hosts":[],"no_dns":false,"extra":1}`)); err == nil {
		t.Fatal("unknown field accepted")
	}
	// The container is gone (egress stop --rm, prune, docker rm): the
	// record in the volume, read through a container that is never
	// started and removed after.
	f = &fakeEngine{containers: map[string]container.InspectResponse{},
		volumes: map[string]volume.Volume{VolumeName: {Name: VolumeName, Labels: map[string]string{core.LabelManaged: "true", core.LabelKind: KindData}}},
		files:   map[string][]byte{"tmp1:" + SettingsFile: pinned.record()}}
	m = &Manager{Engine: f, Images: fakeImages{}}
	k, err = m.Kept(ctx)
	if err != nil || k == nil || k.Hash() != pinned.Hash() {
		t.Fatalf("kept from the volume: %+v %v", k, err)
	}
	if len(f.created) != 1 || !strings.HasPrefix(f.created[0], core.PluginObjectPrefix) || len(f.removed) != 1 || f.removed[0] != "container tmp1" {
		t.Fatalf("reader container: created %v, removed %v", f.created, f.removed)
	}
	_, _, err = m.Start(ctx, Settings{OutboundNetwork: "bridge"}, true, false)
	if err == nil || core.AsError(err).Code != CodeEgressMismatch {
		t.Fatalf("start with other settings against settings kept in the volume: %v", err)
	}
	// No container, no volume: nothing kept.
	f = &fakeEngine{containers: map[string]container.InspectResponse{}}
	m = &Manager{Engine: f, Images: fakeImages{}}
	if k, err := m.Kept(ctx); err != nil || k != nil {
		t.Fatalf("nothing kept: %+v %v", k, err)
	}
}

// The sidecar's entrypoint, to the letter, and the helper reads it back
// as it was meant: both sides use proxy.ServeArgs. The helper's defaults
// are the paths the plugin names.
func TestSidecarServeArgs(t *testing.T) {
	s, err := Settings{Hosts: []string{"up.test=10.9.0.4"}, NoDNS: true}.Normalized()
	if err != nil {
		t.Fatal(err)
	}
	nets := []network.Summary{bridgeNet("bridge", "172.17.0.0/16", "172.17.0.1", nil, false)}
	argv := serveArgs(s, nets).Argv()
	want := "proxy --listen :3128 --policy " + PolicyFile + " --log " + LogFile + " --stats " + StatsFile +
		" --networks " + NetworksFile + " --host-probe --settings " + string(s.record()) + " --settings-file " + SettingsFile +
		" --clients " + s.Pool.String() + " --deny " + s.Pool.String() + " --deny 172.17.0.1/32 --host up.test=10.9.0.4 --no-dns"
	if got := strings.Join(argv, " "); got != want {
		t.Errorf("entrypoint:\n%s\nwant\n%s", got, want)
	}
	back, err := proxy.ParseServeArgs(argv[1:])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(argv, back.Argv()); diff != "" {
		t.Errorf("the helper reads another command line (-plugin +helper):\n%s", diff)
	}
	cfg := back.Config()
	if len(cfg.Deny) != 2 || cfg.Clients[0] != s.Pool || len(cfg.Hosts["up.test"]) != 1 || !cfg.NoDNS {
		t.Errorf("config: %+v", cfg)
	}
	for _, p := range [][2]string{{PolicyFile, proxy.DefaultPolicyFile}, {LogFile, proxy.DefaultLogFile},
		{StatsFile, proxy.DefaultStatsFile}, {NetworksFile, proxy.DefaultNetworksFile}} {
		if p[0] != p[1] {
			t.Errorf("the plugin's %s is the helper's %s", p[0], p[1])
		}
	}
	if proxy.DefaultListen != ":"+strconv.Itoa(ProxyPort) {
		t.Errorf("the helper listens on %s by default, the plugin expects port %d", proxy.DefaultListen, ProxyPort)
	}
}

// An engine that cannot enforce the sidecar's memory and pids limits
// (rootless Docker on cgroup v1) gets no sidecar: engine_unsupported, and
// no container was created.
func TestStartRefusesEngineWithoutLimits(t *testing.T) {
	f := &fakeEngine{containers: map[string]container.InspectResponse{}, noLimits: true,
		networks: []network.Summary{bridgeNet("bridge", "172.17.0.0/16", "172.17.0.1", nil, false)},
		volumes:  map[string]volume.Volume{}}
	m := &Manager{Engine: f, Images: fakeImages{}}
	_, _, err := m.Start(context.Background(), Settings{}, false, false)
	if e := core.AsError(err); e == nil || e.Code != core.CodeEngineUnsupported || !strings.Contains(e.Message, "egress sidecar's memory") || !strings.Contains(e.Message, "rootless") {
		t.Fatalf("start on an engine without limits: %v", err)
	}
	for _, c := range f.created {
		if c == SidecarName {
			t.Fatalf("the sidecar was created: %v", f.created)
		}
	}
}
