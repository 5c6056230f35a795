package tarsafe

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
)

// hostileSeeds are the archives of the hostile cases, as seeds of the fuzz
// tests.
func hostileSeeds(f *testing.F) [][]byte {
	sets := [][]ent{
		{dir("top"), file("top/a", "A"), symlink("top/l", "a"), dir("top/sub"), file("top/sub/b", "B")},
		{dir("top"), file("top/../../evil", "E")},
		{file("../evil", "E")},
		{file("/abs", "E")},
		{dir("top"), symlink("top/out", "/etc"), file("top/out/passwd", "E")},
		{dir("top"), symlink("top/out2", "../../..")},
		{dir("top"), symlink("top/link", "/root"), file("top/link/x", "E")},
		{dir("top"), symlink("top/link", "../canary"), file("top/link/secret", "E")},
		{hardlink("h", "/etc/shadow")},
		{file("a", "A"), hardlink("h", "a"), hardlink("h2", "../canary/secret")},
		{special("tty", tar.TypeChar), special("fifo", tar.TypeFifo), {name: "su", typ: tar.TypeReg, mode: 0o6755, body: "S"}},
		{dir("top"), dir("top/sub"), symlink("top/sub/x", ".."), symlink("top/sub/y", "x/../.."), file("top/sub/y/evil", "E")},
		{dir("top"), {name: "top/big", typ: tar.TypeReg, mode: 0o644, size: 100 << 30}},
		{dir("top"), {name: "top/ro", typ: tar.TypeDir, mode: 0o500}, file("top/ro/f", "F")},
		{dir("top"), file("top/a", "1"), dir("top/a"), file("top/a", "2")},
		{dir("top"), symlink("top/bin", "/usr/bin"), symlink("top/py", "bin/python3"), symlink("top/ok", "a"), file("top/a", "A")},
		{dir("top"), dir("top/sub"), symlink("top/sub/l", "../x"), dir("top/sub/new"), symlink("top/sub/new/l2", "../../x")},
		{dir("a"), symlink("a/s", "."), dir("a/s/b"), symlink("a/s/b/l", "../../../x")},
	}
	var out [][]byte
	for _, s := range sets {
		out = append(out, mkTar(f, s...))
	}
	return out
}

// FuzzExtract: whatever the archive, Extract writes nothing outside the
// destination, leaves no link that leads out of it, no device or FIFO, no
// setuid, setgid or sticky bit, and a failed copy leaves nothing behind;
// with Strict too. mode picks the destination's shape (bits 0-2: a new
// folder, raw, contents, an existing folder with links that lead out, one
// with a link that stays inside and moves what merges through it), the
// modes kept (bit 3) and Strict (bit 4).
func FuzzExtract(f *testing.F) {
	for _, s := range hostileSeeds(f) {
		f.Add(s, uint8(0))
		f.Add(s, uint8(1))
		f.Add(s, uint8(2))
		f.Add(s, uint8(4))
		f.Add(s, uint8(4|16))
		f.Add(s, uint8(1|16))
	}
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		s := newSandbox(t)
		var d Dest
		strict := mode&16 != 0
		switch mode & 7 % 5 {
		case 0:
			d = Dest{Path: "dst"} // a new destination
		case 1:
			mkdirDst(s)
			d = Dest{Path: "dst", Raw: true}
		case 2:
			mkdirDst(s)
			d = Dest{Path: "dst", Contents: true}
		case 3:
			mkdirDst(s)
			os.Symlink(s.canary, filepath.Join(s.base, "dst", "top"))
			os.Symlink("../../canary", filepath.Join(s.base, "dst", "sub"))
			d = Dest{Path: "dst"}
		case 4:
			mkdirDst(s)
			os.Symlink(".", filepath.Join(s.base, "dst", "sub"))
			d = Dest{Path: "dst", Contents: true}
		}
		before := tree(t, s.base)
		_, err := Extract(s.root, d, bytes.NewReader(data), Options{Limits: Limits{MaxBytes: 1 << 20, MaxEntries: 200}, KeepMode: mode&8 != 0, Strict: strict})
		s.checkCanary()
		s.noStaging()
		checkSafeTree(t, s)
		if err != nil {
			// (With Strict, a link found leading out only where it landed
			// after a merge through dst/sub is removed, and the rest of
			// the merge stays.)
			if strict && strings.Contains(err.Error(), "from where it landed") {
				return
			}
			if got := tree(t, s.base); strings.Join(got, "\n") != strings.Join(before, "\n") {
				t.Fatalf("a failed copy (%v) changed the destination:\nbefore %q\nafter  %q", err, before, got)
			}
			return
		}
	})
}

