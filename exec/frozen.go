package exec

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
)

// A copy out of a running sandbox through the engine's archive endpoint
// (`GET /containers/ID/archive`, docker cp's own route), read while the
// sandbox is paused.
//
// The endpoint resolves the path and walks the tree inside the container's
// root (links resolve there, never on the host), but it resolves and walks
// a tree the sandbox can change under it: a folder swapped for a link to
// /etc between two steps would make it read the container's own root-only
// files. So it is used only when nothing can change the tree while it runs:
//
//   - the sandbox is a running sandbox of the plugin's own (OwnSandboxInspect),
//     under runc (the cgroup freezer; not gVisor, not Podman), not paused
//     already; it is paused for the read, and every process in it stops;
//   - the volume that holds the path is mounted by no other container, in
//     any state (a session shares its scope's volume), checked once the
//     sandbox is paused: a container that is created afterwards to mount it
//     waits for the pause to end before it starts (WaitUnpaused);
//   - every folder of the path below the volume's mount is a folder and not
//     a link, stated while paused, and the archive's own stat says the path
//     itself is a folder or a regular file, not a link. (/opt and the mount
//     points are the read-only root filesystem's: the sandbox cannot change
//     them.)
//
// Anything else leaves the sandbox as it was and the caller streams
// through the helper, as it always did. The pause ends at the archive's end
// (before the copy commits anything), on any failure, and after
// FrozenBudget at the latest: a read that lasts longer is abandoned and
// the caller streams instead.

// ArchiveEngine is the part of the Engine API the frozen read uses.
type ArchiveEngine interface {
	ContainerInspect(ctx context.Context, container string) (container.InspectResponse, error)
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerPause(ctx context.Context, container string) error
	ContainerUnpause(ctx context.Context, container string) error
	ContainerStatPath(ctx context.Context, container, path string) (container.PathStat, error)
	CopyFromContainer(ctx context.Context, container, srcPath string) (io.ReadCloser, container.PathStat, error)
	ServerVersion(ctx context.Context) (types.Version, error)
}

// FrozenBudget is the longest a frozen read keeps a sandbox paused; a
// container waiting to start (WaitUnpaused) waits a little longer.
var FrozenBudget = 20 * time.Second

// unpauseWait is how long WaitUnpaused waits: FrozenBudget and the time the
// engine takes to stop the read and unpause.
func unpauseWait() time.Duration { return FrozenBudget + 10*time.Second }

// frozenRuntimes are the runtimes whose pause freezes every process of the
// container (the cgroup freezer).
var frozenRuntimes = map[string]bool{"runc": true, "io.containerd.runc.v2": true}

// FrozenReader reads sandbox paths through the archive endpoint while the
// sandbox is paused (see above).
type FrozenReader struct {
	Engine ArchiveEngine
}

// frozenReadError marks a failure of the archive's read (not of the copy's
// own checks): nothing was committed, and the caller can stream instead.
type frozenReadError struct{ err error }

func (e *frozenReadError) Error() string { return e.err.Error() }
func (e *frozenReadError) Unwrap() error { return e.err }

// ReadDirect hands consume the archive of p (an absolute, cleaned path under
// /opt/workspace or /opt/user) in t's sandbox. ok is false when the route
// does not apply or its read failed before consume committed anything: the
// sandbox is then as it was, and the caller streams instead. mustBeDir: p
// has to be a folder (the caller's stream reports the error otherwise).
// The copy's limits are the extraction's (consume's) only.
func (f *FrozenReader) ReadDirect(ctx context.Context, t core.Target, p string, mustBeDir bool, _ tarsafe.Limits, consume func(io.Reader) error) (ok bool, err error) {
	vol, mountDir, ok := frozenVolume(t, p)
	if !ok {
		return false, nil
	}
	var (
		c       container.InspectResponse
		cerr    error
		version types.Version
		verr    error
		others  bool
		wg      sync.WaitGroup
	)
	wg.Add(3)
	go func() { defer wg.Done(); c, cerr = f.Engine.ContainerInspect(ctx, t.ContainerName()) }()
	go func() { defer wg.Done(); version, verr = f.Engine.ServerVersion(ctx) }()
	go func() {
		// Not alone on the volume now: no pause (checked again once paused).
		defer wg.Done()
		list, err := f.listVolume(ctx, vol)
		others = err != nil || len(list) != 1
	}()
	wg.Wait()
	if cerr != nil || verr != nil || IsPodman(version) || others {
		return false, nil
	}
	if own, isOwn := OwnSandboxInspect(&c); !isOwn || own != t || c.State == nil || !c.State.Running || c.State.Paused ||
		c.State.Restarting || c.HostConfig == nil || !frozenRuntimes[c.HostConfig.Runtime] {
		return false, nil
	}
	if err := f.Engine.ContainerPause(ctx, c.ID); err != nil {
		return false, nil // already paused, going, or no freezer here
	}
	th := &thaw{engine: f.Engine, id: c.ID, ctx: context.WithoutCancel(ctx)}
	defer th.do()
	if !f.frozenPath(ctx, c.ID, vol, mountDir, p) {
		return false, nil
	}
	rctx, cancel := context.WithTimeout(ctx, FrozenBudget)
	defer cancel()
	body, stat, err := f.Engine.CopyFromContainer(rctx, c.ID, p)
	if err != nil {
		return false, nil
	}
	defer body.Close()
	if stat.Name != path.Base(p) || stat.LinkTarget != "" || stat.Mode&fs.ModeSymlink != 0 ||
		!(stat.Mode.IsDir() || stat.Mode.IsRegular()) || (mustBeDir && !stat.Mode.IsDir()) {
		return false, nil
	}
	r := &frozenBody{r: body, thaw: th}
	cerr = consume(r)
	// The engine holds the container's lock until the archive is read or
	// closed: close it before the unpause (a copy that stopped early, over
	// its limit, would otherwise wait for an unpause that waits for it).
	body.Close()
	if terr := th.do(); terr != nil {
		return true, terr
	}
	if cerr != nil {
		var rerr *frozenReadError
		if errors.As(cerr, &rerr) && ctx.Err() == nil {
			return false, nil // the read failed, not the copy: nothing was committed
		}
		return true, cerr
	}
	return true, nil
}

