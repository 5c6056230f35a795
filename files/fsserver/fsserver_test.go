//go:build unix

package fsserver

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
)

type env struct {
	t               *testing.T
	ws, user, outer string
}

// newEnv makes a workspace, a user space and, outside both, a folder with a
// secret that no command may read or change.
func newEnv(t *testing.T) *env {
	top := t.TempDir()
	e := &env{t: t, ws: filepath.Join(top, "ws"), user: filepath.Join(top, "user"), outer: filepath.Join(top, "outer")}
	for _, d := range []string{e.ws, e.user, e.outer} {
		os.Mkdir(d, 0o755)
	}
	os.WriteFile(filepath.Join(e.outer, "secret"), []byte("SECRET"), 0o644)
	return e
}

func (e *env) write(rel, body string) {
	p := filepath.Join(e.ws, rel)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) link(target, rel string) {
	if err := os.Symlink(target, filepath.Join(e.ws, rel)); err != nil {
		e.t.Fatal(err)
	}
}

type out struct {
	code           int
	stdout, stderr string
}

func (o out) err() fsproto.Error {
	var fe fsproto.Error
	json.Unmarshal([]byte(o.stderr), &fe)
	return fe
}

func (e *env) run(stdin io.Reader, args ...string) out {
	e.t.Helper()
	var so, se bytes.Buffer
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	s := &Server{Workspace: e.ws, User: e.user, Stdin: stdin, Stdout: &so, Stderr: &se, Umask: 0o022,
		Exit: func(int) { e.t.Fatal("unexpected exit") }}
	code := s.Run(args)
	return out{code, so.String(), se.String()}
}

// outerIntact fails when the outside folder changed.
func (e *env) outerIntact() {
	e.t.Helper()
	ents, _ := os.ReadDir(e.outer)
	if len(ents) != 1 {
		e.t.Fatalf("something was written outside the sandbox's spaces: %v", ents)
	}
	b, _ := os.ReadFile(filepath.Join(e.outer, "secret"))
	if string(b) != "SECRET" {
		e.t.Fatalf("the secret outside changed: %q", b)
	}
}