// checkSafeTree fails when base holds a link that leads out of base/dst
// (or base itself when there is no dst), a special file or a setuid,
// setgid or sticky bit.
func checkSafeTree(t *testing.T, s *sandbox) {
	t.Helper()
	base, err := filepath.EvalSymlinks(s.base)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(base, "dst")); err == nil && fi.IsDir() {
		base = filepath.Join(base, "dst")
	}
	filepath.WalkDir(s.base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		m := fi.Mode()
		rel, _ := filepath.Rel(s.base, p)
		switch {
		case m&fs.ModeSymlink != 0:
			if rel == filepath.Join("dst", "top") || rel == filepath.Join("dst", "sub") {
				return nil // the test's own links
			}
			if _, err := os.Stat(p); err != nil && !os.IsNotExist(err) {
				return nil // a loop
			}
			target, _ := os.Readlink(p)
			if filepath.IsAbs(target) {
				t.Fatalf("%s is a link to the absolute %q", rel, target)
			}
			if r, err := filepath.EvalSymlinks(p); err == nil && r != base && !strings.HasPrefix(r, base+string(filepath.Separator)) {
				t.Fatalf("%s is a link that leads out, to %s", rel, r)
			}
		case m&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0:
			t.Fatalf("%s is a special file (%v)", rel, m)
		case m&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0:
			t.Fatalf("%s kept a setuid, setgid or sticky bit (%v)", rel, m)
		}
		return nil
	})
}

// FuzzFilter: what Filter lets through is an archive whose names are local,
// whose links stay inside and that holds no special file or setuid bit.
func FuzzFilter(f *testing.F) {
	for _, s := range hostileSeeds(f) {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, contents bool) {
		var out bytes.Buffer
		if _, err := Filter(&out, bytes.NewReader(data), FilterOptions{Limits: Limits{MaxBytes: 1 << 20}, Contents: contents}); err != nil {
			return
		}
		s := newSandbox(t)
		mkdirDst(s)
		// The filtered archive passes Extract's confinement checks too
		// (Extract may still refuse it for its shape: a file replacing a
		// folder of the same archive).
		if _, err := Extract(s.root, Dest{Path: "dst", Raw: true}, &out, Options{}); codeOf(err) == fsproto.CodePathEscape {
			t.Fatalf("Filter passed an archive Extract refuses: %v", err)
		}
		s.checkCanary()
		checkSafeTree(t, s)
	})
}

// FuzzCleanName: a cleaned name is local and has no "." or ".." parts.
func FuzzCleanName(f *testing.F) {
	for _, s := range []string{"a", "./a/b/", "../x", "/abs", "a/../../b", "a\x00b", "..", ".", "a//b", `a\..\b`} {
		f.Add(s, "x")
	}
	f.Fuzz(func(t *testing.T, name, target string) {
		c, err := CleanName(name)
		if err == nil && c != "" {
			if !filepath.IsLocal(c) || strings.HasPrefix(c, "/") {
				t.Fatalf("CleanName(%q) = %q: not local", name, c)
			}
			for _, p := range strings.Split(c, "/") {
				if p == "" || p == "." || p == ".." {
					t.Fatalf("CleanName(%q) = %q: bad part %q", name, c, p)
				}
			}
			if LinkInside(c, target) {
				j := filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(c), target)))
				if j == ".." || strings.HasPrefix(j, "../") || strings.HasPrefix(target, "/") {
					t.Fatalf("LinkInside(%q, %q) but it resolves to %q", c, target, j)
				}
			}
		}
	})
}
