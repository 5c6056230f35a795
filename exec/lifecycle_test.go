package exec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/google/go-cmp/cmp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

func TestParseFilters(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want Filter
		bad  string
	}{
		{in: nil, want: Filter{}},
		{in: []string{"scope=u1", "scope=u2", "session=", "session=chatA", "state=idle", "label=a=b", "label=k"},
			want: Filter{Scopes: []string{"u1", "u2"}, Sessions: []string{"", "chatA"}, States: []string{"idle"}, Labels: []string{"a=b", "k"}}},
		{in: []string{"STATE=expired-with-data"}, want: Filter{States: []string{StateExpired}}},
		{in: []string{"scope"}, bad: "want KEY=VALUE"},
		{in: []string{"scope=../x"}, bad: "invalid scope name"},
		{in: []string{"session=a.b"}, bad: "invalid session name"},
		{in: []string{"state=sleeping"}, bad: "state is one of running, idle, expired-with-data"},
		{in: []string{"label="}, bad: "label=KEY"},
		{in: []string{"colour=red"}, bad: `unknown key "colour"`},
	} {
		got, err := ParseFilters(tc.in)
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) || core.AsError(err).Code != core.CodeBadFlag {
				t.Errorf("%v: want a bad_flag error with %q, got %v", tc.in, tc.bad, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.in, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%v (-want +got):\n%s", tc.in, d)
		}
	}
}

func TestFilterMatch(t *testing.T) {
	s := &Sandbox{Scope: "u1", Session: "", State: StateIdle}
	for _, tc := range []struct {
		f    Filter
		want bool
	}{
		{Filter{}, true},
		{Filter{Scopes: []string{"u2", "u1"}}, true},
		{Filter{Scopes: []string{"u2"}}, false},
		{Filter{Sessions: []string{""}}, true},
		{Filter{Sessions: []string{"chat"}}, false},
		{Filter{States: []string{StateRunning}}, false},
		{Filter{Scopes: []string{"u1"}, States: []string{StateIdle, StateRunning}}, true},
		{Filter{Labels: []string{"x=y"}}, true}, // the engine applies labels
	} {
		if got := tc.f.Match(s); got != tc.want {
			t.Errorf("%+v: got %v", tc.f, got)
		}
	}
}

