package exec

import (
	"testing"

	"github.com/docker/docker/api/types/system"
)

func TestResolveRuntime(t *testing.T) {
	rt := func(path string, args ...string) system.RuntimeWithStatus {
		return system.RuntimeWithStatus{Runtime: system.Runtime{Path: path, Args: args}}
	}
	runcOnly := map[string]system.RuntimeWithStatus{"runc": rt("runc"), "io.containerd.runc.v2": rt("runc")}
	both := map[string]system.RuntimeWithStatus{"runc": rt("runc"),
		"gv":      rt("/usr/bin/runsc", "--platform=ptrace", "--network=none"),
		"gv-host": rt("/usr/bin/runsc", "--platform=ptrace", "--network=host")}
	noneOnly := map[string]system.RuntimeWithStatus{"runc": rt("runc"), "runsc": rt("/usr/bin/runsc", "--network", "none")}
	ownStack := map[string]system.RuntimeWithStatus{"runc": rt("runc"), "sandboxed": rt("/opt/gvisor/runsc")}
	preferRunsc := map[string]system.RuntimeWithStatus{"a": rt("/usr/bin/runsc", "--network=none"), "runsc": rt("runsc", "--network=none")}
	for _, c := range []struct {
		name          string
		rts           map[string]system.RuntimeWithStatus
		want, network string
		out           string
		err           bool
	}{
		{"default stays", both, "", "proxy", "", false},
		{"auto without gVisor", runcOnly, "auto", "none", "", false},
		{"auto none", both, "auto", "none", "gv", false},
		{"auto proxy", both, "auto", "proxy", "gv-host", false},
		{"auto named network", both, "auto", "mynet", "gv-host", false},
		{"auto proxy, only --network=none: default", noneOnly, "auto", "proxy", "", false},
		{"auto own network stack", ownStack, "auto", "proxy", "sandboxed", false},
		{"auto prefers runsc", preferRunsc, "auto", "none", "runsc", false},
		{"explicit none", both, "gv", "none", "gv", false},
		{"explicit proxy picks sibling", both, "gv", "proxy", "gv-host", false},
		{"explicit host kept for none", both, "gv-host", "none", "gv-host", false},
		{"explicit proxy without sibling", noneOnly, "runsc", "proxy", "", true},
		{"runc untouched", both, "runc", "proxy", "runc", false},
		{"unknown untouched", both, "kata", "proxy", "kata", false},
	} {
		got, err := ResolveRuntime(system.Info{Runtimes: c.rts}, c.want, c.network)
		if got != c.out || (err != nil) != c.err {
			t.Errorf("%s: ResolveRuntime(%q, %q) = %q, %v; want %q, error %v", c.name, c.want, c.network, got, err, c.out, c.err)
		}
	}
}
