package files

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
	"github.com/docker-sandbox/docker-sandbox/files/fsserver"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
)

// A copy out of a sandbox whose engine runs on this machine, read from the
// sandbox's volume where the engine keeps it (the mount's Source, e.g.
// /var/lib/docker/volumes/NAME/_data), in this process: no exec, no
// engine stream (an exec's output crosses containerd's shim and dockerd
// twice as slowly as docker cp reads a volume; README, Benchmarks).
//
// What is read and how is the helper's own `fs tar-out` (fsserver.TarOut:
// the path rules, os.Root with each folder checked, limits, names), here
// on the host's kernel, which a sandbox cannot fool: a link it plants, at
// any depth and at any moment, is refused or followed inside the volume
// exactly as in the helper. Hard links cannot reach outside a volume (a
// mount), and a sandbox cannot make device files. It is used only when:
//
//   - the caller says the engine is on this machine (a unix:// socket:
//     plugin/copying.go) and copy_local is on (the default);
//   - the plugin runs as root, and reads as the sandbox's user would: each
//     folder and file is checked against its mode for the owner of the
//     volume's folder (accessAs), so what that user made unreadable to
//     itself is refused as the helper refuses it (a rootless engine's user
//     cannot read what its sandboxes keep private: those copies stream);
//   - the container is a sandbox of the plugin's own for the target, in any
//     state, under runc or crun (gVisor's kernel may hold a sandbox's writes
//     in its own cache for a while: not read behind its back);
//   - the path's space (/opt/workspace or /opt/user) is the target's own
//     volume (exec.OwnVolume: named, labelled, the local driver without
//     options, so not a folder of the host bound as a volume), the
//     mount's Source opens here, and it is the engine's
//     folder, not one that has the same path on this machine:
//     its modification time, to the nanosecond, and type match the
//     engine's stat of the mount point, fetched in the same round trip.
//
// Anything else leaves ok false, and the copy streams through the helper.

// LocalEngine is the part of the Engine API the local read uses.
type LocalEngine interface {
	ContainerInspect(ctx context.Context, container string) (container.InspectResponse, error)
	ContainerStatPath(ctx context.Context, container, path string) (container.PathStat, error)
	VolumeInspect(ctx context.Context, volumeID string) (volume.Volume, error)
}

// localRuntimes are the runtimes whose sandboxes write straight to the
// host's files (not gVisor).
var localRuntimes = map[string]bool{"runc": true, "io.containerd.runc.v2": true, "crun": true}

// LocalReader reads sandbox paths from their volumes on this machine (see
// above).
type LocalReader struct {
	Engine LocalEngine
}

// ReadDirect hands consume the archive of p (a sandbox path, as the helper
// takes it) in t's sandbox, made as `fs tar-out` makes it with lim, and
// reports ok; ok false: the route does not apply, nothing was done.
func (l *LocalReader) ReadDirect(ctx context.Context, t core.Target, p string, mustBeDir bool, lim tarsafe.Limits, consume func(io.Reader) error) (ok bool, err error) {
	space, _, err := fsproto.Resolve(p)
	if err != nil || localEUID() != 0 {
		return false, nil // the helper reports a bad path
	}
	mountDir, vol := core.WorkspaceDir, t.WorkspaceVolume()
	if space == core.UserDir {
		mountDir, vol = core.UserDir, t.UserVolume()
	}
	var (
		c    container.InspectResponse
		cerr error
		st   container.PathStat
		serr error
		v    volume.Volume
		verr error
		wg   sync.WaitGroup
	)
	wg.Add(3)
	go func() { defer wg.Done(); c, cerr = l.Engine.ContainerInspect(ctx, t.ContainerName()) }()
	go func() { defer wg.Done(); st, serr = l.Engine.ContainerStatPath(ctx, t.ContainerName(), mountDir) }()
	go func() { defer wg.Done(); v, verr = l.Engine.VolumeInspect(ctx, vol) }()
	wg.Wait()
	if cerr != nil || serr != nil || verr != nil {
		return false, nil
	}
	// A plain local volume of the plugin's own: not one bound to a host
	// folder (driver options), whose Source would be that folder.
	if _, _, ok := sbexec.OwnVolume(&v); !ok || v.Name != vol {
		return false, nil
	}
	if own, isOwn := sbexec.OwnSandboxInspect(&c); !isOwn || own != t || c.HostConfig == nil || !localRuntimes[c.HostConfig.Runtime] {
		return false, nil
	}
	src := ""
	for _, m := range c.Mounts {
		if m.Destination == mountDir && m.Type == mount.TypeVolume && m.Name == vol {
			src = m.Source
		}
	}
	if src == "" {
		return false, nil
	}
	root, err := os.OpenRoot(src)
	if err != nil {
		return false, nil
	}
	defer root.Close()
	fi, err := root.Stat(".")
	if err != nil || !fi.IsDir() || !st.Mode.IsDir() || !fi.ModTime().Equal(st.Mtime) {
		return false, nil
	}
	owner, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false, nil
	}
	pr, pw := io.Pipe()
	// Ctrl-C (ctx) stops both ends: the extraction then removes what it
	// wrote, as when the helper's stream stops.
	stop := context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
	defer stop()
	done := make(chan error, 1)
	go func() {
		err := fsserver.TarOut(pw, root, p, lim, mustBeDir, accessAs(owner.Uid, owner.Gid))
		pw.CloseWithError(err)
		done <- err
	}()
	cerr = consume(ctxReader{ctx, pr})
	pr.CloseWithError(errStopped)
	if perr := <-done; cerr == nil && perr != nil && !errors.Is(perr, errStopped) {
		return true, perr
	}
	return true, cerr
}

// ctxReader fails every read once ctx is done: the reading side sees Ctrl-C
// at its next read, not only once the pipe's closing (AfterFunc) ran.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// localEUID is the plugin's effective user (tests change it).
var localEUID = os.Geteuid

// accessAs is the kernel's permission check (the mode's bits, no
// capabilities: the sandbox's user has none) for the user uid of group gid,
// the owner of the volume's folder, which the sandbox's user is: the local
// route reads as root, and refuses what the helper, as that user, could not
// open or look up (permission_denied, the helper's own message).
func accessAs(uid, gid uint32) tarsafe.Access {
	return func(fi fs.FileInfo, want fs.FileMode) error {
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fs.ErrPermission
		}
		perm := fi.Mode().Perm()
		bits := perm & 7
		switch {
		case st.Uid == uid:
			bits = perm >> 6 & 7
		case st.Gid == gid:
			bits = perm >> 3 & 7
		}
		if bits&want != want {
			return fs.ErrPermission
		}
		return nil
	}
}