func sbLabels(scope, session string, extra ...string) map[string]string {
	l := map[string]string{core.LabelManaged: "true", core.LabelKind: core.KindSandbox, core.LabelScope: scope, core.LabelSession: session,
		core.LabelImage: "img:1", core.LabelNetwork: "none", core.LabelIdleTTL: "10m0s"}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

func volLabels(kind, scope, session string) map[string]string {
	l := map[string]string{core.LabelManaged: "true", core.LabelKind: kind, core.LabelScope: scope}
	if session != "" {
		l[core.LabelSession] = session
	}
	return l
}

// sbMounts are the mounts the plugin gives a sandbox of t.
func sbMounts(t core.Target) []container.MountPoint {
	return []container.MountPoint{
		{Type: mount.TypeVolume, Name: t.WorkspaceVolume(), Destination: core.WorkspaceDir, RW: true},
		{Type: mount.TypeVolume, Name: t.UserVolume(), Destination: core.UserDir, RW: true},
		{Type: mount.TypeVolume, Name: helperVolumeStart + "0.1.0.h.amd64", Destination: core.HelperDir, RW: false},
	}
}

// sbCtr is a list entry of the plugin's own sandbox container of
// scope[/session] (name, labels and mounts).
func sbCtr(id, state string, created int64, scope, session string, extra ...string) container.Summary {
	t := core.Target{Scope: scope, Session: session}
	return container.Summary{ID: id, Names: []string{"/" + t.ContainerName()}, State: state, Created: created,
		Labels: sbLabels(scope, session, extra...), Mounts: sbMounts(t)}
}

func TestAssemble(t *testing.T) {
	cs := []container.Summary{
		sbCtr("aaaaaaaaaaaaaaaa", "running", 100, "u1", ""),
		sbCtr("bbbbbbbbbbbbbbbb", "created", 200, "u1", "chat"),
		sbCtr("cccccccccccccccc", "exited", 50, "u2", ""),
		// A second container of u2 (a new one starting while the old is
		// removed): the running one is shown.
		sbCtr("dddddddddddddddd", "running", 60, "u2", ""),
		{ID: "eeeeeeeeeeeeeeee", State: "running", Labels: sbLabels("../bad", "")},
		{ID: "ffffffffffffffff", State: "running", Labels: map[string]string{core.LabelManaged: "true", core.LabelKind: core.KindSeeder}},
	}
	// Look-alikes: none of them is a sandbox.
	for i, c := range lookAlikeContainers("u9") {
		c.ID = fmt.Sprintf("%016d", i)
		cs = append(cs, c)
	}
	vols := []*volume.Volume{
		{Name: "docker-sandbox-u1.user", Labels: volLabels(core.KindUser, "u1", "")},
		{Name: "docker-sandbox-u1.chat.ws", Labels: volLabels(core.KindWorkspace, "u1", "chat")},
		{Name: "docker-sandbox-u3.user", Labels: volLabels(core.KindUser, "u3", ""), CreatedAt: "2026-01-02T03:04:05Z"},
		{Name: "docker-sandbox-u3.old.ws", Labels: volLabels(core.KindWorkspace, "u3", "old"), CreatedAt: "2026-01-01T00:00:00Z"},
		{Name: "renamed", Labels: volLabels(core.KindUser, "u4", "")},                     // name does not match its labels
		{Name: "docker-sandbox-helper-x", Labels: volLabels(core.KindHelper, "", "")},     // not a sandbox's
		{Name: "docker-sandbox-u5.user", Labels: volLabels(core.KindWorkspace, "u5", "")}, // a workspace without a session
	}
	vols = append(vols, lookAlikeVolumes("u9")...)
	type row struct {
		Target, State, Container string
		Volumes                  []string
		Created                  time.Time
	}
	var got []row
	for _, s := range assemble(cs, vols) {
		got = append(got, row{s.Target().String(), s.State, s.Container, s.Volumes, s.Created})
	}
	want := []row{
		{"u1", StateIdle, "aaaaaaaaaaaa", []string{"docker-sandbox-u1.user"}, time.Unix(100, 0).UTC()},
		{"u1/chat", StateStarting, "bbbbbbbbbbbb", []string{"docker-sandbox-u1.chat.ws"}, time.Unix(200, 0).UTC()},
		{"u2", StateIdle, "dddddddddddd", []string{}, time.Unix(60, 0).UTC()},
		{"u3", StateExpired, "", []string{"docker-sandbox-u3.user"}, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		{"u3/old", StateExpired, "", []string{"docker-sandbox-u3.old.ws"}, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("assemble (-want +got):\n%s", d)
	}
}

func TestContainerState(t *testing.T) {
	for in, want := range map[string]string{"running": StateIdle, "created": StateStarting, "paused": StatePaused,
		"exited": StateStopping, "dead": StateStopping, "removing": StateStopping, "restarting": StateStopping} {
		if got := containerState(in); got != want {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
	}
}

func TestPlanContainers(t *testing.T) {
	now := time.Unix(10_000, 0)
	old, young := now.Add(-time.Hour).Unix(), now.Add(-time.Second).Unix()
	kind := func(k string) map[string]string {
		return map[string]string{core.LabelManaged: "true", core.LabelKind: k}
	}
	sb := func(state string, created int64, scope string, extra ...string) container.Summary {
		return sbCtr(scope, state, created, scope, "", extra...)
	}
	seeder := func(id, state string, created int64) container.Summary {
		return container.Summary{ID: id, Names: []string{"/happy_" + id}, State: state, Created: created, Labels: kind(core.KindSeeder),
			Command: core.HelperPath, Mounts: []container.MountPoint{
				{Type: mount.TypeVolume, Name: "docker-sandbox-a.user", Destination: core.UserDir, RW: true},
				{Type: mount.TypeVolume, Name: helperVolumeStart + "x", Destination: core.HelperDir, RW: true}}}
	}
	probe := func(id, state string, created int64) container.Summary {
		return container.Summary{ID: id, Names: []string{"/" + probeNameStart + id}, State: state, Created: created, Labels: kind(core.KindProbe),
			Command: core.HelperPath + " status --newest /v/docker-sandbox-a.user"}
	}
	// The egress sidecar is decided by Network.PrunePlan (package egress).
	sidecar := func(state string, created int64) container.Summary {
		return container.Summary{ID: "proxy", Names: []string{"/docker-sandbox.egress"}, State: state, Created: created, Labels: kind("egress-sidecar")}
	}
	tests := []struct {
		name       string
		cs         []container.Summary
		wantRemove []string
		wantKeep   []string
		wantProxy  bool
	}{
		{
			name: "sandboxes",
			cs: []container.Summary{
				sb("running", old, "run"),
				sb("exited", young, "exited"), // no grace: it will never run again
				sb("dead", old, "dead"),
				sb("created", old, "created-old"),
				sb("created", young, "created-young"), // a creation in progress
				sb("paused", old, "paused"),           // a stop/rm in progress
			},
			wantRemove: []string{"exited", "dead", "created-old"},
			wantKeep:   []string{"run", "created-young", "paused"},
		},
		{
			name: "seeders and probes",
			cs: []container.Summary{
				seeder("seeder-old", "created", old),
				seeder("seeder-young", "created", young),
				probe("probe-old", "exited", old),
				probe("probe-young", "running", young),
			},
			wantRemove: []string{"seeder-old", "probe-old"},
			wantKeep:   []string{"seeder-young", "probe-young"},
		},
		{
			name:     "no sandbox uses the proxy: the sidecar is not exec's",
			cs:       []container.Summary{sidecar("running", old), sb("running", old, "a")},
			wantKeep: []string{"a"},
		},
		{
			name:      "a sandbox uses the proxy",
			cs:        []container.Summary{sidecar("running", old), sb("running", old, "a", core.LabelNetwork, "proxy")},
			wantKeep:  []string{"a"},
			wantProxy: true,
		},
		{
			name:       "an expired sandbox does not use the proxy",
			cs:         []container.Summary{sb("exited", old, "a", core.LabelNetwork, "proxy")},
			wantRemove: []string{"a"},
		},
		{
			name: "not ours",
			cs: append([]container.Summary{
				{ID: "user", Names: []string{"/user"}, State: "exited", Created: old, Labels: map[string]string{core.LabelKind: core.KindSandbox, core.LabelScope: "a"}},
				{ID: "user2", Names: []string{"/user2"}, State: "exited", Created: old, Labels: map[string]string{core.LabelManaged: "yes", core.LabelKind: core.KindSeeder}},
				// A seeder's labels on a container somebody ran, or
				// created with another command or without the helper.
				func() container.Summary { c := seeder("ran", "exited", old); return c }(),
				func() container.Summary { c := seeder("cmd", "created", old); c.Command = "sh"; return c }(),
				func() container.Summary { c := seeder("nohelper", "created", old); c.Mounts = c.Mounts[:1]; return c }(),
				// A probe's labels without its name or command.
				func() container.Summary { c := probe("pname", "exited", old); c.Names = []string{"/pname"}; return c }(),
				func() container.Summary { c := probe("pcmd", "exited", old); c.Command = "sleep 1"; return c }(),
				// The sidecar's labels under another name; another kind.
				func() container.Summary {
					c := sidecar("running", old)
					c.ID, c.Names = "side2", []string{"/proxy2"}
					return c
				}(),
				{ID: "other-kind", Names: []string{"/x"}, State: "running", Created: old, Labels: kind("sidecar")},
			}, lookAlikeContainers("a")...),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rm, keep, proxy := planContainers(tc.cs, now, time.Minute)
			if proxy != tc.wantProxy {
				t.Errorf("proxy used %v, want %v", proxy, tc.wantProxy)
			}
			var gotRm, gotKeep []string
			for _, it := range rm {
				gotRm = append(gotRm, it.ID)
				if it.Type != "container" || it.Reason == "" || it.Name == "" {
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

func TestDataCandidatesAndPlanData(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	at := func(d time.Duration) *time.Time { v := now.Add(-d); return &v }
	created := func(d time.Duration) string { return now.Add(-d).UTC().Format(time.RFC3339) }
	survivors := []container.Summary{sbCtr("x", "running", 0, "live", "s1")}
	// A look-alike of a sandbox of "gone" does not keep its data alive.
	survivors = append(survivors, lookAlikeContainers("gone")...)
	vols := []*volume.Volume{
		{Name: "docker-sandbox-live.user", Labels: volLabels(core.KindUser, "live", "")},                                // a session of the scope runs
		{Name: "docker-sandbox-live.s1.ws", Labels: volLabels(core.KindWorkspace, "live", "s1")},                        // runs
		{Name: "docker-sandbox-live.s2.ws", Labels: volLabels(core.KindWorkspace, "live", "s2")},                        // expired session
		{Name: "docker-sandbox-old.user", Labels: volLabels(core.KindUser, "old", "")},                                  // old data
		{Name: "docker-sandbox-old.a.ws", Labels: volLabels(core.KindWorkspace, "old", "a")},                            // old too
		{Name: "docker-sandbox-mixed.user", Labels: volLabels(core.KindUser, "mixed", "")},                              // old, but a session is recent
		{Name: "docker-sandbox-mixed.b.ws", Labels: volLabels(core.KindWorkspace, "mixed", "b")},                        // recent
		{Name: "docker-sandbox-unknown.user", Labels: volLabels(core.KindUser, "unknown", "")},                          // probe incomplete
		{Name: "docker-sandbox.helper.1", Labels: volLabels(core.KindHelper, "", "")},                                   // not data
		{Name: "other", Labels: volLabels(core.KindUser, "x", "")},                                                      // name does not match
		{Name: "docker-sandbox-y.user", Labels: map[string]string{core.LabelKind: core.KindUser, core.LabelScope: "y"}}, // not managed
		// Planted future times: the honest rest decides; all of them
		// planted: the volume's creation does.
		{Name: "docker-sandbox-fut.user", Labels: volLabels(core.KindUser, "fut", ""), CreatedAt: created(900 * time.Hour)},
		{Name: "docker-sandbox-allfut.user", Labels: volLabels(core.KindUser, "allfut", ""), CreatedAt: created(90 * time.Hour)},
		{Name: "docker-sandbox-newfut.user", Labels: volLabels(core.KindUser, "newfut", ""), CreatedAt: created(time.Hour)},
		{Name: "docker-sandbox-nocreated.user", Labels: volLabels(core.KindUser, "nocreated", "")},
		{Name: "docker-sandbox-gone.user", Labels: volLabels(core.KindUser, "gone", "")},
	}
	vols = append(vols, lookAlikeVolumes("ghost")...)
	cands := dataCandidates(vols, survivors)
	var names []string
	for _, v := range cands {
		names = append(names, v.Name)
	}
	want := []string{"docker-sandbox-allfut.user", "docker-sandbox-fut.user", "docker-sandbox-gone.user", "docker-sandbox-live.s2.ws",
		"docker-sandbox-mixed.b.ws", "docker-sandbox-mixed.user", "docker-sandbox-newfut.user", "docker-sandbox-nocreated.user",
		"docker-sandbox-old.a.ws", "docker-sandbox-old.user", "docker-sandbox-unknown.user"}
	if d := cmp.Diff(want, names); d != "" {
		t.Fatalf("candidates (-want +got):\n%s", d)
	}
	newest := map[string]newestInfo{
		"docker-sandbox-live.s2.ws":     {Newest: at(48 * time.Hour), Complete: true},
		"docker-sandbox-mixed.b.ws":     {Newest: at(time.Hour), Complete: true},
		"docker-sandbox-mixed.user":     {Newest: at(100 * time.Hour), Complete: true},
		"docker-sandbox-old.a.ws":       {Newest: at(30 * time.Hour), Complete: true},
		"docker-sandbox-old.user":       {Newest: at(50 * time.Hour), Complete: true},
		"docker-sandbox-unknown.user":   {Newest: at(500 * time.Hour), Complete: false},
		"docker-sandbox-fut.user":       {Newest: at(40 * time.Hour), Future: 2, Complete: true},
		"docker-sandbox-allfut.user":    {Future: 5, Complete: true},
		"docker-sandbox-newfut.user":    {Future: 5, Complete: true},
		"docker-sandbox-nocreated.user": {Future: 1, Complete: true},
		"docker-sandbox-gone.user":      {Newest: at(25 * time.Hour), Complete: true},
	}
	rm, kept := planData(cands, newest, now, 24*time.Hour)
	var gotRm, gotKept []string
	for _, it := range rm {
		gotRm = append(gotRm, it.Name)
		if it.LastUsed == nil || !strings.Contains(it.Reason, "longer than --older-than 24h") {
			t.Errorf("removed item %+v", it)
		}
		if strings.Contains(it.Name, "fut") && !strings.Contains(it.Reason, "in the future ignored") {
			t.Errorf("removed item %+v: the reason should say future times were ignored", it)
		}
	}
	for _, it := range kept {
		gotKept = append(gotKept, it.Name)
	}
	if d := cmp.Diff([]string{"docker-sandbox-allfut.user", "docker-sandbox-fut.user", "docker-sandbox-gone.user", "docker-sandbox-live.s2.ws",
		"docker-sandbox-old.a.ws", "docker-sandbox-old.user"}, gotRm); d != "" {
		t.Errorf("removed (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"docker-sandbox-mixed.b.ws", "docker-sandbox-mixed.user", "docker-sandbox-newfut.user",
		"docker-sandbox-nocreated.user", "docker-sandbox-unknown.user"}, gotKept); d != "" {
		t.Errorf("kept (-want +got):\n%s", d)
	}
	for _, it := range rm {
		switch it.Name {
		case "docker-sandbox-old.user":
			// The old scope's long-term volume counts its sessions' data:
			// its last use is the newest of both.
			if !it.LastUsed.Equal(*at(30 * time.Hour)) {
				t.Errorf("old.user last used %v, want the session's %v", it.LastUsed, at(30*time.Hour))
			}
		case "docker-sandbox-allfut.user":
			if !it.LastUsed.Equal(*at(90 * time.Hour)) {
				t.Errorf("allfut.user last used %v, want its creation %v", it.LastUsed, at(90*time.Hour))
			}
		}
	}
	for _, it := range kept {
		if it.Name == "docker-sandbox-nocreated.user" && !strings.Contains(it.Reason, "unknown") {
			t.Errorf("nocreated.user: %+v", it)
		}
	}
	// Without an answer from the probe nothing goes.
	if rm, _ := planData(cands, nil, now, 0); len(rm) != 0 {
		t.Errorf("without the probe's answer: removed %v", rm)
	}
	// --older-than 0s: data written in the last second goes too (its age
	// truncates to 0s), and so does data the engine's clock dates a
	// moment after the client's now.
	fresh := []*volume.Volume{{Name: "docker-sandbox-fresh.user", Labels: volLabels(core.KindUser, "fresh", "")}}
	for _, d := range []time.Duration{-300 * time.Millisecond, 300 * time.Millisecond} {
		w := now.Add(d)
		rm, kept := planData(fresh, map[string]newestInfo{"docker-sandbox-fresh.user": {Complete: true, Newest: &w}}, now, 0)
		if len(rm) != 1 || len(kept) != 0 {
			t.Errorf("--older-than 0s, written %v from now: removed %v, kept %v", d, rm, kept)
		}
		if rm, _ := planData(fresh, map[string]newestInfo{"docker-sandbox-fresh.user": {Complete: true, Newest: &w}}, now, time.Second); len(rm) != 0 {
			t.Errorf("--older-than 1s, written %v from now: removed %v", d, rm)
		}
	}
}

func TestPlanHelpersAndNetworks(t *testing.T) {
	h := func(s string) string { return helperVolumeStart + s }
	vols := []*volume.Volume{
		{Name: h("cur"), Labels: volLabels(core.KindHelper, "", "")},
		{Name: h("used"), Labels: volLabels(core.KindHelper, "", "")},
		{Name: h("old"), Labels: volLabels(core.KindHelper, "", "")},
		{Name: h("mine"), Labels: map[string]string{core.LabelKind: core.KindHelper}}, // not managed
		{Name: "users-helper", Labels: volLabels(core.KindHelper, "", "")},            // copied labels, another name
		{Name: "docker-sandbox-helper-x", Labels: volLabels(core.KindHelper, "", "")}, // a sandbox's namespace
		{Name: helperVolumeStart, Labels: volLabels(core.KindHelper, "", "")},         // the bare prefix
	}
	cs := []container.Summary{{ID: "c", Mounts: []container.MountPoint{{Type: mount.TypeVolume, Name: h("used")}}}}
	var got []string
	for _, it := range planHelpers(vols, cs, []string{h("cur")}) {
		got = append(got, it.Name)
	}
	if d := cmp.Diff([]string{h("old")}, got); d != "" {
		t.Errorf("helpers (-want +got):\n%s", d)
	}

	now := time.Unix(10_000, 0)
	old, young := now.Add(-time.Hour), now.Add(-time.Second)
	netLabels := func(scope string) map[string]string {
		return map[string]string{core.LabelManaged: "true", core.LabelKind: kindScopeNetwork, core.LabelScope: scope}
	}
	nets := []network.Summary{
		{ID: "n1", Name: scopeNetPrefix + "live", Created: old, Labels: netLabels("live")},
		{ID: "n2", Name: scopeNetPrefix + "gone", Created: old, Labels: netLabels("gone")},
		{ID: "n3", Name: scopeNetPrefix + "young", Created: young, Labels: netLabels("young")},
		// Not the plugin's own: another name, labels naming another
		// scope, another kind, unmanaged, no scope, a scope's name that is
		// not one.
		{ID: "u1", Name: "users", Created: old, Labels: netLabels("gone")},
		{ID: "u2", Name: scopeNetPrefix + "gone2", Created: old, Labels: netLabels("gone")},
		{ID: "u3", Name: scopeNetPrefix + "gone3", Created: old, Labels: map[string]string{core.LabelManaged: "true", core.LabelKind: "network", core.LabelScope: "gone3"}},
		{ID: "u4", Name: scopeNetPrefix + "gone4", Created: old, Labels: map[string]string{core.LabelKind: kindScopeNetwork, core.LabelScope: "gone4"}},
		{ID: "u5", Name: scopeNetPrefix, Created: old, Labels: netLabels("")},
		{ID: "u6", Name: scopeNetPrefix + "a.b", Created: old, Labels: netLabels("a.b")},
		{ID: "u7", Name: "outbound", Created: old, Labels: map[string]string{core.LabelManaged: "true", core.LabelKind: kindScopeNetwork}},
	}
	survivors := []container.Summary{
		sbCtr("s", "running", 0, "live", ""),
		// A look-alike "of" gone does not keep its network.
		{ID: "l", Names: []string{"/docker-sandbox-gone"}, Labels: sbLabels("gone", "")},
	}
	got = nil
	for _, it := range planNetworks(nets, survivors, now, time.Minute) {
		got = append(got, it.Name)
		if it.Scope != "gone" || it.Type != "network" || it.ID != "n2" {
			t.Errorf("item %+v", it)
		}
	}
	if d := cmp.Diff([]string{scopeNetPrefix + "gone"}, got); d != "" {
		t.Errorf("networks (-want +got):\n%s", d)
	}
}

// lcFake is a tiny engine for the claim protocol: one container whose execs
// follow a script, and a helper whose drain answers drainCodes in turn.
type lcFake struct {
	Engine  // the calls these tests do not make
	mu      sync.Mutex
	running bool
	// settleAfter > 0: from that exec inspect on, every exec is seen
	// ended (an exec that ended just before: the engine's lag).
	settleAfter  int
	execInspects int
	// execsAt returns the container's execs at the n-th inspect.
	execsAt    func(n int) map[string]bool // exec ID -> running
	inspects   int
	drainCodes []int // exit codes of the next drains (then 0)
	drainExit  map[string]int
	calls      []string
	list       []container.Summary
	volErr     error
	vols       []*volume.Volume // VolumeList's answer (nil: the long-term volume of u1)
	volRemoved []string
	// channelsAt returns the exec channels that the n-th helper status
	// reports (nil: the helper's status exec fails).
	channelsAt func(n int) int
	statusOut  map[string][]byte // status exec ID -> its output
	// volUsers: ContainerList's answer for a "volume" filter (the
	// containers that mount it); volErrs: VolumeRemove's errors, one per
	// call, before volErr.
	volUsers []container.Summary
	volErrs  []error
}

func (f *lcFake) ServerVersion(ctx context.Context) (types.Version, error) {
	return types.Version{Components: []types.ComponentVersion{{Name: "Engine"}}}, nil
}

func (f *lcFake) log(s string) { f.calls = append(f.calls, s) }

func (f *lcFake) ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.running {
		return container.InspectResponse{}, cerrdefs.ErrNotFound.WithMessage("No such container")
	}
	f.inspects++
	var ids []string
	for id := range f.execsAt(f.inspects) {
		ids = append(ids, id)
	}
	return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: id,
		State: &container.State{Running: true}, ExecIDs: sortedStrings(ids)}}, nil
}

func (f *lcFake) ContainerExecCreate(ctx context.Context, id string, o container.ExecOptions) (container.ExecCreateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(o.Cmd) >= 2 && o.Cmd[1] == "status" && f.channelsAt != nil {
		if f.statusOut == nil {
			f.statusOut = map[string][]byte{}
		}
		xid := fmt.Sprintf("status%d", len(f.statusOut))
		var hs HelperStatus
		hs.Processes = make([]struct {
			PID     int        `json:"pid"`
			Kind    string     `json:"kind"`
			Started *time.Time `json:"started"`
		}, f.channelsAt(len(f.statusOut)+1))
		for i := range hs.Processes {
			hs.Processes[i].PID, hs.Processes[i].Kind = 100+i, "channel"
		}
		f.statusOut[xid], _ = json.Marshal(hs)
		return container.ExecCreateResponse{ID: xid}, nil
	}
	if len(o.Cmd) < 2 || o.Cmd[1] != "drain" {
		return container.ExecCreateResponse{}, errors.New("unexpected exec " + strings.Join(o.Cmd, " "))
	}
	if f.drainExit == nil {
		f.drainExit = map[string]int{}
	}
	xid := fmt.Sprintf("drain%d", len(f.drainExit))
	if o.Cmd[len(o.Cmd)-1] == "--undo" {
		f.log("undrain")
		f.drainExit[xid] = 0
		return container.ExecCreateResponse{ID: xid}, nil
	}
	f.log("drain")
	code := 0
	if len(f.drainCodes) > 0 {
		code, f.drainCodes = f.drainCodes[0], f.drainCodes[1:]
	}
	f.drainExit[xid] = code
	return container.ExecCreateResponse{ID: xid}, nil
}

func (f *lcFake) ContainerExecAttach(ctx context.Context, id string, _ container.ExecAttachOptions) (types.HijackedResponse, error) {
	client, server := net.Pipe()
	f.mu.Lock()
	out, ok := f.statusOut[id]
	f.mu.Unlock()
	if !ok {
		server.Close() // the drain prints nothing the claim reads
		return types.NewHijackedResponse(client, ""), nil
	}
	go func() {
		_, _ = stdcopy.NewStdWriter(server, stdcopy.Stdout).Write(out)
		server.Close()
	}()
	return types.NewHijackedResponse(client, ""), nil
}

func (f *lcFake) ContainerExecInspect(ctx context.Context, id string) (container.ExecInspect, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if code, ok := f.drainExit[id]; ok {
		return container.ExecInspect{ExecID: id, ExitCode: code}, nil
	}
	if _, ok := f.statusOut[id]; ok {
		return container.ExecInspect{ExecID: id}, nil
	}
	f.execInspects++
	running := f.execsAt(f.inspects)[id]
	if f.settleAfter > 0 && f.execInspects >= f.settleAfter {
		running = false
	}
	return container.ExecInspect{ExecID: id, Running: running}, nil
}

func (f *lcFake) ContainerRemove(ctx context.Context, id string, o container.RemoveOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.volUsers {
		if c.ID == id {
			f.log("remove " + id)
			return nil
		}
	}
	f.log("remove")
	f.running = false
	return nil
}

func (f *lcFake) ContainerList(ctx context.Context, o container.ListOptions) ([]container.Summary, error) {
	if o.Filters.Contains("volume") {
		return f.volUsers, nil
	}
	return f.list, nil
}

func (f *lcFake) VolumeList(ctx context.Context, o volume.ListOptions) (volume.ListResponse, error) {
	if f.vols != nil {
		return volume.ListResponse{Volumes: f.vols}, nil
	}
	return volume.ListResponse{Volumes: []*volume.Volume{{Name: "docker-sandbox-u1.user", Labels: volLabels(core.KindUser, "u1", "")}}}, nil
}

func (f *lcFake) VolumeRemove(ctx context.Context, v string, force bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("volume-remove")
	f.volRemoved = append(f.volRemoved, v)
	if len(f.volErrs) > 0 {
		err := f.volErrs[0]
		f.volErrs = f.volErrs[1:]
		return err
	}
	return f.volErr
}

var _ Engine = (*lcFake)(nil)

// checkRemoveSandbox removes scope u1 from f and checks the error's code
// ("": none) and the engine calls.
func checkRemoveSandbox(t *testing.T, f *lcFake, force bool, wantCode string, wantCalls []string) {
	t.Helper()
	_, err := (&Manager{Engine: f}).RemoveSandbox(context.Background(), core.Target{Scope: "u1"}, force)
	if wantCode == "" && err != nil || wantCode != "" && (err == nil || core.AsError(err).Code != wantCode) {
		t.Fatalf("want code %q, got %v", wantCode, err)
	}
	if d := cmp.Diff(wantCalls, f.calls); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
}

func TestRemoveSandboxClaim(t *testing.T) {
	none := func(int) map[string]bool { return nil }
	for _, tc := range []struct {
		name       string
		execsAt    func(n int) map[string]bool
		force      bool
		volErr     error
		wantCode   string
		wantCalls  []string
		drainCodes []int
		// settleAfter: exec inspects after which e1 is seen ended even
		// before the container is inspected again (the engine's own lag).
		settleAfter int
		channelsAt  func(n int) int
	}{
		{name: "idle: drained, checked, removed", execsAt: none,
			wantCalls: []string{"drain", "remove", "volume-remove"}},
		{name: "an exec runs: busy, nothing touched", execsAt: func(int) map[string]bool { return map[string]bool{"e1": true} },
			wantCode: core.CodeScopeBusy},
		{name: "an exec got in just before the drain: undrained, busy",
			execsAt: func(n int) map[string]bool {
				if n >= 2 {
					return map[string]bool{"e1": true}
				}
				return nil
			},
			wantCode: core.CodeScopeBusy, wantCalls: []string{"drain", "undrain"}},
		{name: "a run holds the lock: looked at again, busy",
			execsAt: func(n int) map[string]bool {
				if n >= 2 {
					return map[string]bool{"e1": true}
				}
				return map[string]bool{"e1": false}
			},
			drainCodes: []int{3}, wantCode: core.CodeScopeBusy, wantCalls: []string{"drain"}},
		{name: "an exec that the engine sees ended a moment later: settled, drained, removed",
			execsAt: func(n int) map[string]bool {
				if n <= 1 {
					return map[string]bool{"e1": true}
				}
				return map[string]bool{"e1": false}
			},
			settleAfter: 3,
			wantCalls:   []string{"drain", "remove", "volume-remove"}},
		{name: "a channel's exec the helper saw only after the settle: counted again, drained, removed",
			// The channel's exec runs until the drain ends it; the
			// helper's first status predates its process.
			execsAt: func(n int) map[string]bool { return map[string]bool{"ch": n <= 1} },
			channelsAt: func(n int) int {
				if n <= 1 {
					return 0
				}
				return 1
			},
			wantCalls: []string{"drain", "remove", "volume-remove"}},
		{name: "a channel's exec that started after the first look (a call that had just returned starts one): drained, removed",
			execsAt: func(n int) map[string]bool {
				if n <= 1 {
					return nil
				}
				return map[string]bool{"ch": true}
			},
			channelsAt: func(int) int { return 1 },
			wantCalls:  []string{"drain", "remove", "volume-remove"}},
		{name: "an exec beside a channel that started after the first look: undrained, busy",
			execsAt: func(n int) map[string]bool {
				if n <= 1 {
					return nil
				}
				return map[string]bool{"ch": true, "e1": true}
			},
			channelsAt: func(int) int { return 1 },
			wantCode:   core.CodeScopeBusy, wantCalls: []string{"drain", "undrain"}},
		{name: "an exec beside a channel: busy, nothing touched",
			execsAt:    func(int) map[string]bool { return map[string]bool{"ch": true, "e1": true} },
			channelsAt: func(int) int { return 1 },
			wantCode:   core.CodeScopeBusy},
		{name: "a created exec that never starts does not block",
			execsAt:   func(int) map[string]bool { return map[string]bool{"e1": false} },
			wantCalls: []string{"drain", "remove", "volume-remove"}},
		{name: "a helper without drain: removed unclaimed", execsAt: none, drainCodes: []int{2},
			wantCalls: []string{"drain", "remove", "volume-remove"}},
		{name: "force: no check", execsAt: func(int) map[string]bool { return map[string]bool{"e1": true} }, force: true,
			wantCalls: []string{"remove", "volume-remove"}},
		{name: "volume in use: a call re-created it", execsAt: none,
			volErr:   cerrdefs.ErrConflict.WithMessage("remove docker-sandbox-u1.user: volume is in use"),
			wantCode: core.CodeScopeBusy, wantCalls: []string{"drain", "remove", "volume-remove"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &lcFake{running: true, execsAt: tc.execsAt, volErr: tc.volErr, drainCodes: tc.drainCodes, settleAfter: tc.settleAfter, channelsAt: tc.channelsAt,
				list: []container.Summary{sbCtr("c1", "running", 0, "u1", "")}}
			checkRemoveSandbox(t, f, tc.force, tc.wantCode, tc.wantCalls)
		})
	}
}

func TestCheckLimit(t *testing.T) {
	t.Setenv("DOCKER_SANDBOX_TEST_RUN", "")
	mk := func(states ...string) []container.Summary {
		var cs []container.Summary
		for i, s := range states {
			cs = append(cs, sbCtr(fmt.Sprint(i), s, 0, fmt.Sprintf("u%d", i), ""))
		}
		return cs
	}
	for _, tc := range []struct {
		max    int
		states []string
		ok     bool
	}{
		{max: 2, states: []string{"running"}, ok: true},
		{max: 2, states: []string{"running", "created"}, ok: false},
		{max: 2, states: []string{"running", "exited", "dead", "removing"}, ok: true}, // exiting ones do not count
		{max: 1, states: []string{"paused"}, ok: false},
		{max: 0, states: mk49(), ok: true}, // 0: the default, 50
	} {
		f := &lcFake{list: mk(tc.states...)}
		m := &Manager{Engine: f, MaxSandboxes: tc.max}
		err := m.checkLimit(context.Background())
		if tc.ok != (err == nil) {
			t.Errorf("max %d with %v: got %v", tc.max, tc.states, err)
		}
		if err != nil {
			if e := core.AsError(err); e.Code != core.CodeLimitReached || e.Exit != 125 || !strings.Contains(e.Message, "max_sandboxes") {
				t.Errorf("error %+v", e)
			}
		}
	}
}

func mk49() []string {
	var s []string
	for i := 0; i < 49; i++ {
		s = append(s, "running")
	}
	return s
}

// lcPausedOnce is the fake engine of run_test.go whose first exec start is
// refused as a paused container's (a stop/rm checking the sandbox).
type lcPausedOnce struct {
	*fakeEngine
	refused bool
}

func (p *lcPausedOnce) ContainerExecAttach(ctx context.Context, id string, o container.ExecAttachOptions) (types.HijackedResponse, error) {
	if !p.refused {
		p.refused = true
		p.call("ExecAttach refused")
		return types.HijackedResponse{}, errors.New("unable to upgrade to tcp, received 409")
	}
	return p.fakeEngine.ContainerExecAttach(ctx, id, o)
}

// An exec whose start the engine refuses (its container paused by a stop or
// rm checking it) has not run: the call tries again instead of failing.
func TestRunRetriesAnExecThatDidNotStart(t *testing.T) {
	f := newFake()
	f.helper = func([]string, []byte, []byte) (string, string, wire.RunStatus) { return "ran", "", wire.RunStatus{} }
	f.containers["docker-sandbox-u1.s"] = &container.Config{}
	f.running["docker-sandbox-u1.s"] = true
	e := &lcPausedOnce{fakeEngine: f}
	m := &Manager{Engine: e, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64"}}, Version: "0.1.0"}
	var out strings.Builder
	_, err := m.Run(context.Background(), testSpec(), Request{Lang: languages["sh"], Workdir: core.WorkspaceDir, Timeout: time.Second, MaxOutput: 10, Stdout: &out})
	if err != nil || out.String() != "ran" {
		t.Fatalf("err %v out %q calls %v", err, out.String(), f.calls)
	}
	want := []string{"ExecCreate", "ExecAttach refused", "Start", "ExecCreate", "ExecAttach"}
	if d := cmp.Diff(want, f.calls); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("unable to upgrade to tcp, received 409"), true},
		{errors.New("unable to upgrade to tcp, received 404"), true},
		{errors.New("unable to upgrade to tcp, received 500"), true}, // "is not running: Removal In Progress"
		{errors.New("unable to upgrade to tcp, received 200"), false},
		{core.EngineError(errors.New("unable to upgrade to tcp, received 409"), "x"), true},
		{nil, false},
	} {
		if got := execNotStarted(tc.err); got != tc.want {
			t.Errorf("execNotStarted(%v) = %v", tc.err, got)
		}
	}
}

// lookAlikeContainers are containers that look like the plugin's sandbox of
// scope (or of its session "s") in one way or another, and are not: each
// must be left out by OwnSandbox, so by ls, inspect, stop, rm, prune and the
// limit. All are running, so that counting one as live would show.
func lookAlikeContainers(scope string) []container.Summary {
	t, ts := core.Target{Scope: scope}, core.Target{Scope: scope, Session: "s"}
	var out []container.Summary
	add := func(what string, f func(c *container.Summary)) {
		c := sbCtr("lookalike-"+what, "running", 100, scope, "")
		f(&c)
		out = append(out, c)
	}
	// `docker commit` of a sandbox, then `docker run` of the image: its
	// labels, none of its mounts; with a name of its own or the sandbox's.
	add("committed-random-name", func(c *container.Summary) { c.Names, c.Mounts = []string{"/eager_turing"}, nil })
	add("committed-same-name", func(c *container.Summary) { c.Mounts = nil })
	// ... and with the image's own anonymous volumes at the sandbox's paths.
	add("committed-anonymous-volumes", func(c *container.Summary) {
		c.Mounts = []container.MountPoint{
			{Type: mount.TypeVolume, Name: "0f3c9a", Destination: core.WorkspaceDir, RW: true},
			{Type: mount.TypeVolume, Name: "8e1d2b", Destination: core.UserDir, RW: true},
			{Type: mount.TypeVolume, Name: "77aa01", Destination: core.HelperDir, RW: false}}
	})
	// Copied labels and the right mounts, under a random name.
	add("random-name", func(c *container.Summary) { c.Names = []string{"/my-container"} })
	// Only a legacy link alias of that name.
	add("link-alias", func(c *container.Summary) { c.Names = []string{"/web/" + t.ContainerName()} })
	// The helper writable, not a helper volume, missing, or a bind mount
	// instead of the workspace volume.
	add("helper-rw", func(c *container.Summary) { c.Mounts[2].RW = true })
	add("helper-not-helper", func(c *container.Summary) { c.Mounts[2].Name = "docker-sandbox-" + scope + ".user" })
	add("no-helper", func(c *container.Summary) { c.Mounts = c.Mounts[:2] })
	// The workspace right, /opt/user missing, another volume, read-only.
	add("no-user", func(c *container.Summary) { c.Mounts = []container.MountPoint{c.Mounts[0], c.Mounts[2]} })
	add("user-other-volume", func(c *container.Summary) { c.Mounts[1].Name = "docker-sandbox-" + scope + "x.user" })
	add("user-read-only", func(c *container.Summary) { c.Mounts[1].RW = false })
	add("workspace-read-only", func(c *container.Summary) { c.Mounts[0].RW = false })
	add("bind-workspace", func(c *container.Summary) {
		c.Mounts[0] = container.MountPoint{Type: mount.TypeBind, Source: "/home/u/src", Destination: core.WorkspaceDir, RW: true}
	})
	add("two-at-workspace", func(c *container.Summary) { c.Mounts = append(c.Mounts, c.Mounts[0]) })
	// Labels that name another scope, or a session the name does not.
	add("labels-other-scope", func(c *container.Summary) { c.Labels = sbLabels(scope+"x", "") })
	add("labels-a-session", func(c *container.Summary) { c.Labels = sbLabels(scope, "s") })
	// A session's name with the scope's labels and mounts; a session's name
	// and labels with the scope's workspace.
	add("session-name-scope-labels", func(c *container.Summary) { c.Names = []string{"/" + ts.ContainerName()} })
	add("session-with-scope-workspace", func(c *container.Summary) {
		c.Names, c.Labels = []string{"/" + ts.ContainerName()}, sbLabels(scope, "s")
	})
	// Not managed, another kind, no session label on a session.
	add("unmanaged", func(c *container.Summary) { delete(c.Labels, core.LabelManaged) })
	add("managed-yes", func(c *container.Summary) { c.Labels[core.LabelManaged] = "yes" })
	add("kind-seeder", func(c *container.Summary) { c.Labels[core.LabelKind] = core.KindSeeder })
	add("session-without-label", func(c *container.Summary) {
		*c = sbCtr(c.ID, "running", 100, scope, "s")
		delete(c.Labels, core.LabelSession)
	})
	// The plugin's own namespace is never a sandbox.
	add("plugin-namespace", func(c *container.Summary) { c.Names = []string{"/docker-sandbox." + scope} })
	return out
}

// lookAlikeVolumes look like the volumes of scope (or its session "s"), and
// are not the plugin's.
func lookAlikeVolumes(scope string) []*volume.Volume {
	t, ts := core.Target{Scope: scope}, core.Target{Scope: scope, Session: "s"}
	return []*volume.Volume{
		{Name: t.UserVolume()}, // named like it, no labels
		{Name: "random-" + scope, Labels: volLabels(core.KindUser, scope, "")},                                   // copied labels, a random name
		{Name: t.UserVolume(), Labels: volLabels(core.KindUser, scope+"x", "")},                                  // labels of another scope
		{Name: t.UserVolume(), Labels: volLabels(core.KindWorkspace, scope, "")},                                 // another kind
		{Name: ts.WorkspaceVolume(), Labels: volLabels(core.KindUser, scope, "")},                                // another kind
		{Name: ts.WorkspaceVolume(), Labels: volLabels(core.KindWorkspace, scope, "t")},                          // another session
		{Name: ts.WorkspaceVolume(), Labels: volLabels(core.KindWorkspace, scope, "")},                           // no session label
		{Name: t.UserVolume(), Labels: volLabels(core.KindUser, scope, "s")},                                     // a session label on a scope's
		{Name: t.UserVolume(), Labels: map[string]string{core.LabelKind: core.KindUser, core.LabelScope: scope}}, // not managed
		{Name: "docker-sandbox." + scope + ".user", Labels: volLabels(core.KindUser, scope, "")},                 // the plugin's namespace
	}
}

func TestOwnSandbox(t *testing.T) {
	for _, tg := range []core.Target{{Scope: "u1"}, {Scope: "u1", Session: "chat"}} {
		c := sbCtr("id", "running", 0, tg.Scope, tg.Session)
		if got, ok := ownSandboxSummary(&c); !ok || got != tg {
			t.Errorf("%s: the plugin's own sandbox: got %v %v", tg, got, ok)
		}
		ins := container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: "id", Name: "/" + tg.ContainerName()},
			Config: &container.Config{Labels: c.Labels}, Mounts: c.Mounts}
		if got, ok := OwnSandboxInspect(&ins); !ok || got != tg {
			t.Errorf("%s: inspected: got %v %v", tg, got, ok)
		}
	}
	// A link alias listed first does not hide the container's own name.
	c := sbCtr("id", "running", 0, "u1", "")
	c.Names = []string{"/web/x", "/docker-sandbox-u1"}
	if got, ok := ownSandboxSummary(&c); !ok || got != (core.Target{Scope: "u1"}) {
		t.Errorf("with a link alias first: got %v %v", got, ok)
	}
	if _, ok := ownSandboxSummary(nil); ok {
		t.Errorf("nil")
	}
	if _, ok := OwnSandboxInspect(&container.InspectResponse{}); ok {
		t.Errorf("empty inspect")
	}
	for _, c := range lookAlikeContainers("u1") {
		if got, ok := ownSandboxSummary(&c); ok {
			t.Errorf("%s: taken for the sandbox of %s", c.ID, got)
		}
		ins := container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: c.ID, Name: primaryName(c.Names)},
			Config: &container.Config{Labels: c.Labels}, Mounts: c.Mounts}
		if got, ok := OwnSandboxInspect(&ins); ok {
			t.Errorf("%s (inspected): taken for the sandbox of %s", c.ID, got)
		}
	}
}

func TestOwnVolume(t *testing.T) {
	for _, tc := range []struct {
		v    *volume.Volume
		t    core.Target
		kind string
	}{
		{&volume.Volume{Name: "docker-sandbox-u1.user", Labels: volLabels(core.KindUser, "u1", "")}, core.Target{Scope: "u1"}, core.KindUser},
		{&volume.Volume{Name: "docker-sandbox-u1.s.ws", Labels: volLabels(core.KindWorkspace, "u1", "s")}, core.Target{Scope: "u1", Session: "s"}, core.KindWorkspace},
	} {
		if got, kind, ok := OwnVolume(tc.v); !ok || got != tc.t || kind != tc.kind {
			t.Errorf("%s: got %v %q %v", tc.v.Name, got, kind, ok)
		}
	}
	if _, _, ok := OwnVolume(nil); ok {
		t.Errorf("nil")
	}
	for _, v := range lookAlikeVolumes("u1") {
		if got, _, ok := OwnVolume(v); ok {
			t.Errorf("%s %v: taken for a volume of %s", v.Name, v.Labels, got)
		}
	}
}

func TestOwnScopeNetwork(t *testing.T) {
	l := map[string]string{core.LabelManaged: "true", core.LabelKind: kindScopeNetwork, core.LabelScope: "u1"}
	if s, ok := OwnScopeNetwork("docker-sandbox.net.u1", l); !ok || s != "u1" {
		t.Errorf("own network: %q %v", s, ok)
	}
	for _, name := range []string{"docker-sandbox.net.u2", "docker-sandbox-net-u1", "u1", "docker-sandbox.net.", "docker-sandbox.net.u1.x"} {
		if _, ok := OwnScopeNetwork(name, l); ok {
			t.Errorf("%s taken for the network of u1", name)
		}
	}
	for _, drop := range []string{core.LabelManaged, core.LabelKind, core.LabelScope} {
		m := map[string]string{}
		for k, v := range l {
			if k != drop {
				m[k] = v
			}
		}
		if _, ok := OwnScopeNetwork("docker-sandbox.net.u1", m); ok {
			t.Errorf("without %s: taken for the network of u1", drop)
		}
	}
}

// stop, rm and the limit act on, and count, the plugin's own sandboxes only.
func TestRemovalAndLimitIgnoreLookAlikes(t *testing.T) {
	t.Setenv("DOCKER_SANDBOX_TEST_RUN", "")
	none := func(int) map[string]bool { return nil }
	own := []container.Summary{sbCtr("own", "running", 0, "u1", ""), sbCtr("own-s", "running", 0, "u1", "s")}
	list := append(append([]container.Summary{}, own...), lookAlikeContainers("u1")...)
	for _, tc := range []struct {
		target core.Target
		exact  bool
		want   []string
	}{
		{core.Target{Scope: "u1"}, false, []string{"own", "own-s"}},
		{core.Target{Scope: "u1"}, true, []string{"own"}},
		{core.Target{Scope: "u1", Session: "s"}, false, []string{"own-s"}},
		{core.Target{Scope: "u2"}, false, nil},
	} {
		f := &lcFake{running: true, execsAt: none, list: list}
		m := &Manager{Engine: f}
		ids, err := m.containersOf(context.Background(), tc.target, tc.exact)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, ids); d != "" {
			t.Errorf("%s exact=%v (-want +got):\n%s", tc.target, tc.exact, d)
		}
	}
	f := &lcFake{list: list}
	m := &Manager{Engine: f, MaxSandboxes: 3}
	if n, err := m.CountLive(context.Background(), nil); err != nil || n != 2 {
		t.Errorf("CountLive: %d %v, want the 2 own sandboxes", n, err)
	}
	if err := m.checkLimit(context.Background()); err != nil {
		t.Errorf("look-alikes count against the limit: %v", err)
	}
	// rm removes the own volumes of the target only.
	f = &lcFake{running: true, execsAt: none, list: own, vols: append([]*volume.Volume{
		{Name: "docker-sandbox-u1.user", Labels: volLabels(core.KindUser, "u1", "")},
		{Name: "docker-sandbox-u1.s.ws", Labels: volLabels(core.KindWorkspace, "u1", "s")},
		{Name: "docker-sandbox-u1.t.ws", Labels: volLabels(core.KindWorkspace, "u1", "t")},
		{Name: "docker-sandbox-u12.user", Labels: volLabels(core.KindUser, "u12", "")},
	}, lookAlikeVolumes("u1")...)}
	m = &Manager{Engine: f}
	if _, err := m.RemoveSandbox(context.Background(), core.Target{Scope: "u1", Session: "s"}, true); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"docker-sandbox-u1.s.ws"}, f.volRemoved); d != "" {
		t.Errorf("rm u1/s removed volumes (-want +got):\n%s", d)
	}
	f.volRemoved = nil
	if _, err := m.RemoveSandbox(context.Background(), core.Target{Scope: "u1"}, true); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"docker-sandbox-u1.s.ws", "docker-sandbox-u1.t.ws", "docker-sandbox-u1.user"}, f.volRemoved); d != "" {
		t.Errorf("rm u1 removed volumes (-want +got):\n%s", d)
	}
}

