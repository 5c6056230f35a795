package exec

import (
	"context"
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
	"github.com/google/go-cmp/cmp"

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
			if err == nil || !strings.Contains(err.Error(), tc.bad) || AsError(err).Code != CodeBadFlag {
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
	l := map[string]string{LabelManaged: "true", LabelKind: KindSandbox, LabelScope: scope, LabelSession: session,
		LabelImage: "img:1", LabelNetwork: "none", LabelIdleTTL: "10m0s"}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

func volLabels(kind, scope, session string) map[string]string {
	l := map[string]string{LabelManaged: "true", LabelKind: kind, LabelScope: scope}
	if session != "" {
		l[LabelSession] = session
	}
	return l
}

func TestAssemble(t *testing.T) {
	cs := []container.Summary{
		{ID: "aaaaaaaaaaaaaaaa", State: "running", Created: 100, Labels: sbLabels("u1", "")},
		{ID: "bbbbbbbbbbbbbbbb", State: "created", Created: 200, Labels: sbLabels("u1", "chat")},
		{ID: "cccccccccccccccc", State: "exited", Created: 50, Labels: sbLabels("u2", "")},
		// A second container of u2 (a new one starting while the old is
		// removed): the running one is shown.
		{ID: "dddddddddddddddd", State: "running", Created: 60, Labels: sbLabels("u2", "")},
		{ID: "eeeeeeeeeeeeeeee", State: "running", Labels: sbLabels("../bad", "")},
		{ID: "ffffffffffffffff", State: "running", Labels: map[string]string{LabelManaged: "true", LabelKind: KindSeeder}},
	}
	vols := []*volume.Volume{
		{Name: "docker-sandbox-u1.user", Labels: volLabels(KindUser, "u1", "")},
		{Name: "docker-sandbox-u1.chat.ws", Labels: volLabels(KindWorkspace, "u1", "chat")},
		{Name: "docker-sandbox-u3.user", Labels: volLabels(KindUser, "u3", ""), CreatedAt: "2026-01-02T03:04:05Z"},
		{Name: "docker-sandbox-u3.old.ws", Labels: volLabels(KindWorkspace, "u3", "old"), CreatedAt: "2026-01-01T00:00:00Z"},
		{Name: "renamed", Labels: volLabels(KindUser, "u4", "")},                     // name does not match its labels
		{Name: "docker-sandbox-helper-x", Labels: volLabels(KindHelper, "", "")},     // not a sandbox's
		{Name: "docker-sandbox-u5.user", Labels: volLabels(KindWorkspace, "u5", "")}, // a workspace without a session
	}
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
	mk := func(id, state string, created int64, labels map[string]string) container.Summary {
		return container.Summary{ID: id, Names: []string{"/" + id}, State: state, Created: created, Labels: labels}
	}
	kind := func(k string) map[string]string { return map[string]string{LabelManaged: "true", LabelKind: k} }
	tests := []struct {
		name       string
		cs         []container.Summary
		wantRemove []string
		wantKeep   []string
	}{
		{
			name: "sandboxes",
			cs: []container.Summary{
				mk("run", "running", old, sbLabels("a", "")),
				mk("exited", "exited", young, sbLabels("b", "")), // no grace: it will never run again
				mk("dead", "dead", old, sbLabels("c", "")),
				mk("created-old", "created", old, sbLabels("d", "")),
				mk("created-young", "created", young, sbLabels("e", "")), // a creation in progress
				mk("paused", "paused", old, sbLabels("f", "")),           // a stop/rm in progress
			},
			wantRemove: []string{"exited", "dead", "created-old"},
			wantKeep:   []string{"run", "created-young", "paused"},
		},
		{
			name: "seeders and probes",
			cs: []container.Summary{
				mk("seeder-old", "created", old, kind(KindSeeder)),
				mk("seeder-young", "created", young, kind(KindSeeder)),
				mk("probe-old", "exited", old, kind(KindProbe)),
			},
			wantRemove: []string{"seeder-old", "probe-old"},
			wantKeep:   []string{"seeder-young"},
		},
		{
			name:       "a sidecar nobody uses",
			cs:         []container.Summary{mk("proxy", "running", old, kind("sidecar")), mk("sb", "running", old, sbLabels("a", ""))},
			wantRemove: []string{"proxy"},
			wantKeep:   []string{"sb"},
		},
		{
			name:     "a sidecar in use",
			cs:       []container.Summary{mk("proxy", "running", old, kind("sidecar")), mk("sb", "running", old, sbLabels("a", "", LabelNetwork, "proxy"))},
			wantKeep: []string{"sb", "proxy"}, // sidecars are decided last
		},
		{
			name:     "a young sidecar",
			cs:       []container.Summary{mk("proxy", "running", young, kind("sidecar"))},
			wantKeep: []string{"proxy"},
		},
		{
			name: "not ours",
			cs: []container.Summary{
				mk("user", "exited", old, map[string]string{LabelKind: KindSandbox, LabelScope: "a"}),
				mk("user2", "exited", old, map[string]string{LabelManaged: "yes", LabelKind: KindSeeder}),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rm, keep := planContainers(tc.cs, now, time.Minute)
			var gotRm, gotKeep []string
			for _, it := range rm {
				gotRm = append(gotRm, it.ID)
				if it.Type != "container" || it.Reason == "" || it.Name != it.ID {
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
	survivors := []container.Summary{{ID: "x", Labels: sbLabels("live", "s1")}}
	vols := []*volume.Volume{
		{Name: "docker-sandbox-live.user", Labels: volLabels(KindUser, "live", "")},                      // a session of the scope runs
		{Name: "docker-sandbox-live.s1.ws", Labels: volLabels(KindWorkspace, "live", "s1")},              // runs
		{Name: "docker-sandbox-live.s2.ws", Labels: volLabels(KindWorkspace, "live", "s2")},              // expired session
		{Name: "docker-sandbox-old.user", Labels: volLabels(KindUser, "old", "")},                        // old data
		{Name: "docker-sandbox-old.a.ws", Labels: volLabels(KindWorkspace, "old", "a")},                  // old too
		{Name: "docker-sandbox-mixed.user", Labels: volLabels(KindUser, "mixed", "")},                    // old, but a session is recent
		{Name: "docker-sandbox-mixed.b.ws", Labels: volLabels(KindWorkspace, "mixed", "b")},              // recent
		{Name: "docker-sandbox-unknown.user", Labels: volLabels(KindUser, "unknown", "")},                // probe incomplete
		{Name: "docker-sandbox-helper-1", Labels: volLabels(KindHelper, "", "")},                         // not data
		{Name: "other", Labels: volLabels(KindUser, "x", "")},                                            // name does not match
		{Name: "docker-sandbox-y.user", Labels: map[string]string{LabelKind: KindUser, LabelScope: "y"}}, // not managed
	}
	cands := dataCandidates(vols, survivors)
	var names []string
	for _, v := range cands {
		names = append(names, v.Name)
	}
	want := []string{"docker-sandbox-live.s2.ws", "docker-sandbox-mixed.b.ws", "docker-sandbox-mixed.user",
		"docker-sandbox-old.a.ws", "docker-sandbox-old.user", "docker-sandbox-unknown.user"}
	if d := cmp.Diff(want, names); d != "" {
		t.Fatalf("candidates (-want +got):\n%s", d)
	}
	newest := map[string]newestInfo{
		"docker-sandbox-live.s2.ws":   {Newest: at(48 * time.Hour), Complete: true},
		"docker-sandbox-mixed.b.ws":   {Newest: at(time.Hour), Complete: true},
		"docker-sandbox-mixed.user":   {Newest: at(100 * time.Hour), Complete: true},
		"docker-sandbox-old.a.ws":     {Newest: at(30 * time.Hour), Complete: true},
		"docker-sandbox-old.user":     {Newest: at(50 * time.Hour), Complete: true},
		"docker-sandbox-unknown.user": {Newest: at(500 * time.Hour), Complete: false},
	}
	rm, kept := planData(cands, newest, now, 24*time.Hour)
	var gotRm, gotKept []string
	for _, it := range rm {
		gotRm = append(gotRm, it.Name)
		if it.LastUsed == nil || !strings.Contains(it.Reason, "longer than --older-than 24h") {
			t.Errorf("removed item %+v", it)
		}
	}
	for _, it := range kept {
		gotKept = append(gotKept, it.Name)
	}
	if d := cmp.Diff([]string{"docker-sandbox-live.s2.ws", "docker-sandbox-old.a.ws", "docker-sandbox-old.user"}, gotRm); d != "" {
		t.Errorf("removed (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"docker-sandbox-mixed.b.ws", "docker-sandbox-mixed.user", "docker-sandbox-unknown.user"}, gotKept); d != "" {
		t.Errorf("kept (-want +got):\n%s", d)
	}
	// The old scope's long-term volume counts its sessions' data: its last
	// use is the newest of both.
	for _, it := range rm {
		if it.Name == "docker-sandbox-old.user" && !it.LastUsed.Equal(*at(30 * time.Hour)) {
			t.Errorf("old.user last used %v, want the session's %v", it.LastUsed, at(30*time.Hour))
		}
	}
	// Without an answer from the probe nothing goes.
	if rm, _ := planData(cands, nil, now, 0); len(rm) != 0 {
		t.Errorf("without the probe's answer: removed %v", rm)
	}
}

func TestPlanHelpersAndNetworks(t *testing.T) {
	vols := []*volume.Volume{
		{Name: "docker-sandbox-helper-cur", Labels: volLabels(KindHelper, "", "")},
		{Name: "docker-sandbox-helper-used", Labels: volLabels(KindHelper, "", "")},
		{Name: "docker-sandbox-helper-old", Labels: volLabels(KindHelper, "", "")},
		{Name: "docker-sandbox-helper-mine", Labels: map[string]string{LabelKind: KindHelper}},
	}
	cs := []container.Summary{{ID: "c", Mounts: []container.MountPoint{{Type: mount.TypeVolume, Name: "docker-sandbox-helper-used"}}}}
	var got []string
	for _, it := range planHelpers(vols, cs, []string{"docker-sandbox-helper-cur"}) {
		got = append(got, it.Name)
	}
	if d := cmp.Diff([]string{"docker-sandbox-helper-old"}, got); d != "" {
		t.Errorf("helpers (-want +got):\n%s", d)
	}

	now := time.Unix(10_000, 0)
	old, young := now.Add(-time.Hour), now.Add(-time.Second)
	managed := func(extra ...string) map[string]string {
		l := map[string]string{LabelManaged: "true", LabelKind: "network"}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return l
	}
	nets := []network.Summary{
		{ID: "n1", Name: "scope-live", Created: old, Labels: managed(LabelScope, "live")},
		{ID: "n2", Name: "scope-gone", Created: old, Labels: managed(LabelScope, "gone")},
		{ID: "n3", Name: "scope-young", Created: young, Labels: managed(LabelScope, "gone")},
		{ID: "n4", Name: "outbound", Created: old, Labels: managed()},
		{ID: "n5", Name: "outbound-unused", Created: old, Labels: managed()},
		{ID: "n6", Name: "users", Created: old, Labels: map[string]string{LabelScope: "gone"}},
	}
	survivors := []container.Summary{
		{ID: "s", Labels: sbLabels("live", "")},
		{ID: "p", Labels: map[string]string{LabelManaged: "true", LabelKind: "sidecar"},
			NetworkSettings: &container.NetworkSettingsSummary{Networks: map[string]*network.EndpointSettings{"outbound": {NetworkID: "n4"}}}},
	}
	got = nil
	for _, it := range planNetworks(nets, survivors, now, time.Minute) {
		got = append(got, it.Name)
	}
	if d := cmp.Diff([]string{"scope-gone", "outbound-unused"}, got); d != "" {
		t.Errorf("networks (-want +got):\n%s", d)
	}
}

// lcFake is a tiny engine for the claim protocol: one container whose execs
// follow a script, and a helper whose drain answers drainCodes in turn.
type lcFake struct {
	lifecycleEngine // the calls these tests do not make
	mu              sync.Mutex
	running         bool
	// execsAt returns the container's execs at the n-th inspect.
	execsAt    func(n int) map[string]bool // exec ID -> running
	inspects   int
	drainCodes []int // exit codes of the next drains (then 0)
	drainExit  map[string]int
	calls      []string
	list       []container.Summary
	volErr     error
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
	server.Close() // the drain prints nothing the claim reads
	return types.NewHijackedResponse(client, ""), nil
}

func (f *lcFake) ContainerExecInspect(ctx context.Context, id string) (container.ExecInspect, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if code, ok := f.drainExit[id]; ok {
		return container.ExecInspect{ExecID: id, ExitCode: code}, nil
	}
	return container.ExecInspect{ExecID: id, Running: f.execsAt(f.inspects)[id]}, nil
}

func (f *lcFake) ContainerRemove(ctx context.Context, id string, o container.RemoveOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("remove")
	f.running = false
	return nil
}

func (f *lcFake) ContainerList(ctx context.Context, o container.ListOptions) ([]container.Summary, error) {
	return f.list, nil
}

func (f *lcFake) VolumeList(ctx context.Context, o volume.ListOptions) (volume.ListResponse, error) {
	return volume.ListResponse{Volumes: []*volume.Volume{{Name: "docker-sandbox-u1.user", Labels: volLabels(KindUser, "u1", "")}}}, nil
}

func (f *lcFake) VolumeRemove(ctx context.Context, v string, force bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("volume-remove")
	return f.volErr
}

var _ lifecycleEngine = (*lcFake)(nil)

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
	}{
		{name: "idle: drained, checked, removed", execsAt: none,
			wantCalls: []string{"drain", "remove", "volume-remove"}},
		{name: "an exec runs: busy, nothing touched", execsAt: func(int) map[string]bool { return map[string]bool{"e1": true} },
			wantCode: CodeScopeBusy},
		{name: "an exec got in just before the drain: undrained, busy",
			execsAt: func(n int) map[string]bool {
				if n >= 2 {
					return map[string]bool{"e1": true}
				}
				return nil
			},
			wantCode: CodeScopeBusy, wantCalls: []string{"drain", "undrain"}},
		{name: "a run holds the lock: looked at again, busy",
			execsAt: func(n int) map[string]bool {
				if n >= 2 {
					return map[string]bool{"e1": true}
				}
				return map[string]bool{"e1": false}
			},
			drainCodes: []int{3}, wantCode: CodeScopeBusy, wantCalls: []string{"drain"}},
		{name: "a created exec that never starts does not block",
			execsAt:   func(int) map[string]bool { return map[string]bool{"e1": false} },
			wantCalls: []string{"drain", "remove", "volume-remove"}},
		{name: "a helper without drain: removed unclaimed", execsAt: none, drainCodes: []int{2},
			wantCalls: []string{"drain", "remove", "volume-remove"}},
		{name: "force: no check", execsAt: func(int) map[string]bool { return map[string]bool{"e1": true} }, force: true,
			wantCalls: []string{"remove", "volume-remove"}},
		{name: "volume in use: a call re-created it", execsAt: none,
			volErr:   cerrdefs.ErrConflict.WithMessage("remove docker-sandbox-u1.user: volume is in use"),
			wantCode: CodeScopeBusy, wantCalls: []string{"drain", "remove", "volume-remove"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &lcFake{running: true, execsAt: tc.execsAt, volErr: tc.volErr, drainCodes: tc.drainCodes,
				list: []container.Summary{{ID: "c1", Labels: sbLabels("u1", "")}}}
			m := &Manager{Engine: f}
			_, err := m.RemoveSandbox(context.Background(), Target{Scope: "u1"}, tc.force)
			if tc.wantCode == "" && err != nil || tc.wantCode != "" && (err == nil || AsError(err).Code != tc.wantCode) {
				t.Fatalf("want code %q, got %v", tc.wantCode, err)
			}
			if d := cmp.Diff(tc.wantCalls, f.calls); d != "" {
				t.Errorf("calls (-want +got):\n%s", d)
			}
		})
	}
}

func TestCheckLimit(t *testing.T) {
	t.Setenv("DOCKER_SANDBOX_TEST_RUN", "")
	mk := func(states ...string) []container.Summary {
		var cs []container.Summary
		for i, s := range states {
			cs = append(cs, container.Summary{ID: string(rune('a' + i)), State: s})
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
			if e := AsError(err); e.Code != CodeLimitReached || e.Exit != 125 || !strings.Contains(e.Message, "max_sandboxes") {
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
	_, err := m.Run(context.Background(), testSpec(), Request{Lang: languages["sh"], Workdir: WorkspaceDir, Timeout: time.Second, MaxOutput: 10, Stdout: &out})
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
		{errors.New("unable to upgrade to tcp, received 500"), false},
		{EngineError(errors.New("unable to upgrade to tcp, received 409"), "x"), true},
		{nil, false},
	} {
		if got := execNotStarted(tc.err); got != tc.want {
			t.Errorf("execNotStarted(%v) = %v", tc.err, got)
		}
	}
}
