package egress

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
)

// The log of a stopped sidecar is read from the container as it is:
// nothing is started or run in it (the fake engine has no ContainerStart,
// and records every exec).
func TestLogsOfAStoppedSidecar(t *testing.T) {
	ctx := context.Background()
	def, _ := Settings{}.Normalized()
	f := &fakeEngine{containers: map[string]container.InspectResponse{SidecarName: sidecarCtr("sc1", sidecarLabels(def), false)},
		files: map[string][]byte{
			"sc1:" + LogFile + ".1": []byte("{\"n\":1}\n{\"n\":2}\n"),
			"sc1:" + LogFile:        []byte("{\"n\":3}\n{\"n\":4}\n{\"n\":5, \"partial"),
		}}
	m := &Manager{Engine: f}
	for _, tc := range []struct {
		tail int
		want string
	}{
		{-1, "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n"},
		{3, "{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n"},
		{10, "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n"},
		{0, ""},
	} {
		var out bytes.Buffer
		if err := m.Logs(ctx, false, tc.tail, &out); err != nil {
			t.Fatalf("tail %d: %v", tc.tail, err)
		}
		if d := cmp.Diff(tc.want, out.String()); d != "" {
			t.Errorf("tail %d (-want +got):\n%s", tc.tail, d)
		}
	}
	// -f has nothing to follow: refused, nothing written.
	var out bytes.Buffer
	err := m.Logs(ctx, true, -1, &out)
	if err == nil || core.AsError(err).Code != CodeEgressNotRunning || out.Len() != 0 {
		t.Fatalf("logs -f of a stopped sidecar: %v, %q", err, out.String())
	}
	if len(f.execs) != 0 || len(f.created) != 0 || len(f.removed) != 0 {
		t.Fatalf("reading a stopped sidecar's log acted on the engine: execs %v, created %v, removed %v", f.execs, f.created, f.removed)
	}
	// No log yet: nothing, no error.
	f.files = map[string][]byte{}
	out.Reset()
	if err := m.Logs(ctx, false, -1, &out); err != nil || out.Len() != 0 {
		t.Fatalf("no log: %v, %q", err, out.String())
	}
	// No sidecar at all: egress_not_running.
	f.containers = map[string]container.InspectResponse{}
	if err := m.Logs(ctx, false, -1, &out); err == nil || core.AsError(err).Code != CodeEgressNotRunning {
		t.Fatalf("no sidecar: %v", err)
	}
}

// StoredPolicy reads the policy file from the sidecar container, running
// or not, without an exec; a look-alike container is refused.
func TestStoredPolicy(t *testing.T) {
	ctx := context.Background()
	def, _ := Settings{}.Normalized()
	pf := &policy.File{Version: policy.FileVersion, Scopes: map[string]policy.Scope{
		"ci": {Token: policy.NewToken(), Rules: policy.Rules{Allow: []string{"pypi.org"}}},
	}}
	for _, running := range []bool{true, false} {
		f := &fakeEngine{containers: map[string]container.InspectResponse{SidecarName: sidecarCtr("sc1", sidecarLabels(def), running)},
			files: map[string][]byte{"sc1:" + PolicyFile: pf.Marshal()}}
		m := &Manager{Engine: f}
		for scope, want := range map[string]bool{"ci": true, "other": false} {
			has, known, err := m.StoredPolicy(ctx, scope)
			if err != nil || !known || has != want {
				t.Errorf("running %v, scope %s: has %v known %v err %v", running, scope, has, known, err)
			}
		}
		if len(f.execs) != 0 {
			t.Errorf("StoredPolicy ran execs: %v", f.execs)
		}
	}
	// No policy file yet: known, none.
	f := &fakeEngine{containers: map[string]container.InspectResponse{SidecarName: sidecarCtr("sc1", sidecarLabels(def), false)}, files: map[string][]byte{}}
	if has, known, err := (&Manager{Engine: f}).StoredPolicy(ctx, "ci"); has || !known || err != nil {
		t.Errorf("no file: %v %v %v", has, known, err)
	}
	// No sidecar container: unknown.
	f = &fakeEngine{containers: map[string]container.InspectResponse{}}
	if has, known, err := (&Manager{Engine: f}).StoredPolicy(ctx, "ci"); has || known || err != nil {
		t.Errorf("no sidecar: %v %v %v", has, known, err)
	}
	// A look-alike container with a policy file of its own is not read.
	f = &fakeEngine{containers: map[string]container.InspectResponse{SidecarName: sidecarCtr("squat", nil, true)},
		files: map[string][]byte{"squat:" + PolicyFile: pf.Marshal()}}
	if has, _, err := (&Manager{Engine: f}).StoredPolicy(ctx, "ci"); has || err == nil || !strings.Contains(err.Error(), "not the egress sidecar") {
		t.Errorf("look-alike: %v %v", has, err)
	}
}