func ptr[T any](v T) *T { return &v }

// lcLoseCreate is the fake engine of run_test.go in which another call wins
// the race to create the sandbox, deterministically: the moment this call's
// create of the sandbox reaches the engine, the winner's container appears
// (created, not started yet) and this create is refused as a name conflict.
type lcLoseCreate struct {
	*fakeEngine
	lost bool
}

func (l *lcLoseCreate) ContainerCreate(ctx context.Context, cfg *container.Config, hc *container.HostConfig, nc *network.NetworkingConfig, p *ocispec.Platform, name string) (container.CreateResponse, error) {
	if name == "" || l.lost {
		return l.fakeEngine.ContainerCreate(ctx, cfg, hc, nc, p, name)
	}
	l.lost = true
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, "Create lost")
	l.containers[name] = &container.Config{}
	return container.CreateResponse{}, cerrdefs.ErrConflict.WithMessage(`Conflict. The container name "/` + name + `" is already in use`)
}

func TestLaterUse(t *testing.T) {
	now := time.Unix(10_000, 0).UTC()
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	for _, tc := range []struct {
		name  string
		known *time.Time
		hs    *HelperStatus
		want  *time.Time
	}{
		{"no helper", at(-time.Hour), nil, at(-time.Hour)},
		{"later", at(-time.Hour), &HelperStatus{IdleSince: at(-time.Minute)}, at(-time.Minute)},
		{"nothing known", nil, &HelperStatus{IdleSince: at(-time.Minute)}, at(-time.Minute)},
		{"earlier", at(-time.Minute), &HelperStatus{IdleSince: at(-time.Hour)}, at(-time.Minute)},
		{"busy", at(-time.Hour), &HelperStatus{IdleSince: at(-time.Minute), Busy: true}, at(-time.Hour)},
		{"now", at(-time.Hour), &HelperStatus{IdleSince: at(0)}, at(0)},
		{"a planted future time", at(-time.Hour), &HelperStatus{IdleSince: at(time.Second)}, at(-time.Hour)},
		{"far future, nothing known", nil, &HelperStatus{IdleSince: at(1000 * time.Hour)}, nil},
	} {
		if got := laterUse(tc.known, tc.hs, now); !cmp.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A seeder left by a call that died between its create and its removal
// holds the scope's volume: rm removes it and then the volume (with
// --force any seeder; without, one older than maxCreateWait, which no
// live call has). Anything else holding the volume, or a young seeder
// without --force: scope_busy, nothing of theirs removed.
func TestRemoveSandboxDeadSeeder(t *testing.T) {
	inUse := cerrdefs.ErrConflict.WithMessage("remove docker-sandbox-u1.user: volume is in use - [s1]")
	seeder := func(id string, age time.Duration) container.Summary {
		return container.Summary{ID: id, State: "created", Created: time.Now().Add(-age).Unix(), Command: core.HelperPath,
			Labels: map[string]string{core.LabelManaged: "true", core.LabelKind: core.KindSeeder},
			Mounts: []container.MountPoint{
				{Type: mount.TypeVolume, Name: "docker-sandbox-u1.user", Destination: core.UserDir, RW: true},
				{Type: mount.TypeVolume, Name: helperVolumeStart + "x", Destination: core.HelperDir, RW: true}}}
	}
	user := container.Summary{ID: "u", State: "created", Created: 1, Command: core.HelperPath, Labels: map[string]string{core.LabelKind: core.KindSeeder}}
	for _, tc := range []struct {
		name     string
		users    []container.Summary
		force    bool
		wantCode string
		want     []string
	}{
		{"an old seeder", []container.Summary{seeder("s1", 2*time.Minute)}, false, "", []string{"volume-remove", "remove s1", "volume-remove"}},
		{"a young seeder with force", []container.Summary{seeder("s1", time.Second)}, true, "", []string{"volume-remove", "remove s1", "volume-remove"}},
		{"a young seeder: a live call's", []container.Summary{seeder("s1", time.Second)}, false, core.CodeScopeBusy, []string{"volume-remove"}},
		{"an old seeder beside another container", []container.Summary{seeder("s1", 2*time.Minute), user}, true, core.CodeScopeBusy, []string{"volume-remove"}},
		{"a look-alike seeder (no managed label)", []container.Summary{user}, true, core.CodeScopeBusy, []string{"volume-remove"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &lcFake{execsAt: func(int) map[string]bool { return nil }, volUsers: tc.users, volErrs: []error{inUse}}
			checkRemoveSandbox(t, f, tc.force, tc.wantCode, tc.want)
		})
	}
}
