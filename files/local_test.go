package files

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
)

// localFake is an engine with one sandbox (scope "a") whose volumes are
// folders of the test, for LocalReader.
type localFake struct {
	runtime    string
	labels     map[string]string
	ws, user   string // the volumes' Sources
	wsName     string // the workspace mount's volume name
	inspectErr error
	statErr    error
	mtime      *time.Time // the engine's stat of the mount point (nil: the folder's own)
	volOpts    map[string]string
	volLabels  map[string]string
}

func (f *localFake) VolumeInspect(ctx context.Context, name string) (volume.Volume, error) {
	t := core.Target{Scope: "a"}
	if name != t.UserVolume() && name != t.WorkspaceVolume() {
		return volume.Volume{}, errors.New("no such volume")
	}
	labels := f.volLabels
	if labels == nil {
		labels = map[string]string{core.LabelManaged: "true", core.LabelKind: core.KindUser, core.LabelScope: "a"}
	}
	return volume.Volume{Name: name, Driver: "local", Options: f.volOpts, Labels: labels}, nil
}

func (f *localFake) ContainerInspect(ctx context.Context, name string) (container.InspectResponse, error) {
	if f.inspectErr != nil {
		return container.InspectResponse{}, f.inspectErr
	}
	t := core.Target{Scope: "a"}
	return container.InspectResponse{
		ContainerJSONBase: &container.ContainerJSONBase{ID: "c1", Name: "/" + t.ContainerName(),
			State: &container.State{Status: "exited"}, HostConfig: &container.HostConfig{Runtime: f.runtime}},
		Config: &container.Config{Labels: f.labels},
		Mounts: []container.MountPoint{
			{Type: mount.TypeVolume, Name: f.wsName, Source: f.ws, Destination: core.WorkspaceDir, RW: true},
			{Type: mount.TypeVolume, Name: t.UserVolume(), Source: f.user, Destination: core.UserDir, RW: true},
			{Type: mount.TypeVolume, Name: core.PluginObjectPrefix + "helper.x", Destination: core.HelperDir, RW: false}},
	}, nil
}

func (f *localFake) ContainerStatPath(ctx context.Context, id, p string) (container.PathStat, error) {
	if f.statErr != nil {
		return container.PathStat{}, f.statErr
	}
	src := f.ws
	if p == core.UserDir {
		src = f.user
	}
	fi, err := os.Stat(src)
	if err != nil {
		return container.PathStat{}, err
	}
	st := container.PathStat{Name: filepath.Base(p), Mode: fi.Mode(), Mtime: fi.ModTime()}
	if f.mtime != nil {
		st.Mtime = *f.mtime
	}
	return st, nil
}

