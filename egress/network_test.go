package egress

import (
	"context"
	"errors"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// netFake answers the network calls of Release and Scopes.
type netFake struct {
	Engine
	nets    map[string]network.Inspect
	calls   []string
	rmErr   error
	inspErr error
}

func (f *netFake) NetworkInspect(ctx context.Context, name string, _ network.InspectOptions) (network.Inspect, error) {
	if f.inspErr != nil {
		return network.Inspect{}, f.inspErr
	}
	n, ok := f.nets[name]
	if !ok {
		return n, cerrdefs.ErrNotFound.WithMessage("network " + name + " not found")
	}
	return n, nil
}

func (f *netFake) NetworkDisconnect(ctx context.Context, id, ctr string, force bool) error {
	f.calls = append(f.calls, "disconnect "+ctr)
	return nil
}

func (f *netFake) NetworkRemove(ctx context.Context, id string) error {
	f.calls = append(f.calls, "remove "+id)
	return f.rmErr
}

func (f *netFake) NetworkList(ctx context.Context, o network.ListOptions) ([]network.Summary, error) {
	var out []network.Summary
	for _, n := range f.nets {
		out = append(out, n)
	}
	return out, nil
}

func TestRelease(t *testing.T) {
	own := func(scope string, ctrs ...string) network.Inspect {
		n := network.Inspect{ID: "id-" + scope, Name: NetworkName(scope), Containers: map[string]network.EndpointResource{}, Internal: true,
			IPAM:   network.IPAM{Config: []network.IPAMConfig{{Subnet: "10.213.4.64/26"}}},
			Labels: map[string]string{core.LabelManaged: "true", core.LabelKind: KindNetwork, core.LabelScope: scope}}
		for _, c := range ctrs {
			n.Containers["cid-"+c] = network.EndpointResource{Name: c}
		}
		return n
	}
	for _, tc := range []struct {
		name      string
		net       *network.Inspect
		rmErr     error
		wantOK    bool
		wantCode  string
		wantCalls []string
	}{
		{name: "no network"},
		{name: "unused", net: ptr(own("u1")), wantOK: true, wantCalls: []string{"remove id-u1"}},
		{name: "the sidecar on it", net: ptr(own("u1", SidecarName)), wantOK: true,
			wantCalls: []string{"disconnect cid-" + SidecarName, "remove id-u1"}},
		{name: "a container on it", net: ptr(own("u1", SidecarName, "docker-sandbox-u1")), wantCode: core.CodeScopeBusy},
		{name: "in use again", net: ptr(own("u1")), rmErr: errors.New("error while removing network: network has active endpoints"),
			wantCode: core.CodeScopeBusy, wantCalls: []string{"remove id-u1"}},
		{name: "gone meanwhile", net: ptr(own("u1")), rmErr: cerrdefs.ErrNotFound.WithMessage("no such network"), wantCalls: []string{"remove id-u1"}},
		{name: "a user's network of that name", net: func() *network.Inspect { n := own("u1"); n.Labels = nil; return &n }()},
		{name: "labels of another scope", net: func() *network.Inspect { n := own("u1"); n.Labels[core.LabelScope] = "u2"; return &n }()},
		{name: "not internal", net: func() *network.Inspect { n := own("u1"); n.Internal = false; return &n }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &netFake{nets: map[string]network.Inspect{}, rmErr: tc.rmErr}
			if tc.net != nil {
				f.nets[NetworkName("u1")] = *tc.net
			}
			ok, err := (&Manager{Engine: f}).Release(context.Background(), "u1")
			if tc.wantCode == "" && err != nil || tc.wantCode != "" && (err == nil || core.AsError(err).Code != tc.wantCode) {
				t.Fatalf("want code %q, got %v", tc.wantCode, err)
			}
			if ok != tc.wantOK {
				t.Errorf("removed %v, want %v", ok, tc.wantOK)
			}
			if d := cmp.Diff(tc.wantCalls, f.calls); d != "" {
				t.Errorf("calls (-want +got):\n%s", d)
			}
		})
	}
	f := &netFake{nets: map[string]network.Inspect{"a": own("b"), "c": own("a"), "d": {Name: "users", Labels: own("x").Labels}}}
	scopes, err := (&Manager{Engine: f}).Scopes(context.Background(), nil)
	if err != nil || !cmp.Equal(scopes, []string{"a", "b"}) {
		t.Errorf("Scopes: %v %v", scopes, err)
	}
}

func ptr[T any](v T) *T { return &v }

// The sidecar goes when no sandbox uses the proxy (and it is older than the
// grace); a container with its labels under another name, or its name with
// another kind, is not it.
func TestPrunePlan(t *testing.T) {
	now := time.Unix(10_000, 0)
	old, young := now.Add(-time.Hour).Unix(), now.Add(-time.Second).Unix()
	kind := func(k string) map[string]string {
		return map[string]string{core.LabelManaged: "true", core.LabelKind: k}
	}
	sidecar := func(state string, created int64) container.Summary {
		return container.Summary{ID: "proxy", Names: []string{"/" + SidecarName}, State: state, Created: created, Labels: kind(KindSidecar)}
	}
	sb := container.Summary{ID: "a", Names: []string{"/docker-sandbox-a"}, State: "running", Created: old, Labels: kind(core.KindSandbox)}
	for _, tc := range []struct {
		name       string
		cs         []container.Summary
		proxyUsed  bool
		wantRemove []string
		wantKeep   []string
	}{
		{name: "a sidecar nobody uses", cs: []container.Summary{sidecar("running", old), sb}, wantRemove: []string{"proxy"}},
		{name: "a sidecar in use", cs: []container.Summary{sidecar("running", old), sb}, proxyUsed: true, wantKeep: []string{"proxy"}},
		{name: "a young sidecar", cs: []container.Summary{sidecar("running", young)}, wantKeep: []string{"proxy"}},
		{name: "not ours", cs: []container.Summary{
			func() container.Summary {
				c := sidecar("running", old)
				c.ID, c.Names = "side2", []string{"/proxy2"}
				return c
			}(),
			func() container.Summary {
				c := sidecar("running", old)
				c.ID, c.Names = "link", []string{"/other/" + SidecarName, "/other"}
				return c
			}(),
			{ID: "other-kind", Names: []string{"/" + SidecarName}, State: "running", Created: old, Labels: kind("sidecar")},
			{ID: "unmanaged", Names: []string{"/" + SidecarName}, State: "running", Created: old, Labels: map[string]string{core.LabelKind: KindSidecar}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rm, keep := (&Manager{}).PrunePlan(tc.cs, tc.proxyUsed, now, time.Minute)
			var gotRm, gotKeep []string
			for _, it := range rm {
				gotRm = append(gotRm, it.ID)
				if it.Type != "container" || it.Reason == "" || it.Name != SidecarName {
					t.Errorf("item %+v", it)
				}
			}
			for _, c := range keep {
				gotKeep = append(gotKeep, c.ID)
			}
			if d := cmp.Diff(tc.wantRemove, gotRm); d != "" {
				t.Errorf("removed (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantKeep, gotKeep); d != "" {
				t.Errorf("kept (-want +got):\n%s", d)
			}
		})
	}
}
