package exec

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
)

// frozenFake is an engine with one sandbox (scope "a") for FrozenReader.
type frozenFake struct {
	mu       sync.Mutex
	calls    []string
	runtime  string
	paused   bool // the sandbox is paused when the read starts
	podman   bool
	pauseErr error
	others   []string // other containers mounting the volume
	// othersAfterPause mount it once the sandbox is paused
	othersAfterPause []string
	stats            map[string]fs.FileMode // path -> mode (absent: not found)
	links            map[string]string      // path -> link target
	pausedNow        bool
	body             io.Reader
	bodyErr          error // after body
}

func (f *frozenFake) log(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *frozenFake) ContainerInspect(ctx context.Context, name string) (container.InspectResponse, error) {
	t := core.Target{Scope: "a"}
	labels := map[string]string{core.LabelManaged: "true", core.LabelKind: core.KindSandbox, core.LabelScope: "a"}
	return container.InspectResponse{
		ContainerJSONBase: &container.ContainerJSONBase{ID: "c1", Name: "/" + t.ContainerName(),
			State: &container.State{Running: true, Paused: f.paused}, HostConfig: &container.HostConfig{Runtime: f.runtime}},
		Config: &container.Config{Labels: labels},
		Mounts: []container.MountPoint{
			{Type: mount.TypeVolume, Name: t.WorkspaceVolume(), Destination: core.WorkspaceDir, RW: true},
			{Type: mount.TypeVolume, Name: t.UserVolume(), Destination: core.UserDir, RW: true},
			{Type: mount.TypeVolume, Name: helperVolumeStart + "x", Destination: core.HelperDir, RW: false}},
	}, nil
}

func (f *frozenFake) ServerVersion(ctx context.Context) (types.Version, error) {
	if f.podman {
		return types.Version{Components: []types.ComponentVersion{{Name: PodmanComponent}}}, nil
	}
	return types.Version{Components: []types.ComponentVersion{{Name: "Engine"}}}, nil
}

func (f *frozenFake) ContainerList(ctx context.Context, o container.ListOptions) ([]container.Summary, error) {
	f.log("list " + strings.Join(o.Filters.Get("volume"), ","))
	cs := []container.Summary{{ID: "c1"}}
	others := f.others
	if f.pausedNow {
		others = append(others, f.othersAfterPause...)
	}
	for _, id := range others {
		cs = append(cs, container.Summary{ID: id})
	}
	return cs, nil
}

func (f *frozenFake) ContainerPause(ctx context.Context, id string) error {
	f.log("pause " + id)
	f.mu.Lock()
	f.pausedNow = f.pauseErr == nil
	f.mu.Unlock()
	return f.pauseErr
}

func (f *frozenFake) ContainerUnpause(ctx context.Context, id string) error {
	f.log("unpause " + id)
	return nil
}

func (f *frozenFake) ContainerStatPath(ctx context.Context, id, p string) (container.PathStat, error) {
	f.log("stat " + p)
	m, ok := f.stats[p]
	if !ok {
		return container.PathStat{}, errors.New("not found")
	}
	return container.PathStat{Name: p[strings.LastIndexByte(p, '/')+1:], Mode: m, LinkTarget: f.links[p]}, nil
}

func (f *frozenFake) CopyFromContainer(ctx context.Context, id, p string) (io.ReadCloser, container.PathStat, error) {
	f.log("get " + p)
	st, err := f.ContainerStatPath(ctx, id, p)
	if err != nil {
		return nil, st, err
	}
	return io.NopCloser(io.MultiReader(f.body, errReader{f.bodyErr})), st, nil
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) {
	if r.err == nil {
		return 0, io.EOF
	}
	return 0, r.err
}

// calls returns the engine calls, the stats sorted among themselves (they
// run at once).
func (f *frozenFake) sorted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := append([]string(nil), f.calls...)
	// stats and the list run concurrently: order them
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if (strings.HasPrefix(out[i], "stat ") || strings.HasPrefix(out[i], "list ")) &&
				(strings.HasPrefix(out[j], "stat ") || strings.HasPrefix(out[j], "list ")) && out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func newFrozenFake() *frozenFake {
	return &frozenFake{runtime: "runc", body: strings.NewReader("TAR"), stats: map[string]fs.FileMode{
		"/opt/workspace/d":     fs.ModeDir | 0o755,
		"/opt/workspace/d/e":   fs.ModeDir | 0o755,
		"/opt/workspace/d/e/f": 0o644,
		"/opt/user/u":          0o644,
	}, links: map[string]string{}}
}

