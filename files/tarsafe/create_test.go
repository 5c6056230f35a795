//go:build unix

package tarsafe

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
)

// listTar describes an archive: "name type mode [-> link] [content]".
func listTar(t testing.TB, data []byte) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		s := h.Name + " " + string(h.Typeflag) + " " + fsproto.ModeString(os.FileMode(h.Mode).Perm())
		if h.Linkname != "" {
			s += " -> " + h.Linkname
		}
		if len(b) > 0 {
			s += " " + string(b)
		}
		out = append(out, s)
	}
}

func TestCreateRoundTrip(t *testing.T) {
	src := newSandbox(t)
	mustWrite(t, filepath.Join(src.base, "top", "a"), "A")
	mustWrite(t, filepath.Join(src.base, "top", "sub", "b"), "B")
	os.Chmod(filepath.Join(src.base, "top", "sub", "b"), 0o750)
	os.Symlink("../a", filepath.Join(src.base, "top", "sub", "up"))
	os.Symlink(src.canary, filepath.Join(src.base, "top", "out")) // archived as a link, never followed
	var buf bytes.Buffer
	res, err := Create(&buf, src.root, "top", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := listTar(t, buf.Bytes())
	want := []string{"top/ 5 0755", "top/a 0 0644 A", "top/out 2 0777 -> " + src.canary, "top/sub/ 5 0755", "top/sub/b 0 0750 B", "top/sub/up 2 0777 -> ../a"}
	if diff := cmp.Diff(want, sortedCopy(got)); diff != "" {
		t.Errorf("archive (-want +got):\n%s", diff)
	}
	if res.Files != 2 || res.Dirs != 2 || res.Symlinks != 2 || res.Bytes != 2 {
		t.Errorf("result %+v", res)
	}
	// The receiving side refuses the link that leads out with Strict, and
	// keeps nothing.
	dst := newSandbox(t)
	if _, err := Extract(dst.root, Dest{Path: "copy"}, bytes.NewReader(buf.Bytes()), Options{Strict: true}); codeOf(err) != fsproto.CodePathEscape {
		t.Fatalf("extracting a link to the outside with Strict: %v", err)
	}
	if got := tree(t, dst.base); len(got) != 0 {
		t.Fatalf("a refused copy left %q", got)
	}
	os.Remove(filepath.Join(src.base, "top", "out"))
	buf.Reset()
	if _, err := Create(&buf, src.root, "top", CreateOptions{TopName: "renamed"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Extract(dst.root, Dest{Path: "copy"}, bytes.NewReader(buf.Bytes()), Options{KeepMode: true}); err != nil {
		t.Fatal(err)
	}
	want2 := []string{"copy/ 0755", "copy/a 0644 A", "copy/sub/ 0755", "copy/sub/b 0750 B", "copy/sub/up -> ../a"}
	if diff := cmp.Diff(want2, tree(t, dst.base)); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	dst.checkCanary()
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestCreateRefusesSourcesThatLeadOut(t *testing.T) {
	s := newSandbox(t)
	os.Symlink(s.canary, filepath.Join(s.base, "out"))
	os.Symlink("../canary", filepath.Join(s.base, "out2"))
	os.Mkdir(filepath.Join(s.base, "in"), 0o755)
	for _, name := range []string{"out", "out2", "out/secret", "out2/secret", "../canary/secret"} {
		var buf bytes.Buffer
		_, err := Create(&buf, s.root, name, CreateOptions{TopName: "x"})
		if codeOf(err) != fsproto.CodePathEscape {
			t.Errorf("Create(%q): %v, want path_escape", name, err)
		}
		if strings.Contains(buf.String(), "secret") {
			t.Errorf("Create(%q) archived the secret", name)
		}
	}
	var buf bytes.Buffer
	if _, err := Create(&buf, s.root, "in/", CreateOptions{MustBeDir: true}); err != nil {
		t.Errorf("a folder with a slash: %v", err)
	}
	mustWrite(t, filepath.Join(s.base, "f"), "F")
	if _, err := Create(&buf, s.root, "f", CreateOptions{MustBeDir: true}); codeOf(err) != fsproto.CodeNotDirectory {
		t.Errorf("a file named as a folder: %v", err)
	}
}

func TestCreateSpecialFilesAndCaps(t *testing.T) {
	s := newSandbox(t)
	mustWrite(t, filepath.Join(s.base, "top", "f"), "12345")
	if err := syscall.Mkfifo(filepath.Join(s.base, "top", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(s.base, "top", "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var buf bytes.Buffer
	if _, err := Create(&buf, s.root, "top", CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dst := newSandbox(t)
	res, err := Extract(dst.root, Dest{Path: "copy"}, bytes.NewReader(buf.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var skipped []string
	for _, sk := range res.Skipped {
		skipped = append(skipped, sk.Name+" "+sk.Type)
	}
	if diff := cmp.Diff([]string{"top/fifo fifo", "top/sock socket"}, sortedCopy(skipped)); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		lim  Limits
		code string
	}{{Limits{MaxBytes: 4}, fsproto.CodeTooLarge}, {Limits{MaxEntryBytes: 4}, fsproto.CodeTooLarge}, {Limits{MaxEntries: 2}, fsproto.CodeTooLarge}, {Limits{MaxBytes: 5, MaxEntries: 4}, ""}} {
		_, err := Create(io.Discard, s.root, "top", CreateOptions{Limits: tc.lim})
		if codeOf(err) != tc.code {
			t.Errorf("limits %+v: %v, want %q", tc.lim, err, tc.code)
		}
	}
	if _, err := Create(io.Discard, s.root, "top/fifo", CreateOptions{}); codeOf(err) != fsproto.CodeUnsupportedFile {
		t.Errorf("a FIFO as the source: %v", err)
	}
}

// TestCreateSwapRace: while a folder of the source is swapped for a link to
// the outside (and back) in a tight loop, Create never archives anything
// from outside: it fails with path_escape or archives what was inside.
func TestCreateSwapRace(t *testing.T) {
	s := newSandbox(t)
	d := filepath.Join(s.base, "top", "d")
	mustWrite(t, filepath.Join(d, "inside"), "inside")
	mustWrite(t, filepath.Join(s.canary, "sub", "secret2"), "secret")
	real := filepath.Join(s.base, "top", "d.real")
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		link := filepath.Join(s.base, "top", "d.link")
		for !stop.Load() {
			os.Symlink(s.canary, link)
			os.Rename(d, real)
			os.Rename(link, d) // d is now a link to the canary
			os.Rename(d, link)
			os.Rename(real, d) // and a folder again
			os.Remove(link)
		}
	}()
	okRuns, refused := 0, 0
	for i := 0; i < 300; i++ {
		var buf bytes.Buffer
		_, err := Create(&buf, s.root, "top", CreateOptions{})
		if strings.Contains(buf.String(), "secret") {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("run %d archived a file from outside the root", i)
		}
		switch codeOf(err) {
		case "":
			okRuns++
		case fsproto.CodePathEscape, fsproto.CodeNotFound:
			refused++
		default:
			t.Errorf("run %d: %v", i, err)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d complete archives, %d refused", okRuns, refused)
}

func TestFilter(t *testing.T) {
	tests := []struct {
		name     string
		ents     []ent
		contents bool
		strict   bool
		lim      Limits
		code     string
		want     []string
		skipped  []string
	}{
		{name: "clean", ents: []ent{dir("top"), file("top/a", "A"), symlink("top/l", "a"), ent{name: "top/su", typ: tar.TypeReg, mode: 0o4755, body: "S"}, special("top/tty", tar.TypeChar)},
			want: []string{"top/ 5 0755", "top/a 0 0644 A", "top/l 2 0777 -> a", "top/su 0 0755 S"}},
		{name: "contents", contents: true, ents: []ent{dir("top"), file("top/a", "A"), symlink("top/l", "a")},
			want: []string{"./ 5 0755", "./a 0 0644 A", "./l 2 0777 -> a"}},
		{name: "dotdot", ents: []ent{dir("top"), file("top/../../x", "E")}, code: fsproto.CodePathEscape},
		{name: "absolute", ents: []ent{dir("top"), file("/etc/x", "E")}, code: fsproto.CodePathEscape},
		{name: "outside the top", ents: []ent{dir("top"), file("other", "E")}, code: fsproto.CodePathEscape},
		{name: "link out", ents: []ent{dir("top"), symlink("top/l", "/etc"), file("top/a", "A")},
			want: []string{"top/ 5 0755", "top/a 0 0644 A"}, skipped: []string{"top/l -> /etc"}},
		{name: "link up", ents: []ent{dir("top"), symlink("top/l", "../..")}, want: []string{"top/ 5 0755"}, skipped: []string{"top/l -> ../.."}},
		// A link from the top folder to its parent leaves the copied folder,
		// with or without Contents.
		{name: "link up to the receiver's folder", ents: []ent{dir("top"), symlink("top/l", "../x")}, want: []string{"top/ 5 0755"}, skipped: []string{"top/l -> ../x"}},
		{name: "link up from contents", contents: true, ents: []ent{dir("top"), symlink("top/l", "..")}, want: []string{"./ 5 0755"}, skipped: []string{"top/l -> .."}},
		{name: "link out, strict", strict: true, ents: []ent{dir("top"), symlink("top/l", "/etc")}, code: fsproto.CodePathEscape},
		{name: "link up, strict", strict: true, ents: []ent{dir("top"), symlink("top/l", "../x")}, code: fsproto.CodePathEscape},
		{name: "link up from contents, strict", strict: true, contents: true, ents: []ent{dir("top"), symlink("top/l", "..")}, code: fsproto.CodePathEscape},
		{name: "the copied path is a link out", ents: []ent{symlink("top", "/etc")}, code: fsproto.CodePathEscape},
		{name: "through a link", ents: []ent{dir("top"), symlink("top/l", "."), file("top/l/x", "E")}, code: fsproto.CodePathEscape},
		{name: "through a skipped link", ents: []ent{dir("top"), symlink("top/l", "/etc"), file("top/l/passwd", "E")}, code: fsproto.CodePathEscape},
		{name: "hard link", ents: []ent{dir("top"), file("top/a", "A"), hardlink("top/h", "top/a")}, code: fsproto.CodePathEscape},
		{name: "cap", lim: Limits{MaxBytes: 1}, ents: []ent{dir("top"), file("top/a", "AA")}, code: fsproto.CodeTooLarge},
		{name: "empty", code: fsproto.CodeBadArchive},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			data := mkTar(t, tc.ents...)
			res, err := Filter(&out, bytes.NewReader(data), FilterOptions{Limits: tc.lim, Contents: tc.contents, Strict: tc.strict})
			if codeOf(err) != tc.code {
				t.Fatalf("error %v, want %q", err, tc.code)
			}
			if tc.code != "" {
				return
			}
			if diff := cmp.Diff(tc.want, listTar(t, out.Bytes())); diff != "" {
				t.Errorf("filtered (-want +got):\n%s", diff)
			}
			var skipped []string
			for _, sk := range res.Skipped {
				if sk.Type == fsproto.TypeSymlink {
					skipped = append(skipped, sk.Name+" -> "+sk.LinkTarget)
				}
			}
			if diff := cmp.Diff(tc.skipped, skipped); diff != "" {
				t.Errorf("skipped links (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWalkLinks: the final check catches a chain of links that each look
// inside but resolve outside (defense in depth behind LinkInside).
func TestWalkLinks(t *testing.T) {
	s := newSandbox(t)
	os.MkdirAll(filepath.Join(s.base, "sub"), 0o755)
	os.Symlink("..", filepath.Join(s.base, "sub", "x"))
	walk := func() map[string]bool {
		got := map[string]bool{}
		if err := walkLinks(s.root, ".", 0, func(p string, out bool) error {
			got[p] = out
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if diff := cmp.Diff(map[string]bool{"sub/x": false}, walk()); diff != "" {
		t.Fatalf("a link to the root (-want +got):\n%s", diff)
	}
	os.Symlink("x/..", filepath.Join(s.base, "sub", "y"))
	if diff := cmp.Diff(map[string]bool{"sub/x": false, "sub/y": true}, walk()); diff != "" {
		t.Fatalf("a chain leading out (-want +got):\n%s", diff)
	}
}

// TestCreateSwapAtTheWorstMoment: the swap of TestCreateSwapRace, made
// deterministic: a hook runs between the listing of a folder and the
// opening of one of its entries, and swaps that entry there and then.
// Whatever it is swapped for, nothing outside the root is archived: a
// folder or file that became a link leading out refuses the copy
// (path_escape); a link or file that became something else is skipped and
// reported; a folder that became a link inside archives what is inside.
func TestCreateSwapAtTheWorstMoment(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entry   string                        // the entry swapped, from the root
		swap    func(s *sandbox, p string)    // p: the entry's path on disk
		code    string                        // Create's error code
		skipped []string                      // "name type reason"
		check   func(t *testing.T, ar string) // on the archive's listing
	}{
		{name: "folder to a link to the outside", entry: "top/d", code: fsproto.CodePathEscape,
			swap: func(s *sandbox, p string) { swapFor(t, p, func() error { return os.Symlink(s.canary, p) }) }},
		{name: "folder to a relative link to the outside", entry: "top/d", code: fsproto.CodePathEscape,
			swap: func(s *sandbox, p string) { swapFor(t, p, func() error { return os.Symlink("../../canary", p) }) }},
		{name: "folder to a link to /", entry: "top/d", code: fsproto.CodePathEscape,
			swap: func(s *sandbox, p string) { swapFor(t, p, func() error { return os.Symlink("/", p) }) }},
		{name: "file to a link to the outside", entry: "top/f", code: fsproto.CodePathEscape,
			swap: func(s *sandbox, p string) {
				swapFor(t, p, func() error { return os.Symlink(filepath.Join(s.canary, "secret"), p) })
			}},
		{name: "file to a FIFO", entry: "top/f", skipped: []string{"top/f fifo changed while the copy ran"},
			swap: func(s *sandbox, p string) { swapFor(t, p, func() error { return syscall.Mkfifo(p, 0o644) }) }},
		{name: "link to a folder", entry: "top/l", skipped: []string{"top/l symlink changed while the copy ran"},
			swap: func(s *sandbox, p string) { swapFor(t, p, func() error { return os.Mkdir(p, 0o755) }) }},
		{name: "folder to a link inside", entry: "top/d",
			swap: func(s *sandbox, p string) { swapFor(t, p, func() error { return os.Symlink("other", p) }) },
			check: func(t *testing.T, ar string) {
				if !strings.Contains(ar, "top/d/o 0 0644 O") {
					t.Errorf("the folder swapped for a link inside was not archived from where the link leads:\n%s", ar)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			mustWrite(t, filepath.Join(s.base, "top", "d", "inside"), "inside")
			mustWrite(t, filepath.Join(s.base, "top", "f"), "F")
			mustWrite(t, filepath.Join(s.base, "top", "other", "o"), "O")
			os.Symlink("f", filepath.Join(s.base, "top", "l"))
			hit := 0
			testHookChild = func(name string) {
				if name == tc.entry {
					hit++
					tc.swap(s, filepath.Join(s.base, filepath.FromSlash(name)))
				}
			}
			defer func() { testHookChild = nil }()
			var buf bytes.Buffer
			res, err := Create(&buf, s.root, "top", CreateOptions{})
			if hit != 1 {
				t.Fatalf("the swap ran %d times, want once", hit)
			}
			if codeOf(err) != tc.code {
				t.Fatalf("Create: %v, want code %q", err, tc.code)
			}
			if strings.Contains(buf.String(), "secret") {
				t.Fatal("the archive holds the secret from outside the root")
			}
			s.checkCanary()
			if err != nil {
				return
			}
			var skipped []string
			for _, sk := range res.Skipped {
				skipped = append(skipped, sk.Name+" "+sk.Type+" "+sk.Reason)
			}
			if diff := cmp.Diff(tc.skipped, skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
			if tc.check != nil {
				tc.check(t, strings.Join(listTar(t, buf.Bytes()), "\n"))
			}
		})
	}
}

// swapFor moves p aside (to p.real) and makes something else at p.
func swapFor(t *testing.T, p string, make func() error) {
	if err := os.Rename(p, p+".real"); err != nil {
		t.Error(err)
		return
	}
	if err := make(); err != nil {
		t.Error(err)
	}
}

// With an Access (the local route reads as root for the sandbox's user), a
// file or folder that turned into a link while a copy ran is followed only
// as that user could follow it (creator.file and creator.child): through a
// folder it cannot search (mode 000) the target is refused, never opened.
// Before, those two followed the link without the user's checks: a race the
// local route lost (the sandbox's own unreadable data reached the host).
func TestAccessFollowing(t *testing.T) {
	owner := Access(func(fi fs.FileInfo, want fs.FileMode) error {
		if fi.Mode().Perm()>>6&want != want {
			return syscall.EACCES
		}
		return nil
	})
	s := newSandbox(t)
	mustWrite(t, filepath.Join(s.base, "top", "zz", "secret"), "PRIVATE")
	mustWrite(t, filepath.Join(s.base, "top", "zz", "sub", "s"), "PRIVATE")
	mustWrite(t, filepath.Join(s.base, "top", "open", "f"), "F")
	for name, target := range map[string]string{"xl": "zz/secret", "dl": "zz/sub", "zl": "zz", "ok": "open/f", "okd": "open"} {
		if err := os.Symlink(target, filepath.Join(s.base, "top", name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(s.base, "top", "zz"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(s.base, "top", "zz"), 0o755) })
	top, err := s.root.OpenRoot("top")
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	var opened []string
	testHookOpened = func(name string) { opened = append(opened, name) }
	defer func() { testHookOpened = nil }()
	if f, err := owner.openFileFollowing(top, "xl", openReadFlags); !errors.Is(err, syscall.EACCES) {
		t.Errorf("a file through a closed folder: %v, want EACCES", err)
		if f != nil {
			f.Close()
		}
	}
	for _, n := range []string{"dl", "zl"} {
		if r, err := owner.openPath(top, n); !errors.Is(err, syscall.EACCES) {
			t.Errorf("folder %s: %v, want EACCES", n, err)
			if r != nil {
				r.Close()
			}
		}
	}
	if slices.Contains(opened, "secret") || slices.Contains(opened, "sub") {
		t.Errorf("opened behind the closed folder: %q", opened)
	}
	// What the user can reach is followed.
	f, err := owner.openFileFollowing(top, "ok", openReadFlags)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	r, err := owner.openPath(top, "okd")
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
}
