package exec

// Podman's Docker-compatible API (podman system service, Podman 4.3) as the
// engine. It creates and runs sandboxes with the same container settings,
// with these differences, each handled here (README "Podman"):
//   - a never-started container fills no volume: Podman copies an image's
//     content into a new volume when a container first mounts it at start,
//     so the volume seeder is started (it runs the helper without a
//     command, which exits at once) and removed;
//   - a mount's VolumeOptions.Labels are ignored: the sandbox's volumes are
//     created with their labels first (VolumeCreate);
//   - RLIMIT_NPROC is raised to 1048576 when the request does not set it,
//     which needs CAP_SYS_RESOURCE in the service: the plugin sets it
//     (PodmanNproc), also for the seeder with RLIMIT_NOFILE;
//   - a read-only root file system gets writable tmpfs mounts on /run and
//     /var/tmp (containers.conf read_only_tmpfs): the plugin mounts empty
//     read-only ones there instead, as Docker leaves them read-only;
//   - proxy mode (the egress sidecar's networks) is refused;
//   - every hardening setting is read back from the created container
//     (CheckPodmanContainer) and the sandbox refused when one is missing.

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/api/types/volume"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// PodmanComponent is the name of Podman's engine in the engine's version
// (GET /version, Components).
const PodmanComponent = "Podman Engine"

// PodmanNproc is RLIMIT_NPROC of a sandbox's processes on Podman. It is a
// count per user ID across the host (every sandbox runs as 65532), not per
// sandbox: the sandbox's own process limit is --pids. 32768 is what
// Podman's service keeps for itself; without CAP_SYS_RESOURCE it cannot give
// a container more.
const PodmanNproc = 32768

// IsPodman reports whether the engine's version names Podman's engine.
func IsPodman(v types.Version) bool {
	for _, c := range v.Components {
		if c.Name == PodmanComponent {
			return true
		}
	}
	return false
}

// podmanReadOnlyTmpfs are the paths Podman gives a read-only container a
// writable tmpfs on, unless the request mounts something there.
var podmanReadOnlyTmpfs = []string{"/run", "/var/tmp"}

// podmanTmpfsRO is the empty read-only tmpfs the plugin mounts over them.
const podmanTmpfsRO = "ro,nosuid,nodev,noexec,size=4k,mode=0755"

// podmanUlimits are the limits a Podman container of the plugin's is given:
// Podman raises both to 1048576 when unset.
func podmanUlimits(nofile int64) []*container.Ulimit {
	return []*container.Ulimit{{Name: "nofile", Soft: nofile, Hard: nofile}, {Name: "nproc", Soft: PodmanNproc, Hard: PodmanNproc}}
}

// CheckPodmanContainer compares the container Podman created with what the
// spec asked for, setting by setting: the hardening the plugin promises
// (read-only root, no capabilities, no-new-privileges, limits, no
// writable mount but /tmp and the volumes, no network, its user, removal on
// exit). It returns the first setting Podman did not apply.
func CheckPodmanContainer(s Spec, c container.InspectResponse) error {
	cfg, want := s.ContainerConfig()
	if c.ContainerJSONBase == nil || c.HostConfig == nil || c.Config == nil {
		return podmanMissing("its settings", "a container with settings", "an inspect without them")
	}
	hc := c.HostConfig
	type check struct {
		name      string
		want, got any
	}
	tmpfs := map[string]string{}
	for p, o := range hc.Tmpfs {
		tmpfs[p] = o
	}
	checks := []check{
		{"the read-only root file system (ReadonlyRootfs)", true, hc.ReadonlyRootfs},
		{"no privileges (Privileged)", false, hc.Privileged},
		{"no added capabilities (CapAdd)", 0, len(hc.CapAdd)},
		{"no-new-privileges (SecurityOpt)", true, slices.Contains(hc.SecurityOpt, "no-new-privileges") || slices.Contains(hc.SecurityOpt, "no-new-privileges:true")},
		{"the memory limit (Memory)", want.Memory, hc.Memory},
		{"no swap (MemorySwap)", want.MemorySwap, hc.MemorySwap},
		{"the CPU limit (NanoCpus)", want.NanoCPUs, hc.NanoCPUs},
		{"the process limit (PidsLimit)", *want.PidsLimit, derefInt64(hc.PidsLimit)},
		{"the open-files limit (Ulimits nofile)", s.Nofile, ulimit(hc.Ulimits, "nofile")},
		{"the network (NetworkMode)", string(want.NetworkMode), string(hc.NetworkMode)},
		{"removal when PID 1 exits (AutoRemove)", true, hc.AutoRemove},
		{"the sandbox user (User)", cfg.User, c.Config.User},
		{"the /tmp size (Tmpfs /tmp)", want.Tmpfs["/tmp"], tmpfsWithout(tmpfs["/tmp"], "rprivate", "tmpcopyup")},
	}
	for _, k := range checks {
		if fmt.Sprint(k.want) != fmt.Sprint(k.got) {
			return podmanMissing(k.name, k.want, k.got)
		}
	}
	// No other writable tmpfs (Podman adds /run and /var/tmp to read-only
	// containers; the plugin asked for read-only ones).
	for p, o := range tmpfs {
		if p == "/tmp" {
			continue
		}
		if !slices.Contains(strings.Split(o, ","), "ro") {
			return podmanMissing("no writable file system but /tmp and the volumes (Tmpfs "+p+")", "read-only", o)
		}
	}
	return nil
}

