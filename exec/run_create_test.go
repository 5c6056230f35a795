package exec

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/system"
	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// countingImages is fakeImages that counts EnsureImage calls.
type countingImages struct {
	fakeImages
	mu     sync.Mutex
	ensure []string
}

func (ci *countingImages) EnsureImage(ctx context.Context, ref string) (image.InspectResponse, error) {
	ci.mu.Lock()
	ci.ensure = append(ci.ensure, ref)
	ci.mu.Unlock()
	return ci.fakeImages.EnsureImage(ctx, ref)
}

// An image already on the engine is taken from the create's preflight
// inspect (no second inspect through Images); one that is not goes to
// Images.EnsureImage (build or pull), after every check passed.
func TestCreatePreflightImage(t *testing.T) {
	quiet := Request{Lang: languages["sh"], Workdir: core.WorkspaceDir, Timeout: time.Second, MaxOutput: 10}
	t.Run("on the engine", func(t *testing.T) {
		f := newFake()
		f.helper = okHelper
		f.images = map[string]image.InspectResponse{"rt:1": {Architecture: "arm64", Os: "linux"}}
		ci := &countingImages{fakeImages: fakeImages{img: image.InspectResponse{Architecture: "amd64"}}}
		m := &Manager{Engine: f, Images: ci, Version: "0.1.0"}
		if _, err := m.Run(context.Background(), testSpec(), quiet); err != nil {
			t.Fatal(err)
		}
		if len(ci.ensure) != 0 {
			t.Errorf("EnsureImage called for %v; the preflight inspect had the image", ci.ensure)
		}
		// The helper of the engine's image's architecture, not Images'.
		if !f.volumes["docker-sandbox.helper.vol-arm64"] || f.volumes["docker-sandbox.helper.vol-amd64"] {
			t.Errorf("volumes %v: want the arm64 helper volume", f.volumes)
		}
	})
	t.Run("not on the engine", func(t *testing.T) {
		f := newFake()
		f.helper = okHelper
		ci := &countingImages{fakeImages: fakeImages{img: image.InspectResponse{Architecture: "amd64"}}}
		m := &Manager{Engine: f, Images: ci, Version: "0.1.0"}
		if _, err := m.Run(context.Background(), testSpec(), quiet); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"rt:1"}, ci.ensure); d != "" {
			t.Errorf("EnsureImage (-want +got):\n%s", d)
		}
	})
}

func okHelper(cmd []string, code, stdin []byte) (string, string, wire.RunStatus) {
	return "", "", wire.RunStatus{}
}

// limitEngine is the fake engine with the live-sandbox limit reached and,
// optionally, an Info that fails.
type limitEngine struct {
	*fakeEngine
	full    bool
	infoErr error
}

func (l *limitEngine) ContainerList(ctx context.Context, o container.ListOptions) ([]container.Summary, error) {
	if l.full {
		return []container.Summary{sbCtr("1", "running", 0, "other", "")}, nil
	}
	return nil, nil
}

func (l *limitEngine) Info(ctx context.Context) (system.Info, error) {
	if l.infoErr != nil {
		return system.Info{}, l.infoErr
	}
	return l.fakeEngine.Info(ctx)
}

// The preflight asks everything at once, but the first failing check in
// the order of old still decides the error, and a refused create builds or
// pulls nothing and creates nothing.
func TestCreatePreflightErrorOrder(t *testing.T) {
	t.Setenv("DOCKER_SANDBOX_TEST_RUN", "")
	for _, tc := range []struct {
		name     string
		full     bool
		infoErr  error
		noLimits bool
		want     string
	}{
		{"limit before info", true, errors.New("info exploded"), false, core.CodeLimitReached},
		{"limit before engine limits", true, nil, true, core.CodeLimitReached},
		{"info before engine limits", false, errors.New("info exploded"), true, core.CodeEngineError},
		{"engine limits", false, nil, true, core.CodeEngineUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			if tc.noLimits {
				f.info = func(i *system.Info) { i.PidsLimit = false }
			}
			le := &limitEngine{fakeEngine: f, full: tc.full, infoErr: tc.infoErr}
			ci := &countingImages{fakeImages: fakeImages{img: image.InspectResponse{Architecture: "amd64"}}}
			m := &Manager{Engine: le, Images: ci, Version: "0.1.0", MaxSandboxes: 1}
			_, err := m.Run(context.Background(), testSpec(), Request{Lang: languages["sh"], Workdir: core.WorkspaceDir, Timeout: time.Second, MaxOutput: 10})
			if e := core.AsError(err); e == nil || e.Code != tc.want || e.Exit != 125 {
				t.Fatalf("err %+v, want code %s", err, tc.want)
			}
			if len(ci.ensure) != 0 {
				t.Errorf("EnsureImage called: %v", ci.ensure)
			}
			for _, c := range f.calls {
				if strings.HasPrefix(c, "Create") || strings.HasPrefix(c, "VolumeCreate") {
					t.Fatalf("created something: %v", f.calls)
				}
			}
			if len(f.volumes) != 0 || len(f.containers) != 0 {
				t.Fatalf("left behind: volumes %v, containers %v", f.volumes, f.containers)
			}
		})
	}
}

