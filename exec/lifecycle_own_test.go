package exec_test

import (
	"testing"

	"github.com/docker-sandbox/docker-sandbox/egress"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/images"
)

// The lifecycle commands recognise the objects that egress and images make
// by their names and kinds (exec cannot import those packages): they must
// agree, or prune would stop recognising (or start ignoring) them.
func TestOwnNamesMatchTheirMakers(t *testing.T) {
	for _, c := range []struct{ what, got, want string }{
		{"scope network prefix", sbexec.ScopeNetPrefixForTest, egress.NetworkPrefix},
		{"scope network kind", sbexec.KindScopeNetworkForTest, egress.KindNetwork},
	} {
		if c.got != c.want {
			t.Errorf("%s: exec says %q, its maker %q", c.what, c.got, c.want)
		}
	}
	if n := egress.NetworkName("u1"); n != sbexec.ScopeNetPrefixForTest+"u1" {
		t.Errorf("egress.NetworkName(u1) = %q", n)
	}
	b := &images.Builder{Version: "0.1.0"}
	for _, arch := range images.Arches {
		for _, readable := range []bool{false, true} {
			if v := b.HelperVolume(arch, readable); len(v) <= len(sbexec.HelperVolumeStartForTest) || v[:len(sbexec.HelperVolumeStartForTest)] != sbexec.HelperVolumeStartForTest {
				t.Errorf("helper volume %q does not start with %q", v, sbexec.HelperVolumeStartForTest)
			}
		}
	}
}