func podmanMissing(what string, want, got any) error {
	return core.Errorf(core.CodeEngineUnsupported,
		"Podman did not apply %s to the sandbox container (asked for %v, it has %v): docker sandbox does not run code without it; use a Docker Engine, or a Podman that applies it (README: Podman)", what, want, got)
}

func derefInt64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// ulimit returns the soft limit named name ("nofile"; Podman says
// RLIMIT_NOFILE) when soft and hard agree, else -1.
func ulimit(us []*container.Ulimit, name string) int64 {
	for _, u := range us {
		if u != nil && (strings.EqualFold(u.Name, name) || strings.EqualFold(u.Name, "RLIMIT_"+name)) {
			if u.Soft != u.Hard {
				return -1
			}
			return u.Soft
		}
	}
	return -1
}

// tmpfsWithout drops the options Podman adds to a tmpfs's (propagation,
// tmpcopyup), keeping the order of the rest.
func tmpfsWithout(opts string, drop ...string) string {
	var keep []string
	for _, o := range strings.Split(opts, ",") {
		if o != "" && !slices.Contains(drop, o) {
			keep = append(keep, o)
		}
	}
	return strings.Join(keep, ",")
}

// podmanRefuse returns the refusal of what Podman cannot give the spec.
func podmanRefuse(s Spec) error {
	if s.NetworkAttach != "" || (s.Network != "" && s.Network != "none") {
		return core.Errorf(core.CodeEngineUnsupported,
			"network %q on Podman: docker sandbox supports only network none there (the egress sidecar's internal scope networks and its policies need the Docker Engine's networks); use --network none or a Docker Engine", s.Network)
	}
	return nil
}

// podmanEngines holds engineIsPodman's answers by engine client: a client
// (a pointer, such as the CLI's *client.Client) talks to one engine for its
// life, so a process asks each engine's version once, not on every create
// and proxy exec (the MCP server makes a Manager per call with the same
// client). A failed call is not kept: the next one asks again.
var podmanEngines sync.Map // Engine → bool

// engineIsPodman reports whether the engine is Podman, from its version
// (asked once per client, podmanEngines).
func (m *Manager) engineIsPodman(ctx context.Context) (bool, error) {
	return m.engineIsPodmanInfo(ctx, nil)
}

// dockerByInfo reports an engine whose info names containerd's commit: the
// Docker Engine, which runs its containers through containerd. Podman has
// no containerd and leaves it empty (its compat info's ContainerdCommit,
// RuncCommit and InitBinary are empty; checked on Podman 4.3), so an
// engine this cannot tell is asked its version, whose components name
// Podman's engine (IsPodman).
func dockerByInfo(info system.Info) bool { return info.ContainerdCommit.ID != "" }