// frozenVolume names the volume that holds p in t's sandbox and the folder
// it is mounted at; ok is false for the volume's own root (the archive
// would name it after the mount).
func frozenVolume(t core.Target, p string) (vol, dir string, ok bool) {
	for _, m := range []struct{ dir, vol string }{{core.WorkspaceDir, t.WorkspaceVolume()}, {core.UserDir, t.UserVolume()}} {
		if strings.HasPrefix(p, m.dir+"/") && path.Clean(p) == p {
			return m.vol, m.dir, true
		}
	}
	return "", "", false
}

// frozenPath checks, with the sandbox paused, that only it mounts vol and
// that every folder of p below the mount (mountDir) is a folder and not a
// link. The folders above it and the mount itself are the read-only root
// filesystem's; the last component is checked by the archive's own stat.
func (f *FrozenReader) frozenPath(ctx context.Context, id, vol, mountDir, p string) bool {
	var dirs []string
	for d := path.Dir(p); d != mountDir; d = path.Dir(d) {
		dirs = append(dirs, d)
	}
	results := make([]bool, len(dirs)+1)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	wg.Add(1)
	go func() {
		defer wg.Done()
		list, err := f.listVolume(ctx, vol)
		results[len(dirs)] = err == nil && len(list) == 1 && list[0].ID == id
	}()
	for i, d := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			st, err := f.Engine.ContainerStatPath(ctx, id, d)
			results[i] = err == nil && st.LinkTarget == "" && st.Mode&fs.ModeSymlink == 0 && st.Mode.IsDir()
		}()
	}
	wg.Wait()
	for _, r := range results {
		if !r {
			return false
		}
	}
	return true
}

// listVolume lists the containers, in any state, that mount vol.
func (f *FrozenReader) listVolume(ctx context.Context, vol string) ([]container.Summary, error) {
	return f.Engine.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("volume", vol))})
}

// thaw unpauses the sandbox once.
type thaw struct {
	engine ArchiveEngine
	id     string
	ctx    context.Context
	once   sync.Once
	err    error
}

func (t *thaw) do() error {
	t.once.Do(func() {
		ctx, cancel := context.WithTimeout(t.ctx, 30*time.Second)
		defer cancel()
		if err := t.engine.ContainerUnpause(ctx, t.id); err != nil {
			t.err = core.EngineError(err, "the sandbox's container "+t.id[:min(12, len(t.id))]+" stays paused after a copy out of it: run `docker unpause "+t.id[:min(12, len(t.id))]+"`")
		}
	})
	return t.err
}

// frozenBody unpauses the sandbox at the archive's end, and marks a failed
// read.
type frozenBody struct {
	r    io.Reader
	thaw *thaw
}

func (b *frozenBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	switch {
	case err == io.EOF:
		b.thaw.do()
	case err != nil:
		err = &frozenReadError{err: err}
	}
	return n, err
}

// WaitUnpaused waits, before a new sandbox container that mounts t's
// scope's long-term volume starts, until no other container that mounts it
// is paused (a frozen read checked, once paused, that it was alone: see
// above), for unpauseWait at most. A container a user paused by hand only
// delays the start.
func WaitUnpaused(ctx context.Context, e ArchiveListEngine, t core.Target, self string) error {
	deadline := time.Now().Add(unpauseWait())
	f := filters.NewArgs(filters.Arg("volume", t.UserVolume()), filters.Arg("status", "paused"))
	for {
		list, err := e.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		if err != nil {
			return err
		}
		other := false
		for _, c := range list {
			if c.ID != self {
				other = true
			}
		}
		if !other || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// ArchiveListEngine lists containers (WaitUnpaused).
type ArchiveListEngine interface {
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
}
