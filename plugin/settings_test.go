package plugin

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/errdefs"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

// fakeNetworks answers NetworkList with nets and NetworkInspect by exact
// name, exact ID or unique ID prefix (as the engine does), from nets plus
// hidden (networks the list does not show).
type fakeNetworks struct {
	nets, hidden []network.Summary
	listErr      error
	lists        int
}

func (f *fakeNetworks) NetworkList(ctx context.Context, o network.ListOptions) ([]network.Summary, error) {
	f.lists++
	return f.nets, f.listErr
}

func (f *fakeNetworks) NetworkInspect(ctx context.Context, ref string, o network.InspectOptions) (network.Inspect, error) {
	all := append(append([]network.Summary{}, f.nets...), f.hidden...)
	for _, n := range all {
		if n.ID == ref || n.Name == ref {
			return n, nil
		}
	}
	var found []network.Summary
	for _, n := range all {
		if strings.HasPrefix(n.ID, ref) {
			found = append(found, n)
		}
	}
	if len(found) == 1 {
		return found[0], nil
	}
	return network.Inspect{}, errdefs.NotFound(errors.New("network " + ref + " not found"))
}

const (
	idScope  = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
	idCopied = "b1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
	idPlain  = "c1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
	idPlain2 = "a1b2ffffe5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
	idHidden = "d1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
)

func TestCheckNetwork(t *testing.T) {
	f := &fakeNetworks{
		nets: []network.Summary{
			{Name: "docker-sandbox.net.other", ID: idScope, Labels: map[string]string{"com.docker.sandbox.managed": "true", "com.docker.sandbox.scope": "other"}},
			{Name: "mynet", ID: idCopied, Labels: map[string]string{"com.docker.sandbox.scope": "other"}},
			{Name: "plain", ID: idPlain, Labels: map[string]string{"com.example": "x"}},
			{Name: "plain2", ID: idPlain2},
		},
		hidden: []network.Summary{{Name: "late", ID: idHidden, Labels: map[string]string{"com.docker.sandbox.kind": "network"}}},
	}
	flag := config.Source{Kind: config.KindFlag, Name: "--network"}
	file := config.Source{Kind: config.KindUser, File: "/u/config.toml", Line: 3}
	cases := []struct {
		name string
		ok   bool
	}{
		{"none", true},
		{"proxy", true},
		{"plain", true},
		{idPlain, true},
		{idPlain[:12], true},
		{"plain2", true},
		// The plugin's namespaces, by name (no engine needed).
		{"docker-sandbox.net.other", false},
		{"docker-sandbox.egress", false},
		{"docker-sandbox-other", false},
		{"Docker-Sandbox.net.other", false},
		{"DOCKER-SANDBOX-x", false},
		{"docker-sandbox", false},
		// By ID and ID prefix.
		{idScope, false},
		{idScope[:12], false},
		{idScope[:1], false},
		// A prefix shared by a plugin network and one of the user's.
		{"a1b2", false},
		// The user's network with a copied label.
		{"mynet", false},
		{idCopied, false},
		{idCopied[:5], false},
		// Found by the engine's lookup only.
		{"late", false},
		{idHidden[:8], false},
		// Namespaces shared with the host or another container.
		{"host", false},
		{"default", false},
		{"container:abc", false},
		{"container:" + idPlain, false},
		{"", false},
		{"a b", false},
	}
	for _, tc := range cases {
		for _, src := range []config.Source{flag, file} {
			err := checkNetwork(context.Background(), f, tc.name, src)
			if (err == nil) != tc.ok {
				t.Errorf("checkNetwork(%q) = %v, want ok %v", tc.name, err, tc.ok)
				continue
			}
			if err == nil {
				continue
			}
			var e *core.Error
			want := core.CodeBadConfig
			if src.Kind == config.KindFlag {
				want = core.CodeBadFlag
			}
			if !errors.As(err, &e) || e.Code != want || e.Exit != 125 || !strings.Contains(e.Message, "refused") || !strings.Contains(e.Message, src.String()) {
				t.Errorf("checkNetwork(%q) from %s: %#v", tc.name, src, err)
			}
		}
	}
	// The engine cannot list: no silent pass.
	f.listErr = errors.New("boom")
	if err := checkNetwork(context.Background(), f, "plain", file); err == nil {
		t.Error("a list error passed")
	}
}

// A copy that may create a sandbox checks the network first; the wrapped
// runner is not called when it is refused.
func TestCheckedRunner(t *testing.T) {
	f := &fakeNetworks{nets: []network.Summary{{Name: "mynet", ID: idCopied, Labels: map[string]string{"com.docker.sandbox.scope": "x"}}}}
	inner := &countingRunner{}
	r := checkedRunner{Runner: inner, engine: f, src: config.Source{Kind: config.KindEnv, Name: "DOCKER_SANDBOX_NETWORK"}}
	if _, _, err := r.HelperExec(context.Background(), sbexec.Spec{Settings: core.Settings{Network: "mynet"}}, sbexec.RawRequest{}); err == nil || inner.n != 0 {
		t.Errorf("refused network: err %v, runner called %d times", err, inner.n)
	}
	if _, _, err := r.HelperExec(context.Background(), sbexec.Spec{Settings: core.Settings{Network: "none"}}, sbexec.RawRequest{}); err != nil || inner.n != 1 {
		t.Errorf("none: err %v, runner called %d times", err, inner.n)
	}
}

type countingRunner struct{ n int }

func (c *countingRunner) HelperExec(ctx context.Context, spec sbexec.Spec, rr sbexec.RawRequest) (int, sbexec.Result, error) {
	c.n++
	return 0, sbexec.Result{}, nil
}