func TestReadFrozen(t *testing.T) {
	const ws = "list docker-sandbox-a.user"
	tests := []struct {
		name      string
		path      string
		mustBeDir bool
		change    func(f *frozenFake)
		consume   error
		wantOK    bool
		wantErr   string
		wantRead  string
		wantCalls []string
	}{
		{name: "a file deep in the workspace", path: "/opt/workspace/d/e/f", wantOK: true, wantRead: "TAR",
			wantCalls: []string{ws, "pause c1", ws, "stat /opt/workspace/d", "stat /opt/workspace/d/e", "get /opt/workspace/d/e/f", "stat /opt/workspace/d/e/f", "unpause c1"}},
		{name: "a folder, as a folder", path: "/opt/workspace/d", mustBeDir: true, wantOK: true, wantRead: "TAR",
			wantCalls: []string{ws, "pause c1", ws, "get /opt/workspace/d", "stat /opt/workspace/d", "unpause c1"}},
		{name: "the long-term volume", path: "/opt/user/u", wantOK: true, wantRead: "TAR",
			wantCalls: []string{ws, "pause c1", ws, "get /opt/user/u", "stat /opt/user/u", "unpause c1"}},
		{name: "a link in a folder of the path", path: "/opt/workspace/d/e/f",
			change: func(f *frozenFake) {
				f.stats["/opt/workspace/d"] = fs.ModeSymlink | 0o777
				f.links["/opt/workspace/d"] = "/etc"
			},
			wantCalls: []string{ws, "pause c1", ws, "stat /opt/workspace/d", "stat /opt/workspace/d/e", "unpause c1"}},
		{name: "a link target reported on a folder", path: "/opt/workspace/d/e/f",
			change:    func(f *frozenFake) { f.links["/opt/workspace/d/e"] = "/etc" },
			wantCalls: []string{ws, "pause c1", ws, "stat /opt/workspace/d", "stat /opt/workspace/d/e", "unpause c1"}},
		{name: "a file where a folder is on the path", path: "/opt/workspace/d/e/f",
			change:    func(f *frozenFake) { f.stats["/opt/workspace/d/e"] = 0o644 },
			wantCalls: []string{ws, "pause c1", ws, "stat /opt/workspace/d", "stat /opt/workspace/d/e", "unpause c1"}},
		{name: "the path itself a link", path: "/opt/workspace/d/e/f",
			change: func(f *frozenFake) {
				f.stats["/opt/workspace/d/e/f"] = fs.ModeSymlink | 0o777
				f.links["/opt/workspace/d/e/f"] = "/etc/shadow"
			},
			wantCalls: []string{ws, "pause c1", ws, "stat /opt/workspace/d", "stat /opt/workspace/d/e", "get /opt/workspace/d/e/f", "stat /opt/workspace/d/e/f", "unpause c1"}},
		{name: "a FIFO", path: "/opt/workspace/d/e/f",
			change:    func(f *frozenFake) { f.stats["/opt/workspace/d/e/f"] = fs.ModeNamedPipe | 0o644 },
			wantCalls: []string{ws, "pause c1", ws, "stat /opt/workspace/d", "stat /opt/workspace/d/e", "get /opt/workspace/d/e/f", "stat /opt/workspace/d/e/f", "unpause c1"}},
		{name: "a file named as a folder (DST/)", path: "/opt/workspace/d/e/f", mustBeDir: true,
			wantCalls: []string{ws, "pause c1", ws, "stat /opt/workspace/d", "stat /opt/workspace/d/e", "get /opt/workspace/d/e/f", "stat /opt/workspace/d/e/f", "unpause c1"}},
		{name: "missing", path: "/opt/workspace/nope",
			wantCalls: []string{ws, "pause c1", ws, "get /opt/workspace/nope", "stat /opt/workspace/nope", "unpause c1"}},
		{name: "another container mounts the volume", path: "/opt/workspace/d/e/f",
			change:    func(f *frozenFake) { f.others = []string{"session"} },
			wantCalls: []string{ws}},
		{name: "another container mounts the volume once paused", path: "/opt/workspace/d/e/f",
			change:    func(f *frozenFake) { f.othersAfterPause = []string{"session"} },
			wantCalls: []string{ws, "pause c1", ws, "stat /opt/workspace/d", "stat /opt/workspace/d/e", "unpause c1"}},
		{name: "already paused", path: "/opt/workspace/d", change: func(f *frozenFake) { f.paused = true }, wantCalls: []string{ws}},
		{name: "the pause refused", path: "/opt/workspace/d", change: func(f *frozenFake) { f.pauseErr = errors.New("is paused") },
			wantCalls: []string{ws, "pause c1"}},
		{name: "gVisor", path: "/opt/workspace/d", change: func(f *frozenFake) { f.runtime = "runsc" }, wantCalls: []string{ws}},
		{name: "Podman", path: "/opt/workspace/d", change: func(f *frozenFake) { f.podman = true }, wantCalls: []string{ws}},
		{name: "the volume's root", path: "/opt/workspace"},
		{name: "outside the volumes", path: "/etc/shadow"},
		{name: "the read fails: nothing committed, stream instead", path: "/opt/user/u",
			change:    func(f *frozenFake) { f.bodyErr = errors.New("connection reset") },
			consume:   nil, // consume returns what it read
			wantRead:  "TAR",
			wantCalls: []string{ws, "pause c1", ws, "get /opt/user/u", "stat /opt/user/u", "unpause c1"}},
		{name: "the copy's own failure is the copy's", path: "/opt/user/u", consume: errors.New("too large"), wantOK: true, wantErr: "too large",
			wantRead:  "",
			wantCalls: []string{ws, "pause c1", ws, "get /opt/user/u", "stat /opt/user/u", "unpause c1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFrozenFake()
			if tt.change != nil {
				tt.change(f)
			}
			fr := &FrozenReader{Engine: f}
			var read string
			ok, err := fr.ReadDirect(context.Background(), core.Target{Scope: "a"}, tt.path, tt.mustBeDir, tarsafe.Limits{}, func(r io.Reader) error {
				if tt.consume != nil {
					return tt.consume
				}
				b, err := io.ReadAll(r)
				read = string(b)
				return err
			})
			if ok != tt.wantOK {
				t.Errorf("ok = %v, want %v", ok, tt.wantOK)
			}
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
			if read != tt.wantRead {
				t.Errorf("read %q, want %q", read, tt.wantRead)
			}
			if d := cmp.Diff(tt.wantCalls, f.sorted()); d != "" {
				t.Errorf("engine calls (-want +got):\n%s", d)
			}
		})
	}
}

