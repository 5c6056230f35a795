package tarsafe

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
)

// TestWalk: Walk resolves a path as os.Root does (links inside followed,
// absolute or leading above the root refused, loops refused), one folder
// at a time.
func TestWalk(t *testing.T) {
	s := newSandbox(t)
	mustWrite(t, filepath.Join(s.base, "a", "b", "f"), "F")
	for link, target := range map[string]string{"l": "a", "chain": "l/b", "f2": "a/b/f", "up": "a/../..", "abs": s.canary,
		"a/b/back": "../../a", "loop1": "loop2", "loop2": "loop1", "via": "up/secret", "a/dir": "b/", "dot": "."} {
		if err := os.Symlink(target, filepath.Join(s.base, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		rel     string
		follow  bool
		dir     string // the folder returned, from the base
		last    string
		escape  bool
		errLoop bool
	}{
		{rel: ".", dir: ".", last: "."},
		{rel: "a", dir: ".", last: "a"},
		{rel: "a/b/f", dir: "a/b", last: "f"},
		{rel: "l/b/f", dir: "a/b", last: "f"},
		{rel: "chain/f", dir: "a/b", last: "f"},
		{rel: "a/b/back/b", dir: "a", last: "b"},
		{rel: "f2", dir: ".", last: "f2"},
		{rel: "f2", follow: true, dir: "a/b", last: "f"},
		{rel: "l", follow: true, dir: ".", last: "a"},
		{rel: "a/dir", follow: true, dir: "a/b", last: "."},
		{rel: "dot", follow: true, dir: ".", last: "."},
		{rel: "missing", follow: true, dir: ".", last: "missing"},
		{rel: "abs", dir: ".", last: "abs"},
		{rel: "abs", follow: true, escape: true},
		{rel: "abs/secret", escape: true},
		{rel: "up", follow: true, escape: true},
		{rel: "up/x", escape: true},
		{rel: "via", follow: true, escape: true},
		{rel: "loop1/x", errLoop: true},
		{rel: "loop1", follow: true, errLoop: true},
	} {
		dir, last, err := Walk(s.root, tc.rel, tc.follow)
		switch {
		case tc.escape || tc.errLoop:
			if dir != nil {
				dir.Close()
			}
			if tc.escape && !fsproto.IsEscape(err) {
				t.Errorf("Walk(%q, %v): %v, want an escape", tc.rel, tc.follow, err)
			}
			if tc.errLoop && !errors.Is(err, syscall.ELOOP) {
				t.Errorf("Walk(%q, %v): %v, want ELOOP", tc.rel, tc.follow, err)
			}
			continue
		case err != nil:
			t.Errorf("Walk(%q, %v): %v", tc.rel, tc.follow, err)
			continue
		}
		got, _ := dir.Stat(".")
		want, _ := os.Stat(filepath.Join(s.base, tc.dir))
		if !os.SameFile(got, want) || last != tc.last {
			t.Errorf("Walk(%q, %v) = (%v, %q), want (%s, %q)", tc.rel, tc.follow, got.Name(), last, tc.dir, tc.last)
		}
		dir.Close()
	}
	s.checkCanary()
}

// TestOpenDirExchanged: what OpenDir and OpenFile opened must be what the
// name holds when they check it. The hook exchanges the name between the
// open and the check, as code in a sandbox can (and as gVisor, whose
// openat follows a link despite O_NOFOLLOW|O_DIRECTORY, leaves a link's
// target open under the name of the link): each exchange is refused with
// ELOOP (path_escape), nothing is returned open.
func TestOpenDirExchanged(t *testing.T) {
	for _, tc := range []struct {
		name string
		swap func(s *sandbox, p string)
		ok   bool
	}{
		{name: "untouched", ok: true, swap: func(*sandbox, string) {}},
		{name: "for a link to the outside", swap: func(s *sandbox, p string) {
			swapFor(t, p, func() error { return os.Symlink(s.canary, p) })
		}},
		{name: "for a link inside", swap: func(s *sandbox, p string) {
			swapFor(t, p, func() error { return os.Symlink("other", p) })
		}},
		{name: "for another folder", swap: func(s *sandbox, p string) {
			swapFor(t, p, func() error { return os.Mkdir(p, 0o755) })
		}},
		{name: "removed", swap: func(s *sandbox, p string) { swapFor(t, p, func() error { return nil }) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			mustWrite(t, filepath.Join(s.base, "d", "f"), "F")
			mustWrite(t, filepath.Join(s.base, "other", "f"), "O")
			var target, path string
			testHookOpened = func(name string) {
				if name == target {
					tc.swap(s, filepath.Join(s.base, path))
				}
			}
			defer func() { testHookOpened = nil }()
			target, path = "d", "d"
			r, err := OpenDir(s.root, "d")
			if tc.ok != (err == nil) {
				t.Fatalf("OpenDir: %v, want ok=%v", err, tc.ok)
			}
			if err == nil {
				r.Close()
			} else if tc.name != "removed" && fsproto.FromOS(err, "d").Code != fsproto.CodePathEscape {
				t.Errorf("OpenDir: %v, want path_escape", err)
			}
			d, err := OpenDir(s.root, "other")
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			target, path = "f", "other/f"
			f, err := OpenFile(d, "f", os.O_RDONLY)
			if tc.ok != (err == nil) {
				t.Fatalf("OpenFile: %v, want ok=%v", err, tc.ok)
			}
			if err == nil {
				f.Close()
			}
			s.checkCanary()
		})
	}
}

// TestRemoveAll: a tree is removed with its links (never what they lead
// to); a folder exchanged between its opening and its check (what gVisor's
// openat does with a link swapped in: it follows it) stops the removal with
// path_escape, and nothing outside the root is touched.
func TestRemoveAll(t *testing.T) {
	for _, exchange := range []bool{false, true} {
		s := newSandbox(t)
		mustWrite(t, filepath.Join(s.base, "t", "a", "b", "f"), "F")
		mustWrite(t, filepath.Join(s.base, "t", "g"), "G")
		if err := os.Symlink(s.canary, filepath.Join(s.base, "t", "a", "out")); err != nil {
			t.Fatal(err)
		}
		if exchange {
			testHookOpened = func(name string) {
				if name == "b" {
					swapFor(t, filepath.Join(s.base, "t", "a", "b"), func() error {
						return os.Symlink(s.canary, filepath.Join(s.base, "t", "a", "b"))
					})
				}
			}
		}
		err := RemoveAll(s.root, "t")
		testHookOpened = nil
		if exchange {
			if code := fsproto.FromOS(err, "t").Code; code != fsproto.CodePathEscape {
				t.Errorf("exchanged: %v, want path_escape", err)
			}
		} else {
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(filepath.Join(s.base, "t")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("t is still there: %v", err)
			}
		}
		s.checkCanary()
		if err := RemoveAll(s.root, "missing"); err != nil {
			t.Errorf("a missing entry: %v", err)
		}
	}
}