// TestConfinement: a symbolic link that leads outside, at any depth of the
// path, is refused with path_escape by every command, and nothing outside
// is read or written.
func TestConfinement(t *testing.T) {
	e := newEnv(t)
	e.write("d/e/f.txt", "inside")
	e.link(e.outer, "out")                // absolute, at the top
	e.link("../outer", "rel")             // relative, leading out
	e.link(e.outer, "d/e/deep")           // at depth
	e.link("../../../outer", "d/e/deep2") // relative, at depth
	e.link("e", "d/in")                   // inside: followed
	framed := func(body string) io.Reader {
		var b bytes.Buffer
		w := fsproto.NewCommitWriter(&b)
		w.Write([]byte(body))
		w.Commit()
		return &b
	}
	tarIn := func() io.Reader {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		tw.WriteHeader(&tar.Header{Name: "x", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
		tw.Write([]byte("X"))
		tw.Close()
		return bytes.NewReader(b.Bytes())
	}
	for _, p := range []string{"out", "out/secret", "rel/secret", "d/e/deep/secret", "d/e/deep2/secret", "d/in/deep/secret",
		"/opt/workspace/out/secret", "d/e/deep", "rel"} {
		for _, args := range [][]string{
			{"ls", p}, {"ls", "-r", p}, {"cat", p}, {"tar-out", p},
		} {
			o := e.run(nil, args...)
			if o.code != ExitFailed || o.err().Code != fsproto.CodePathEscape {
				t.Errorf("%v: exit %d, %s; want path_escape", args, o.code, o.stderr)
			}
			if strings.Contains(o.stdout, "SECRET") || strings.Contains(o.stdout, "secret") {
				t.Errorf("%v printed what is outside: %q", args, o.stdout)
			}
		}
		for _, tc := range []struct {
			args []string
			in   io.Reader
		}{
			{[]string{"put", "--framed", p + "/new"}, framed("evil")},
			{[]string{"put", p}, strings.NewReader("evil")},
			{[]string{"tar-in", p}, tarIn()},
			{[]string{"tar-in", "--raw", p}, tarIn()},
			{[]string{"rm", p + "/x"}, nil},
		} {
			o := e.run(tc.in, tc.args...)
			if o.code != ExitFailed || o.err().Code != fsproto.CodePathEscape {
				t.Errorf("%v: exit %d, %s; want path_escape", tc.args, o.code, o.stderr)
			}
		}
	}
	e.outerIntact()
	// Inside links are followed.
	if o := e.run(nil, "cat", "d/in/f.txt"); o.code != 0 || o.stdout != "inside" {
		t.Errorf("cat through an inside link: %+v", o)
	}
	// rm of a link removes the link only.
	if o := e.run(nil, "rm", "out"); o.code != 0 {
		t.Errorf("rm out: %+v", o)
	}
	if _, err := os.Lstat(filepath.Join(e.ws, "out")); err == nil {
		t.Error("the link is still there")
	}
	e.outerIntact()
}

func TestPathRules(t *testing.T) {
	e := newEnv(t)
	for _, p := range []string{"../../etc/passwd", "/etc/passwd", "/proc/self/environ", "a\x00b", "/opt/sandbox/sandbox-helper", ".."} {
		o := e.run(nil, "cat", p)
		if o.code != ExitFailed || o.err().Code != fsproto.CodePathEscape {
			t.Errorf("cat %q: %+v", p, o)
		}
	}
	os.WriteFile(filepath.Join(e.user, "u.txt"), []byte("user"), 0o644)
	if o := e.run(nil, "cat", "/opt/user/u.txt"); o.stdout != "user" {
		t.Errorf("cat /opt/user/u.txt: %+v", o)
	}
	if o := e.run(nil, "cat", "../user/u.txt"); o.stdout != "user" {
		t.Errorf("cat ../user/u.txt: %+v", o)
	}
}

func TestLs(t *testing.T) {
	e := newEnv(t)
	e.write("b.txt", "bb")
	e.write("a/x", "x")
	e.link("b.txt", "l")
	o := e.run(nil, "ls", "-r", ".")
	if o.code != 0 {
		t.Fatal(o)
	}
	var got []fsproto.Entry
	dec := json.NewDecoder(strings.NewReader(o.stdout))
	for dec.More() {
		var en fsproto.Entry
		if err := dec.Decode(&en); err != nil {
			t.Fatal(err)
		}
		got = append(got, en)
	}
	want := []fsproto.Entry{
		{Name: "a", Type: "dir", Mode: "0755"},
		{Name: "a/x", Type: "file", Size: 1, Mode: "0644"},
		{Name: "b.txt", Type: "file", Size: 2, Mode: "0644"},
		{Name: "l", Type: "symlink", Size: 5, Mode: "0777", LinkTarget: "b.txt"},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(fsproto.Entry{}, "ModTime"), cmpopts.IgnoreFields(fsproto.Entry{}, "Size")); diff != "" {
		t.Errorf("ls -r (-want +got):\n%s", diff)
	}
	o = e.run(nil, "ls", "b.txt")
	if !strings.Contains(o.stdout, `"name":"b.txt"`) {
		t.Errorf("ls of a file: %+v", o)
	}
	if o := e.run(nil, "ls", "nope"); o.err().Code != fsproto.CodeNotFound {
		t.Errorf("ls nope: %+v", o)
	}
}

func TestPut(t *testing.T) {
	e := newEnv(t)
	framed := func(body string, commit bool) io.Reader {
		var b bytes.Buffer
		w := fsproto.NewCommitWriter(&b)
		w.Write([]byte(body))
		if commit {
			w.Commit()
		}
		return &b
	}
	if o := e.run(framed("one", true), "put", "--framed", "new/dir/f.txt"); o.code != 0 || !strings.Contains(o.stdout, `"bytes":3`) {
		t.Fatalf("put: %+v", o)
	}
	os.Chmod(filepath.Join(e.ws, "new/dir/f.txt"), 0o600)
	// An interrupted upload leaves the old file.
	if o := e.run(framed("two, but cut", false), "put", "--framed", "new/dir/f.txt"); o.code != ExitFailed {
		t.Fatalf("uncommitted put: %+v", o)
	}
	b, _ := os.ReadFile(filepath.Join(e.ws, "new/dir/f.txt"))
	if string(b) != "one" {
		t.Fatalf("an interrupted put changed the file: %q", b)
	}
	if o := e.run(framed("three", true), "put", "--framed", "new/dir/f.txt"); o.code != 0 {
		t.Fatal(o)
	}
	fi, _ := os.Stat(filepath.Join(e.ws, "new/dir/f.txt"))
	b, _ = os.ReadFile(filepath.Join(e.ws, "new/dir/f.txt"))
	if string(b) != "three" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("overwrite: %q %v (the mode must stay)", b, fi.Mode())
	}
	if o := e.run(framed("x", true), "put", "--framed", "--mode", "0755", "m"); o.code != 0 {
		t.Fatal(o)
	}
	if fi, _ := os.Stat(filepath.Join(e.ws, "m")); fi.Mode().Perm() != 0o755 {
		t.Fatalf("--mode: %v", fi.Mode())
	}
	if o := e.run(framed("x", true), "put", "--framed", "--mode", "4755", "m"); o.code != ExitUsage {
		t.Fatalf("a setuid --mode: %+v", o)
	}
	if o := e.run(framed("x", true), "put", "--framed", "new"); o.err().Code != fsproto.CodeIsDirectory {
		t.Fatalf("put onto a folder: %+v", o)
	}
	// Replacing a hard link never writes through it.
	os.Link(filepath.Join(e.outer, "secret"), filepath.Join(e.ws, "hard"))
	if o := e.run(framed("evil", true), "put", "--framed", "hard"); o.code != 0 {
		t.Fatal(o)
	}
	e.outerIntact()
	ents, _ := os.ReadDir(filepath.Join(e.ws, "new/dir"))
	if len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
}

func TestRm(t *testing.T) {
	e := newEnv(t)
	e.write("d/f", "x")
	e.write("g", "x")
	if o := e.run(nil, "rm", "d"); o.err().Code != fsproto.CodeIsDirectory {
		t.Fatalf("rm of a folder without -r: %+v", o)
	}
	if o := e.run(nil, "rm", "-r", "d"); o.code != 0 {
		t.Fatal(o)
	}
	if o := e.run(nil, "rm", "g"); o.code != 0 {
		t.Fatal(o)
	}
	if o := e.run(nil, "rm", "g"); o.err().Code != fsproto.CodeNotFound {
		t.Fatalf("rm missing: %+v", o)
	}
	if o := e.run(nil, "rm", "-f", "g"); o.code != 0 {
		t.Fatalf("rm -f missing: %+v", o)
	}
	if o := e.run(nil, "rm", "-r", "."); o.err().Code != fsproto.CodeBadFlag {
		t.Fatalf("rm of the workspace: %+v", o)
	}
	if ents, _ := os.ReadDir(e.ws); len(ents) != 0 {
		t.Fatalf("left: %v", ents)
	}
}

func TestTarOutIn(t *testing.T) {
	e := newEnv(t)
	e.write("src/a", "A")
	e.write("src/sub/b", "B")
	o := e.run(nil, "tar-out", "src")
	if o.code != 0 {
		t.Fatal(o)
	}
	var framed bytes.Buffer
	w := fsproto.NewCommitWriter(&framed)
	w.Write([]byte(o.stdout))
	w.Commit()
	in := e.run(bytes.NewReader(framed.Bytes()), "tar-in", "--framed", "/opt/user/copy")
	if in.code != 0 {
		t.Fatal(in)
	}
	var res tarsafe.Result
	if err := json.Unmarshal([]byte(in.stdout), &res); err != nil || res.Files != 2 || res.Dirs != 2 {
		t.Fatalf("result %s: %v", in.stdout, err)
	}
	b, _ := os.ReadFile(filepath.Join(e.user, "copy/sub/b"))
	if string(b) != "B" {
		t.Fatalf("copied: %q", b)
	}
	// The root of a space is named after it.
	o = e.run(nil, "tar-out", "/opt/user")
	if !strings.HasPrefix(o.stdout, "user/") {
		t.Fatalf("tar-out /opt/user starts with %q", o.stdout[:10])
	}
	// Limits stop early.
	e.write("big", strings.Repeat("x", 1000))
	if o := e.run(nil, "tar-out", "--max-size", "100", "big"); o.err().Code != fsproto.CodeTooLarge {
		t.Fatalf("tar-out over the cap: %+v", o)
	}
	// Uncommitted upload: nothing is left.
	var cut bytes.Buffer
	w = fsproto.NewCommitWriter(&cut)
	w.Write([]byte(e.run(nil, "tar-out", "src").stdout))
	if o := e.run(&cut, "tar-in", "--framed", "cut"); o.code != ExitFailed {
		t.Fatalf("uncommitted tar-in: %+v", o)
	}
	if _, err := os.Lstat(filepath.Join(e.ws, "cut")); err == nil {
		t.Fatal("an uncommitted tar-in left its folder")
	}
}

func TestUsage(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{{}, {"nope", "x"}, {"ls"}, {"ls", "a", "b"}, {"cat", "--bogus", "x"}} {
		if o := e.run(nil, args...); o.code != ExitUsage || o.err().Code != fsproto.CodeBadFlag {
			t.Errorf("%v: %+v", args, o)
		}
	}
}

func TestWatchStdin(t *testing.T) {
	e := newEnv(t)
	e.write("f", "x")
	exited := make(chan int, 1)
	pr, pw := io.Pipe()
	var so bytes.Buffer
	s := &Server{Workspace: e.ws, User: e.user, Stdin: pr, Stdout: &so, Stderr: io.Discard, Exit: func(c int) { exited <- c }}
	if code := s.Run([]string{"cat", "--watch-stdin", "f"}); code != 0 {
		t.Fatal(code)
	}
	pw.Close()
	if c := <-exited; c != ExitAborted {
		t.Fatalf("exit %d", c)
	}
}

// snapshot describes everything under dir, to tell whether anything in it
// changed: type, mode, size, modification time and content.
func snapshot(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		s := fmt.Sprintf("%s %v %d %d", rel, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			s += " -> " + target
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			s += " " + string(b)
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMutationsThroughLinksLeaveTargets: links planted by sandboxed code
// that lead to EXISTING files and folders outside the spaces (or into the
// other space) are never followed by an operation that changes something:
// rm, rm -r, put (its rename, and the folders it creates), tar-in (its
// folders, files, renames, modes and times). Each case runs on a fresh
// layout and checks that everything outside the workspace (the outer
// folder, and the user space) is byte for byte, mode for mode and time for
// time as it was, and, where the operation is refused, that it is refused
// with path_escape.
func TestMutationsThroughLinksLeaveTargets(t *testing.T) {
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	framed := func(body string) io.Reader {
		var b bytes.Buffer
		w := fsproto.NewCommitWriter(&b)
		w.Write([]byte(body))
		w.Commit()
		return &b
	}
	archive := func(ents ...*tar.Header) func() io.Reader {
		return func() io.Reader {
			var b bytes.Buffer
			tw := tar.NewWriter(&b)
			for _, h := range ents {
				h := *h
				body := ""
				if h.Typeflag == tar.TypeReg {
					body = "EVIL"
					h.Size = 4
				}
				h.ModTime = old
				tw.WriteHeader(&h)
				io.WriteString(tw, body)
			}
			tw.Close()
			var f bytes.Buffer
			w := fsproto.NewCommitWriter(&f)
			w.Write(b.Bytes())
			w.Commit()
			return &f
		}
	}
	d := func(n string, mode int64) *tar.Header { return &tar.Header{Name: n, Typeflag: tar.TypeDir, Mode: mode} }
	f := func(n string) *tar.Header { return &tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o4777} }
	// A folder copy (tar-out's shape): top/, with a file, a restrictive
	// folder and a file in it, and names that meet the planted links.
	folder := archive(d("top", 0o500), f("top/secret"), d("top/dir", 0o500), f("top/dir/keep"), f("top/keep"), f("top/new"))
	single := archive(f("secret"))
	raw := archive(d("./", 0o500), f("./secret"), d("./dir", 0o500), f("./dir/keep"), f("./keep"))

	const escape, ok = fsproto.CodePathEscape, ""
	tests := []struct {
		args []string
		in   func() io.Reader
		code string
	}{
		// rm of a file or folder through a link that leads out, at the top
		// or at depth, absolute or relative, or into the user space.
		{args: []string{"rm", "out/secret"}, code: escape},
		{args: []string{"rm", "rel/secret"}, code: escape},
		{args: []string{"rm", "d/e/deep/secret"}, code: escape},
		{args: []string{"rm", "out/dir/keep"}, code: escape},
		{args: []string{"rm", "usr/keep"}, code: escape},
		{args: []string{"rm", "usrrel/keep"}, code: escape},
		{args: []string{"rm", "-f", "out/secret"}, code: escape},
		{args: []string{"rm", "/opt/workspace/out/secret"}, code: escape},
		// rm of the link itself: the link goes, its target stays.
		{args: []string{"rm", "sec"}, code: ok},
		{args: []string{"rm", "usec"}, code: ok},
		{args: []string{"rm", "out"}, code: ok},
		{args: []string{"rm", "-r", "out"}, code: ok},
		// rm -r through a link, and of a folder that holds links out.
		{args: []string{"rm", "-r", "out/dir"}, code: escape},
		{args: []string{"rm", "-r", "rel/dir"}, code: escape},
		{args: []string{"rm", "-r", "usr/udir"}, code: escape},
		{args: []string{"rm", "-r", "d/e/deep/dir"}, code: escape},
		{args: []string{"rm", "-r", "d"}, code: ok},
		// put: onto a link to a file, through a link to a folder, and
		// making folders through one.
		{args: []string{"put", "--framed", "sec"}, in: func() io.Reader { return framed("EVIL") }, code: escape},
		{args: []string{"put", "--framed", "usec"}, in: func() io.Reader { return framed("EVIL") }, code: escape},
		{args: []string{"put", "--framed", "--mode", "0777", "out/secret"}, in: func() io.Reader { return framed("EVIL") }, code: escape},
		{args: []string{"put", "--framed", "out/dir/keep"}, in: func() io.Reader { return framed("EVIL") }, code: escape},
		{args: []string{"put", "--framed", "out/newdir/f"}, in: func() io.Reader { return framed("EVIL") }, code: escape},
		{args: []string{"put", "--framed", "d/e/deep/dir/new/f"}, in: func() io.Reader { return framed("EVIL") }, code: escape},
		{args: []string{"put", "--framed", "usr/keep"}, in: func() io.Reader { return framed("EVIL") }, code: escape},
		{args: []string{"put", "--framed", "usrrel/new/f"}, in: func() io.Reader { return framed("EVIL") }, code: escape},
		// tar-in into a link to a folder outside, as a new or an existing
		// destination, with and without the folder's contents.
		{args: []string{"tar-in", "--framed", "out"}, in: folder, code: escape},
		{args: []string{"tar-in", "--framed", "--contents", "out"}, in: folder, code: escape},
		{args: []string{"tar-in", "--framed", "out/dir"}, in: folder, code: escape},
		{args: []string{"tar-in", "--framed", "out/newdir"}, in: folder, code: escape},
		{args: []string{"tar-in", "--framed", "--raw", "out"}, in: raw, code: escape},
		{args: []string{"tar-in", "--framed", "--raw", "usr"}, in: raw, code: escape},
		{args: []string{"tar-in", "--framed", "--contents", "usr/udir"}, in: folder, code: escape},
		{args: []string{"tar-in", "--framed", "sec"}, in: single, code: escape},
		{args: []string{"tar-in", "--framed", "out/secret"}, in: single, code: escape},
		// tar-in into a folder of the workspace that holds links out where
		// the archive has a file (replaced, never written through) or a
		// folder (refused before anything is written).
		{args: []string{"tar-in", "--framed", "--contents", "files"}, in: archive(d("top", 0o500), f("top/secret"), f("top/keep")), code: ok},
		{args: []string{"tar-in", "--framed", "--raw", "files"}, in: archive(f("secret"), f("keep")), code: ok},
		{args: []string{"tar-in", "--framed", "--contents", "folders"}, in: archive(d("top", 0o500), d("top/dir", 0o500), f("top/dir/keep")), code: escape},
		{args: []string{"tar-in", "--framed", "--contents", "folders"}, in: archive(d("top", 0o500), d("top/udir", 0o500), f("top/udir/k")), code: escape},
		{args: []string{"tar-in", "--framed", "--raw", "folders"}, in: archive(d("dir", 0o500), f("dir/keep")), code: escape},
		{args: []string{"tar-in", "--framed", "--keep-mode", "--contents", "folders"}, in: archive(d("top", 0o500), d("top/dir", 0o000)), code: escape},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			e := newEnv(t)
			os.Mkdir(filepath.Join(e.outer, "dir"), 0o755)
			os.WriteFile(filepath.Join(e.outer, "dir", "keep"), []byte("KEEP"), 0o644)
			os.WriteFile(filepath.Join(e.user, "keep"), []byte("USER"), 0o644)
			os.Mkdir(filepath.Join(e.user, "udir"), 0o755)
			os.WriteFile(filepath.Join(e.user, "udir", "k"), []byte("K"), 0o644)
			for _, p := range []string{filepath.Join(e.outer, "secret"), filepath.Join(e.outer, "dir"), filepath.Join(e.outer, "dir", "keep"),
				filepath.Join(e.user, "keep"), filepath.Join(e.user, "udir"), filepath.Join(e.user, "udir", "k"), e.outer, e.user} {
				os.Chtimes(p, old, old)
			}
			e.link(e.outer, "out")
			e.link("../outer", "rel")
			e.link(filepath.Join(e.outer, "secret"), "sec")
			e.link(e.user, "usr")
			e.link("../user", "usrrel")
			e.link("../user/keep", "usec")
			e.write("d/e/f.txt", "inside")
			e.link(e.outer, "d/e/deep")
			os.Mkdir(filepath.Join(e.ws, "files"), 0o755)
			e.link(filepath.Join(e.outer, "secret"), "files/secret")
			e.link("../../user/keep", "files/keep")
			os.Mkdir(filepath.Join(e.ws, "folders"), 0o755)
			e.link(filepath.Join(e.outer, "dir"), "folders/dir")
			e.link("../../user/udir", "folders/udir")
			outer, user := snapshot(t, e.outer), snapshot(t, e.user)

			var in io.Reader
			if tc.in != nil {
				in = tc.in()
			}
			o := e.run(in, tc.args...)
			if tc.code == ok && o.code != 0 {
				t.Errorf("exit %d, %s; want success", o.code, o.stderr)
			}
			if tc.code != ok && (o.code != ExitFailed || o.err().Code != tc.code) {
				t.Errorf("exit %d, %s; want %s", o.code, o.stderr, tc.code)
			}
			if diff := cmp.Diff(outer, snapshot(t, e.outer)); diff != "" {
				t.Errorf("the folder outside the spaces changed (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(user, snapshot(t, e.user)); diff != "" {
				t.Errorf("the user space changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestMutationsWhenALinkIsSwappedIn: the operation checked its path while
// every folder on it was a real folder; sandboxed code then swaps one for a
// link to an existing folder outside (or to the user space) before the
// operation changes anything (a hook runs at that moment, so the swap
// always lands in the window). The change never goes through the link: the
// files and folders it leads to are all as they were.
func TestMutationsWhenALinkIsSwappedIn(t *testing.T) {
	framed := func(body string) io.Reader {
		var b bytes.Buffer
		w := fsproto.NewCommitWriter(&b)
		w.Write([]byte(body))
		w.Commit()
		return &b
	}
	tests := []struct {
		op   string // the hook's op the swap waits for
		args []string
		in   func() io.Reader
		swap string // what is swapped for a link: "a" (a folder) or "a/secret" (the file itself)
		to   string // "outer" or "user"
	}{
		{op: "rm", args: []string{"rm", "a/secret"}, swap: "a", to: "outer"},
		{op: "rm", args: []string{"rm", "a/keep"}, swap: "a", to: "user"},
		{op: "rm", args: []string{"rm", "a/dir/keep"}, swap: "a", to: "outer"},
		{op: "rm -r", args: []string{"rm", "-r", "a/dir"}, swap: "a", to: "outer"},
		{op: "rm -r", args: []string{"rm", "-r", "a/udir"}, swap: "a", to: "user"},
		{op: "put", args: []string{"put", "--framed", "a/secret"}, in: func() io.Reader { return framed("EVIL") }, swap: "a", to: "outer"},
		{op: "put", args: []string{"put", "--framed", "a/dir/keep"}, in: func() io.Reader { return framed("EVIL") }, swap: "a", to: "outer"},
		{op: "put", args: []string{"put", "--framed", "a/keep"}, in: func() io.Reader { return framed("EVIL") }, swap: "a", to: "user"},
		{op: "put-rename", args: []string{"put", "--framed", "a/secret"}, in: func() io.Reader { return framed("EVIL") }, swap: "a", to: "outer"},
		{op: "put-rename", args: []string{"put", "--framed", "a/secret"}, in: func() io.Reader { return framed("EVIL") }, swap: "a/secret", to: "outer"},
	}
	for _, tc := range tests {
		t.Run(tc.op+" "+strings.Join(tc.args, " ")+" "+tc.swap+"->"+tc.to, func(t *testing.T) {
			e := newEnv(t)
			os.Mkdir(filepath.Join(e.outer, "dir"), 0o755)
			os.WriteFile(filepath.Join(e.outer, "dir", "keep"), []byte("KEEP"), 0o644)
			os.WriteFile(filepath.Join(e.user, "keep"), []byte("USER"), 0o644)
			os.Mkdir(filepath.Join(e.user, "udir"), 0o755)
			os.WriteFile(filepath.Join(e.user, "udir", "k"), []byte("K"), 0o644)
			// The workspace mirrors the names outside, as real files.
			e.write("a/secret", "ws")
			e.write("a/keep", "ws")
			e.write("a/dir/keep", "ws")
			e.write("a/udir/k", "ws")
			outer, user := snapshot(t, e.outer), snapshot(t, e.user)
			target := e.outer
			if tc.to == "user" {
				target = e.user
			}
			if tc.swap == "a/secret" {
				target = filepath.Join(e.outer, "secret")
			}
			swapped := 0
			testHookMutate = func(op, rel string) {
				if op != tc.op {
					return
				}
				swapped++
				p := filepath.Join(e.ws, filepath.FromSlash(tc.swap))
				if err := os.Rename(p, p+".real"); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(target, p); err != nil {
					t.Error(err)
				}
			}
			defer func() { testHookMutate = nil }()
			var in io.Reader
			if tc.in != nil {
				in = tc.in()
			}
			o := e.run(in, tc.args...)
			if swapped != 1 {
				t.Fatalf("the swap ran %d times, want once (%+v)", swapped, o)
			}
			if o.code != 0 && o.err().Code != fsproto.CodePathEscape {
				t.Errorf("exit %d, %s; want success or path_escape", o.code, o.stderr)
			}
			if diff := cmp.Diff(outer, snapshot(t, e.outer)); diff != "" {
				t.Errorf("the folder outside the spaces changed (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(user, snapshot(t, e.user)); diff != "" {
				t.Errorf("the user space changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestConfinementOnTheWay: a folder on the way of a path that is a link
// leading out is refused by the server itself before os.Root walks it
// (gVisor's openat follows such a link despite O_NOFOLLOW|O_DIRECTORY, so
// os.Root alone would read through it there: README, runc vs runsc); a link
// on the way that stays inside is followed.
func TestConfinementOnTheWay(t *testing.T) {
	e := newEnv(t)
	e.write("d/e/f.txt", "inside")
	e.link(e.outer, "d/out")
	e.link("../../outer", "d/rel")
	e.link("e", "d/in")
	e.link("in/../out", "d/chain")
	for _, p := range []string{"d/out/secret", "d/rel/secret", "d/in/../out/secret", "d/chain/secret", "/opt/workspace/d/out/x/y"} {
		for _, args := range [][]string{{"cat", p}, {"ls", p}, {"tar-out", p}, {"rm", p}, {"put", p}} {
			o := e.run(strings.NewReader("evil"), args...)
			if o.code != ExitFailed || o.err().Code != fsproto.CodePathEscape || !strings.Contains(o.stderr, "on its way") {
				t.Errorf("%v: exit %d, %s; want path_escape from the server's own check of the way", args, o.code, o.stderr)
			}
		}
	}
	e.outerIntact()
	if o := e.run(nil, "cat", "d/in/f.txt"); o.code != 0 || o.stdout != "inside" {
		t.Errorf("cat through an inside link on the way: %+v", o)
	}
}
