package exec

import (
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// A proxy URL is reused only from the target's own sandbox: a container
// of that name with copied or missing labels, or another target's, is not.
func TestIsSandboxOf(t *testing.T) {
	tgt := core.Target{Scope: "s", Session: "x"}
	mk := func(name string, labels map[string]string) container.InspectResponse {
		return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{Name: "/" + name}, Config: &container.Config{Labels: labels}}
	}
	ok := map[string]string{core.LabelManaged: "true", core.LabelKind: core.KindSandbox, core.LabelScope: "s", core.LabelSession: "x"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range ok {
			m[a] = b
		}
		m[k] = v
		return m
	}
	if !isSandboxOf(mk(tgt.ContainerName(), ok), tgt) {
		t.Fatal("the sandbox itself refused")
	}
	for name, c := range map[string]container.InspectResponse{
		"no labels":          mk(tgt.ContainerName(), nil),
		"another kind":       mk(tgt.ContainerName(), with(core.LabelKind, "egress-sidecar")),
		"not managed":        mk(tgt.ContainerName(), with(core.LabelManaged, "")),
		"another session":    mk(tgt.ContainerName(), with(core.LabelSession, "y")),
		"another name":       mk("docker-sandbox-s", ok),
		"a plugin object":    mk("docker-sandbox.egress", ok),
		"a user's container": mk("web", ok),
	} {
		if isSandboxOf(c, tgt) {
			t.Errorf("%s: taken for the sandbox", name)
		}
	}
}
