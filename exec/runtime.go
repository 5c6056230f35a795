package exec

import (
	"context"
	"path/filepath"
	"sort"
	"strings"

	"github.com/docker/docker/api/types/system"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// RuntimeAuto is the runtime setting that picks gVisor when the engine has
// a runtime for it, else the engine's default.
const RuntimeAuto = "auto"

// HostNetSuffix names a gVisor runtime's sibling registered with
// --network=host (NAME and NAME-host): the one a sandbox with a network
// (proxy mode, a Docker network) needs, as gVisor started with
// --network=none gives the sandbox no network at all.
const HostNetSuffix = "-host"

// IsGVisor reports whether an engine runtime runs gVisor (its binary is
// runsc).
func IsGVisor(name string, rt system.RuntimeWithStatus) bool {
	p := rt.Path
	if p == "" {
		p = name
	}
	return filepath.Base(p) == "runsc"
}

// runscNetwork returns the value of a runsc runtime's --network argument
// ("" when it has none: gVisor's own network stack).
func runscNetwork(rt system.RuntimeWithStatus) string {
	for i, a := range rt.Args {
		a = strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, "network="); ok {
			return v
		}
		if a == "network" && i+1 < len(rt.Args) {
			return rt.Args[i+1]
		}
	}
	return ""
}

// ResolveRuntime returns the engine runtime a sandbox with this network
// ("none", "proxy" or a Docker network) is created with when the
// configuration asks for want:
//
//   - "" is the engine's default ("").
//   - "auto" is a gVisor runtime of the engine (one whose binary is runsc)
//     that suits the network, else the engine's default: for network none
//     one without --network=host (preferring the one named runsc), for a
//     sandbox with a network one with --network=host (or gVisor's own
//     stack).
//   - A gVisor runtime registered with --network=none, asked for a sandbox
//     with a network, is replaced by its sibling NAME-host (or another
//     gVisor runtime with --network=host); without one it is an error.
//     (A --network=host one is kept for network none: the container's own
//     network namespace has only loopback.)
//   - Any other name is returned as is (an unknown one is refused when the
//     sandbox is created).
func ResolveRuntime(info system.Info, want, network string) (string, error) {
	needsNet := network != "" && network != "none"
	suits := func(rt system.RuntimeWithStatus) bool {
		n := runscNetwork(rt)
		if needsNet {
			return n != "none"
		}
		return n != "host"
	}
	// gVisor runtimes that suit, the preferred first.
	pick := func(prefer ...string) string {
		var names []string
		for name, rt := range info.Runtimes {
			if IsGVisor(name, rt) && suits(rt) {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		for _, p := range prefer {
			for _, n := range names {
				if n == p {
					return n
				}
			}
		}
		if needsNet {
			for _, n := range names {
				if runscNetwork(info.Runtimes[n]) == "host" {
					return n
				}
			}
		}
		if len(names) > 0 {
			return names[0]
		}
		return ""
	}
	switch want {
	case "":
		return "", nil
	case RuntimeAuto:
		return pick("runsc", "runsc"+HostNetSuffix), nil
	}
	rt, ok := info.Runtimes[want]
	if !ok || !IsGVisor(want, rt) || !needsNet || suits(rt) {
		return want, nil
	}
	if n := pick(want+HostNetSuffix, strings.TrimSuffix(want, HostNetSuffix)); n != "" {
		return n, nil
	}
	return "", core.Errorf(core.CodeRuntimeUnavailable,
		"runtime %q runs gVisor with --network=none, which leaves a sandbox with network %q no network; register its sibling %q with the same path and \"--network=host\" in the engine's daemon.json \"runtimes\" (the plugin then picks it for such sandboxes), or use network none",
		want, network, want+HostNetSuffix)
}

// SandboxRuntime returns the runtime a sandbox's container runs with: the
// resolved spec's, else (the engine's default) the container's own, else
// the engine's default runtime's name; and the container's short ID ("" when
// it is gone).
func (m *Manager) SandboxRuntime(ctx context.Context, spec Spec) (runtime, id string) {
	runtime = spec.Runtime
	c, err := m.Engine.ContainerInspect(ctx, spec.ContainerName())
	if err == nil {
		id = shortID(c.ID)
		// Podman says "oci" for its default runtime.
		if runtime == "" && c.HostConfig != nil && c.HostConfig.Runtime != "oci" {
			runtime = c.HostConfig.Runtime
		}
	}
	if runtime == "" {
		if info, err := m.Engine.Info(ctx); err == nil {
			runtime = info.DefaultRuntime
		}
	}
	return runtime, id
}