// engineIsPodmanInfo is engineIsPodman for a caller that has the engine's
// info: an info that shows the Docker Engine (dockerByInfo) answers without
// the version call, which dockerd answers by running runc and docker-init
// (15 to 30 ms of a first exec's checks here).
func (m *Manager) engineIsPodmanInfo(ctx context.Context, info *system.Info) (bool, error) {
	keep := reflect.ValueOf(m.Engine).Kind() == reflect.Pointer
	if keep {
		if p, ok := podmanEngines.Load(m.Engine); ok {
			return p.(bool), nil
		}
	}
	if info != nil && dockerByInfo(*info) {
		if keep {
			podmanEngines.Store(m.Engine, false)
		}
		return false, nil
	}
	v, err := m.Engine.ServerVersion(ctx)
	if err != nil {
		return false, core.EngineError(err, "cannot read the engine's version")
	}
	podman := IsPodman(v)
	if keep {
		podmanEngines.Store(m.Engine, podman)
	}
	return podman, nil
}

// startSeeder starts the volume seeder on Podman (which fills the volumes
// as it mounts them) and waits until it has exited.
func (m *Manager) startSeeder(ctx context.Context, id string) error {
	if err := m.Engine.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return err
	}
	wc, ec := m.Engine.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case <-wc:
		return nil
	case err := <-ec:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// withLabels keeps the volumes that carry every label filter of f
// ("key=value", or "key" for any value). Docker's volume list ANDs its label
// filters; Podman 4.3's ORs them (a list for one scope also returned every
// other managed volume), so every volume list is filtered again here.
func withLabels(vs []*volume.Volume, f filters.Args) []*volume.Volume {
	want := f.Get("label")
	var out []*volume.Volume
	for _, v := range vs {
		ok := v != nil
		for _, l := range want {
			if !ok {
				break
			}
			k, val, hasVal := strings.Cut(l, "=")
			got, has := v.Labels[k]
			ok = has && (!hasVal || got == val)
		}
		if ok {
			out = append(out, v)
		}
	}
	return out
}

// PodmanInspector reads what Podman's Docker-compatible inspect leaves out,
// from Podman's own API (GET /libpod/containers/ID/json): the container's
// cgroup and IPC namespace modes ("private", "host", "shareable", ...).
type PodmanInspector interface {
	PodmanNamespaces(ctx context.Context, id string) (cgroup, ipc string, err error)
}

// checkPodmanNamespaces refuses a sandbox sharing the host's IPC namespace
// and reports (warn) one sharing the host's cgroup namespace: Podman's
// compat API ignores CgroupnsMode and, on cgroup v1, gives the host's (README
// Podman: what holds then).
func (m *Manager) checkPodmanNamespaces(ctx context.Context, s Spec, id string) error {
	if m.Podman == nil {
		return podmanMissing("a private cgroup and IPC namespace (unverified: no reader of Podman's own API)", "private", "unknown")
	}
	cg, ipc, err := m.Podman.PodmanNamespaces(ctx, id)
	if err != nil {
		return core.EngineError(err, "cannot read the namespaces of the new sandbox container for "+s.Target.String()+" from Podman's API")
	}
	if ipc != "private" && ipc != "shareable" {
		return podmanMissing("a private IPC namespace (IpcMode)", "private", ipc)
	}
	if cg != "private" && m.Warnf != nil {
		m.Warnf("Podman gave sandbox %s the host's cgroup namespace (cgroupns %q: its Docker-compatible API ignores CgroupnsMode, and on cgroup v1 its default is the host's): code in it can read its cgroup paths on the host (/proc/self/cgroup), not change them (README: Podman)", s.Target, cg)
	}
	return nil
}

// checkPodman reads the new container back (CheckPodmanContainer, then its
// namespaces from Podman's own API).
func (m *Manager) checkPodman(ctx context.Context, s Spec, id string) error {
	c, err := m.Engine.ContainerInspect(ctx, id)
	if err != nil {
		return core.EngineError(err, "cannot inspect the new sandbox container for "+s.Target.String())
	}
	if err := CheckPodmanContainer(s, c); err != nil {
		return err
	}
	return m.checkPodmanNamespaces(ctx, s, id)
}