func newLocalFake(t *testing.T) *localFake {
	tg := core.Target{Scope: "a"}
	f := &localFake{runtime: "runc", ws: t.TempDir(), user: t.TempDir(), wsName: tg.WorkspaceVolume(),
		labels: map[string]string{core.LabelManaged: "true", core.LabelKind: core.KindSandbox, core.LabelScope: "a"}}
	outside := t.TempDir()
	for p, body := range map[string]string{"d/e/f": "F", "top.txt": "T", outside + "/secret": "SECRET"} {
		full := p
		if !filepath.IsAbs(p) {
			full = filepath.Join(f.ws, p)
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink(outside, filepath.Join(f.ws, "out"))
	os.WriteFile(filepath.Join(f.user, "u"), []byte("U"), 0o644)
	// What the sandbox's user (the owner of the volume's folder) made
	// unreadable to itself.
	for p, mode := range map[string]os.FileMode{"private": 0, "shut/in/f": 0o644, "blind/f": 0o644, "group": 0o070, "listonly/z": 0o644} {
		full := filepath.Join(f.user, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte("P"), 0o644)
		os.Chmod(full, mode)
	}
	os.Chmod(filepath.Join(f.user, "shut"), 0)
	os.Chmod(filepath.Join(f.user, "blind"), 0o100)
	os.Chmod(filepath.Join(f.user, "listonly"), 0o400)
	return f
}

// TestReadLocal: when the local route applies (an own sandbox under runc
// or crun, its volume's Source opens here and is the engine's folder) and
// what it reads: the helper's own archive (fsserver.TarOut) with its
// refusals; everything else leaves ok false (the copy streams).
func TestReadLocal(t *testing.T) {
	later := time.Now().Add(time.Hour)
	for _, tt := range []struct {
		name    string
		path    string
		setup   func(f *localFake)
		ok      bool
		names   []string // the archive's entries ("name=content" for files)
		errCode string
		msg     string // the error's message ends so
	}{
		{name: "a file", path: "/opt/workspace/d/e/f", ok: true, names: []string{"f=F"}},
		{name: "a relative path", path: "top.txt", ok: true, names: []string{"top.txt=T"}},
		{name: "a folder", path: "/opt/workspace/d", ok: true, names: []string{"d/", "d/e/", "d/e/f=F"}},
		{name: "the workspace itself", path: "/opt/workspace", ok: true,
			names: []string{"workspace/", "workspace/d/", "workspace/d/e/", "workspace/d/e/f=F", "workspace/out", "workspace/top.txt=T"}},
		{name: "the user space", path: "/opt/user/u", ok: true, names: []string{"u=U"}},
		{name: "crun", path: "/opt/user/u", setup: func(f *localFake) { f.runtime = "crun" }, ok: true, names: []string{"u=U"}},
		{name: "through a link leading out", path: "/opt/workspace/out/secret", ok: true, errCode: fsproto.CodePathEscape},
		{name: "missing", path: "/opt/workspace/nope", ok: true, errCode: fsproto.CodeNotFound},
		{name: "a file its user cannot read", path: "/opt/user/private", ok: true, errCode: fsproto.CodePermissionDenied},
		{name: "a file only its group can read", path: "/opt/user/group", ok: true, errCode: fsproto.CodePermissionDenied},
		{name: "through a folder its user cannot search", path: "/opt/user/shut/in/f", ok: true, errCode: fsproto.CodePermissionDenied},
		{name: "a folder its user cannot list", path: "/opt/user/blind", ok: true, errCode: fsproto.CodePermissionDenied},
		{name: "through a folder its user cannot read", path: "/opt/user/blind/f", ok: true, errCode: fsproto.CodePermissionDenied},
		// Refused by the folder's name, as the helper refuses it (not
		// by the name of its first entry).
		{name: "a folder its user can list but not search", path: "/opt/user/listonly", ok: true, errCode: fsproto.CodePermissionDenied, msg: "listonly: permission denied"},
		{name: "not root", path: "/opt/workspace/top.txt", setup: func(f *localFake) { localEUID = func() int { return 1000 } }},
		{name: "a host folder bound as the volume", path: "/opt/workspace/top.txt", setup: func(f *localFake) {
			f.volOpts = map[string]string{"type": "none", "o": "bind", "device": "/etc"}
		}},
		{name: "a volume without the plugin's labels", path: "/opt/workspace/top.txt", setup: func(f *localFake) { f.volLabels = map[string]string{} }},
		{name: "gVisor", path: "/opt/workspace/top.txt", setup: func(f *localFake) { f.runtime = "runsc" }},
		{name: "not a sandbox of ours", path: "/opt/workspace/top.txt", setup: func(f *localFake) { f.labels = nil }},
		{name: "another scope's sandbox", path: "/opt/workspace/top.txt", setup: func(f *localFake) { f.labels[core.LabelScope] = "b" }},
		{name: "another volume at the mount", path: "/opt/workspace/top.txt", setup: func(f *localFake) { f.wsName = "other" }},
		{name: "no such container", path: "/opt/workspace/top.txt", setup: func(f *localFake) { f.inspectErr = errors.New("no such container") }},
		{name: "stat refused", path: "/opt/workspace/top.txt", setup: func(f *localFake) { f.statErr = errors.New("no") }},
		{name: "not this machine's folder", path: "/opt/workspace/top.txt", setup: func(f *localFake) { f.mtime = &later }},
		{name: "the Source does not open here", path: "/opt/workspace/top.txt", setup: func(f *localFake) { f.ws = filepath.Join(f.ws, "nope") }},
		{name: "outside the spaces", path: "/etc/passwd"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newLocalFake(t)
			localEUID = func() int { return 0 } // the route's reader: root
			defer func() { localEUID = os.Geteuid }()
			if tt.setup != nil {
				tt.setup(f)
			}
			var names []string
			consumed := false
			ok, err := (&LocalReader{Engine: f}).ReadDirect(context.Background(), core.Target{Scope: "a"}, tt.path, false, tarsafe.Limits{}, func(r io.Reader) error {
				consumed = true
				tr := tar.NewReader(r)
				for {
					h, err := tr.Next()
					if err == io.EOF {
						return nil
					}
					if err != nil {
						return err
					}
					n := h.Name
					if h.Typeflag == tar.TypeReg {
						b, _ := io.ReadAll(tr)
						n += "=" + string(b)
					}
					names = append(names, n)
				}
			})
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v (err %v)", ok, tt.ok, err)
			}
			if !ok {
				if consumed || err != nil {
					t.Fatalf("a route that does not apply consumed %v, err %v", consumed, err)
				}
				return
			}
			if tt.errCode != "" {
				if !strings.HasSuffix(err.Error(), tt.msg) {
					t.Errorf("err %q, want it to end with %q", err, tt.msg)
				}
				if code := fsproto.FromOS(err, "").Code; code != tt.errCode {
					t.Fatalf("err %v (%s), want %s", err, code, tt.errCode)
				}
				for _, n := range names {
					if strings.Contains(n, "SECRET") {
						t.Fatalf("the archive holds the secret from outside the volume: %q", names)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(names) // in the folder's order
			if diff := cmp.Diff(tt.names, names); diff != "" {
				t.Errorf("archive (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadLocalLimits: the archive stops at the copy's limits, as the
// helper's does.
func TestReadLocalLimits(t *testing.T) {
	f := newLocalFake(t)
	localEUID = func() int { return 0 }
	defer func() { localEUID = os.Geteuid }()
	ok, err := (&LocalReader{Engine: f}).ReadDirect(context.Background(), core.Target{Scope: "a"}, "/opt/workspace/d", false, tarsafe.Limits{MaxEntries: 2},
		func(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err })
	if !ok || fsproto.FromOS(err, "").Code != fsproto.CodeTooLarge {
		t.Fatalf("ok %v, err %v: want too_large", ok, err)
	}
	var fe *fsproto.Error
	if !errors.As(err, &fe) {
		t.Fatalf("err %T %v, want the helper's *fsproto.Error", err, err)
	}
}

// TestReadLocalCanceled: Ctrl-C (the context) during a local read stops the
// archive's writer and fails the reading side, which then commits nothing.
func TestReadLocalCanceled(t *testing.T) {
	f := newLocalFake(t)
	localEUID = func() int { return 0 }
	defer func() { localEUID = os.Geteuid }()
	if err := os.WriteFile(filepath.Join(f.ws, "big"), make([]byte, 64<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ok, err := (&LocalReader{Engine: f}).ReadDirect(ctx, core.Target{Scope: "a"}, "/opt/workspace/big", false, tarsafe.Limits{}, func(r io.Reader) error {
		if _, err := io.ReadFull(r, make([]byte, 1<<20)); err != nil {
			return err
		}
		cancel()
		_, err := io.Copy(io.Discard, r)
		return err
	})
	if !ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("ok %v, err %v: want the cancellation", ok, err)
	}
}