// The sandbox is unpaused at the archive's end, before the copy commits.
func TestReadFrozenThawsAtEOF(t *testing.T) {
	f := newFrozenFake()
	fr := &FrozenReader{Engine: f}
	var atEOF []string
	ok, err := fr.ReadDirect(context.Background(), core.Target{Scope: "a"}, "/opt/user/u", false, tarsafe.Limits{}, func(r io.Reader) error {
		if _, err := io.ReadAll(r); err != nil {
			return err
		}
		atEOF = f.sorted()
		return nil
	})
	if !ok || err != nil {
		t.Fatalf("ok %v err %v", ok, err)
	}
	if atEOF[len(atEOF)-1] != "unpause c1" {
		t.Fatalf("not unpaused at the archive's end: %v", atEOF)
	}
	if n := strings.Count(strings.Join(f.sorted(), "\n"), "unpause"); n != 1 {
		t.Fatalf("unpaused %d times", n)
	}
}

// A canceled copy (Ctrl-C) still unpauses, and does not stream again.
func TestReadFrozenCanceled(t *testing.T) {
	f := newFrozenFake()
	f.bodyErr = context.Canceled
	ctx, cancel := context.WithCancel(context.Background())
	fr := &FrozenReader{Engine: f}
	ok, err := fr.ReadDirect(ctx, core.Target{Scope: "a"}, "/opt/user/u", false, tarsafe.Limits{}, func(r io.Reader) error {
		cancel()
		_, err := io.ReadAll(r)
		return err
	})
	if !ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("ok %v err %v, want true and canceled", ok, err)
	}
	if c := f.sorted(); c[len(c)-1] != "unpause c1" {
		t.Fatalf("not unpaused: %v", c)
	}
}

// pausedLister lists a paused container mounting the scope's volume until
// it is unpaused.
type pausedLister struct {
	mu      sync.Mutex
	lists   int
	pauseN  int // lists that still see it paused
	filters []string
}

func (p *pausedLister) ContainerList(ctx context.Context, o container.ListOptions) ([]container.Summary, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lists++
	p.filters = append(p.filters, strings.Join(o.Filters.Get("volume"), ",")+" "+strings.Join(o.Filters.Get("status"), ","))
	if p.lists <= p.pauseN {
		return []container.Summary{{ID: "scope"}, {ID: "self"}}, nil
	}
	return []container.Summary{{ID: "self"}}, nil
}

func TestWaitUnpaused(t *testing.T) {
	p := &pausedLister{pauseN: 3}
	if err := WaitUnpaused(context.Background(), p, core.Target{Scope: "a", Session: "s"}, "self"); err != nil {
		t.Fatal(err)
	}
	if p.lists != 4 {
		t.Fatalf("listed %d times, want 4 (until the other was unpaused)", p.lists)
	}
	if p.filters[0] != "docker-sandbox-a.user paused" {
		t.Fatalf("filters %q", p.filters[0])
	}
	// Paused by hand for longer: the start waits unpauseWait, then goes on.
	old := FrozenBudget
	FrozenBudget = -9900 * time.Millisecond // unpauseWait() = 100 ms
	defer func() { FrozenBudget = old }()
	p = &pausedLister{pauseN: 1 << 30}
	start := time.Now()
	if err := WaitUnpaused(context.Background(), p, core.Target{Scope: "a"}, "self"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("returned after %s, before its deadline", d)
	}
}

// An exec created just before a frozen read paused the sandbox is refused
// at its start with runc's words: the call tries again (nothing ran).
func TestExecStartPausedIsGoing(t *testing.T) {
	for _, msg := range []string{
		"cannot exec in a paused state: unknown",
		"OCI runtime exec failed: exec failed: cannot exec in a paused container (use --ignore-paused to override): unknown",
		"Container abc is paused, unpause the container before exec",
	} {
		if !(&execStartError{msg: msg}).containerGoing() {
			t.Errorf("%q: not taken for a container that is going", msg)
		}
	}
	if (&execStartError{msg: "no such file or directory"}).containerGoing() {
		t.Error("a missing helper taken for a container that is going")
	}
}