// The seeder's removal runs while the sandbox is created; when it fails,
// the call fails with its error as when it came first: the sandbox
// container is removed again, the fresh volumes are asked to go, and
// nothing ran.
func TestCreateSeederRemovalFails(t *testing.T) {
	f := newFake()
	f.seederRemoveErr = errors.New("driver failed to remove root filesystem")
	ran := false
	f.helper = func(cmd []string, code, stdin []byte) (string, string, wire.RunStatus) {
		ran = true
		return "", "", wire.RunStatus{}
	}
	m := &Manager{Engine: f, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64"}}, Version: "0.1.0"}
	res, err := m.Run(context.Background(), testSpec(), Request{Lang: languages["sh"], Workdir: core.WorkspaceDir, Timeout: time.Second, MaxOutput: 10})
	e := core.AsError(err)
	if e == nil || e.Code != core.CodeEngineError || !strings.Contains(e.Message, "cannot remove the volume seeder container") {
		t.Fatalf("err %+v", err)
	}
	if ran || res.Created || len(f.containers) != 0 {
		t.Fatalf("ran %v, res %+v, containers %v", ran, res, f.containers)
	}
	var volRemoves []string
	for _, c := range f.calls {
		if strings.HasPrefix(c, "VolumeRemove") {
			volRemoves = append(volRemoves, c)
		}
	}
	want := []string{"VolumeRemove docker-sandbox-u1.user force=false", "VolumeRemove docker-sandbox-u1.s.ws force=false"}
	if d := cmp.Diff(want, volRemoves); d != "" {
		t.Errorf("volume removals (-want +got):\n%s", d)
	}
	if !f.volumes["docker-sandbox.helper.vol-amd64"] {
		t.Errorf("the shared helper volume should stay")
	}
}

// A volume that a sandbox would mount but that is not the plugin's (a
// user's own volume bearing the name, or one labelled for another target)
// is refused before anything is made: no seeder, no container, no volume
// removed, and the user's volume stays.
func TestRunRefusesForeignVolumes(t *testing.T) {
	other := ownVolumeLabels("docker-sandbox-u2.user")
	for _, tc := range []struct {
		name, vol string
		labels    map[string]string
	}{
		{"user volume without labels", "docker-sandbox-u1.user", nil},
		{"user volume of another scope", "docker-sandbox-u1.user", other},
		{"user volume with a copied managed label only", "docker-sandbox-u1.user", map[string]string{core.LabelManaged: "true"}},
		{"workspace volume without labels", "docker-sandbox-u1.s.ws", nil},
		{"workspace volume of another session", "docker-sandbox-u1.s.ws", ownVolumeLabels("docker-sandbox-u1.t.ws")},
		{"helper volume without labels", "docker-sandbox.helper.vol-amd64", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.helper = okHelper
			f.volumes[tc.vol] = true
			f.volLabels = map[string]map[string]string{tc.vol: tc.labels}
			m := &Manager{Engine: f, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64"}}, Version: "0.1.0"}
			res, err := m.Run(context.Background(), testSpec(), Request{Lang: languages["sh"], Workdir: core.WorkspaceDir, Timeout: time.Second, MaxOutput: 10})
			e := core.AsError(err)
			if e == nil || e.Code != core.CodeNotSandbox || e.Exit != 125 || !strings.Contains(e.Message, tc.vol) {
				t.Fatalf("err %+v", err)
			}
			for _, c := range f.calls {
				if strings.HasPrefix(c, "Create") || strings.HasPrefix(c, "VolumeRemove") || strings.HasPrefix(c, "ExecCreate") {
					t.Errorf("a refused create made %q (calls %v)", c, f.calls)
				}
			}
			if res.Created || !f.volumes[tc.vol] {
				t.Errorf("created %v; the volume %s stays: %v", res.Created, tc.vol, f.volumes[tc.vol])
			}
		})
	}
}

// recChannel is an exec channel with no channel process: Has is false,
// and each Dial (which would start one) is recorded among the engine's
// calls.
type recChannel struct{ f *fakeEngine }

func (r recChannel) Has(string) bool  { return false }
func (r recChannel) Busy(string) bool { return false }
func (r recChannel) Dial(ctx context.Context, name string) net.Conn {
	r.f.call("ChannelStart " + name)
	return nil
}

// Without a channel process, a run starts one only where its container is
// there: once the engine attached the plain exec (never for a container
// that does not exist yet); a kernel call as any other; a one-shot call
// (exec --rm) never.
func TestRunStartsChannel(t *testing.T) {
	quiet := Request{Lang: languages["sh"], Workdir: core.WorkspaceDir, Timeout: time.Second, MaxOutput: 10}
	for _, tc := range []struct {
		name    string
		exists  bool
		kernel  bool
		oneShot bool
		want    []string
	}{
		{"new sandbox", false, false, false, []string{"CreateSeeder", "Create", "Start", "ExecCreate", "ExecAttach", "ChannelStart docker-sandbox-u1.s"}},
		{"existing sandbox", true, false, false, []string{"ExecCreate", "ExecAttach", "ChannelStart docker-sandbox-u1.s"}},
		{"kernel call", true, true, false, []string{"ExecCreate", "ExecAttach", "ChannelStart docker-sandbox-u1.s"}},
		{"one-shot, new sandbox", false, false, true, []string{"CreateSeeder", "Create", "Start", "ExecCreate", "ExecAttach"}},
		{"one-shot, existing sandbox", true, false, true, []string{"ExecCreate", "ExecAttach"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.helper = okHelper
			m := &Manager{Engine: f, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64"}}, Version: "0.1.0", Channel: recChannel{f}}
			spec := testSpec()
			if tc.exists {
				f.containers[spec.ContainerName()], f.running[spec.ContainerName()] = nil, true
			}
			req := quiet
			req.OneShot = tc.oneShot
			if tc.kernel {
				req.Lang, req.Kernel = languages["python"], true
			}
			if _, err := m.Run(context.Background(), spec, req); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, settledCalls(t, f.calls)); d != "" {
				t.Errorf("calls (-want +got):\n%s", d)
			}
		})
	}
}

// The sandbox's container is created only once the seeder's create has
// returned (the engine fills the volumes at that create): a container of
// the sandbox's name is seeded, so another call that finds it not running
// may start it (withContainer), and a call killed between the two creates
// leaves no container. (Creating both at once once let a second call, or
// the next call after a killed one, start the sandbox on empty root-owned
// volumes.) The seeder's create here waits until the sandbox's create
// comes, or 200 ms.
func TestCreateAfterSeeder(t *testing.T) {
	f := newFake()
	f.helper = okHelper
	f.seederCreate = func() {
		deadline := time.Now().Add(200 * time.Millisecond)
		for !slices.Contains(f.snapshotCalls(), "Create") && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	m := &Manager{Engine: f, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64"}}, Version: "0.1.0"}
	if res, err := m.Run(context.Background(), testSpec(), Request{Lang: languages["sh"], Workdir: core.WorkspaceDir, Timeout: time.Second, MaxOutput: 10}); err != nil || !res.Created {
		t.Fatalf("res %+v err %v", res, err)
	}
	calls := f.snapshotCalls()
	if seeder, create := slices.Index(calls, "CreateSeeder"), slices.Index(calls, "Create"); seeder < 0 || create < seeder {
		t.Fatalf("the sandbox was created before the seeder's create returned: %v", calls)
	}
}
