package plugin_test

// End-to-end tests of `docker sandbox cp` and `docker sandbox files`
// (DESIGN.md, "Files and path confinement"): copies in every direction
// against the real engine, and the hostile cases, each asserting what must
// NOT exist or change afterwards, on the host and in the sandbox.

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// cpSh runs a shell script in the scope's sandbox and fails unless it
// exits 0; it returns stdout.
// Listings without coreutils' ls and stat, which fail with EINVAL under
// gVisor (runsc 2022-12 refuses their statx): python's os.lstat works under
// both runtimes. shLsA DIR prints DIR's entries as ls -A does (sorted, one
// a line), shModes PATH... each path's permission bits as stat -c %a does,
// shTreeModes "PATH MODE" for . and everything under it, sorted, as
// find . | sort with stat -c %a.
const (
	shLsA       = `python3 -c 'import os, sys; [print(n) for n in sorted(os.listdir(sys.argv[1]))]'`
	shModes     = `python3 -c 'import os, sys; [print(format(os.lstat(p).st_mode & 0o7777, "o")) for p in sys.argv[1:]]'`
	shTreeModes = `python3 -c 'import os; ps = ["."] + [os.path.join(r, n) for r, ds, fs in os.walk(".") for n in ds + fs]; [print(p, format(os.lstat(p).st_mode & 0o7777, "o")) for p in sorted(ps)]'`
)

func cpSh(t *testing.T, scope, script string) string {
	t.Helper()
	r := sb(t, "exec", "-s", scope, "--lang", "sh", "-c", script)
	wantCode(t, r, 0)
	return r.Stdout
}

// cpHostTree lists a host folder: "name=content" for files, "name/" for
// folders, "name -> target" for links, with " mode" for files and folders.
func cpHostTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out = append(out, rel+" -> "+target)
		case fi.IsDir():
			out = append(out, fmt.Sprintf("%s/ %04o", rel, fi.Mode().Perm()))
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			out = append(out, fmt.Sprintf("%s=%s %04o", rel, b, fi.Mode().Perm()))
		default:
			out = append(out, fmt.Sprintf("%s %v", rel, fi.Mode()))
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// cpCanary is a host folder outside every destination, with a secret file;
// cpCanaryIntact fails when anything in it changed.
type cpCanary struct{ dir string }

func newCpCanary(t *testing.T) cpCanary {
	t.Helper()
	c := cpCanary{dir: t.TempDir()}
	if err := os.WriteFile(filepath.Join(c.dir, "secret"), []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c cpCanary) intact(t *testing.T) {
	t.Helper()
	if got := cpHostTree(t, c.dir); len(got) != 1 || got[0] != "secret=SECRET 0600" {
		t.Fatalf("the canary folder outside the destination changed: %q", got)
	}
}

// cpWantErr fails unless r is exit 125 with the JSON error code.
func cpWantErr(t *testing.T, r result, code string) {
	t.Helper()
	wantCode(t, r, 125)
	if j := decodeErr(t, r); j.Error.Code != code {
		t.Fatalf("error code %q, want %q:\n%s", j.Error.Code, code, r)
	}
}

// cpMissing fails when p exists on the host.
func cpMissing(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); err == nil {
		t.Fatalf("%s exists on the host, and must not", p)
	}
}

// cpTar builds a tar stream from headers (a regular file's content is in
// its Linkname field, moved to the body).
func cpTar(t *testing.T, hs ...*tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hs {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body, h.Linkname = h.Linkname, ""
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// cpTmpList lists the sandbox's /tmp without the code files exec puts there
// and the helper's run lock and drain flag.
const cpTmpList = "find /tmp -mindepth 1 -not -path '/tmp/.sandbox-code-*' -not -path '/tmp/.sandbox-helper.*'"

// cpJSON mirrors the documented cp --format json schema.
type cpJSON struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
	Files       int64  `json:"files"`
	Dirs        int64  `json:"dirs"`
	Symlinks    int64  `json:"symlinks"`
	Hardlinks   int64  `json:"hardlinks"`
	Bytes       int64  `json:"bytes"`
	Skipped     []struct {
		Name            string `json:"name"`
		Type            string `json:"type"`
		Reason          string `json:"reason"`
		LinkTarget      string `json:"link_target"`
		NameBytes       []byte `json:"name_bytes"`
		LinkTargetBytes []byte `json:"link_target_bytes"`
	} `json:"skipped"`
	SkippedCount  int64    `json:"skipped_count"`
	Stripped      []string `json:"stripped"`
	StrippedCount int64    `json:"stripped_count"`
}

func cpDecode(t *testing.T, r result) cpJSON {
	t.Helper()
	wantCode(t, r, 0)
	var j cpJSON
	dec := json.NewDecoder(strings.NewReader(r.Stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		t.Fatalf("cp --format json: %v\n%s", err, r)
	}
	return j
}

func cpWriteHost(t *testing.T, p, body string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// TestCpRoundTrip: host -> sandbox -> host with docker cp's rules: a
// folder to a new path, a file into a folder, "/." for a folder's
// contents, -a for exact modes, and setuid bits always removed.
func TestCpRoundTrip(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	host := t.TempDir()
	src := filepath.Join(host, "src")
	cpWriteHost(t, filepath.Join(src, "a.txt"), "A", 0o644)
	cpWriteHost(t, filepath.Join(src, "sub", "b.txt"), "B", 0o600)
	cpWriteHost(t, filepath.Join(src, "run.sh"), "#!/bin/sh", 0o755)
	cpWriteHost(t, filepath.Join(src, "su"), "S", os.ModeSetuid|0o755)
	cpWriteHost(t, filepath.Join(src, "w.txt"), "W", 0o666)
	if err := os.Symlink("a.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	cpWriteHost(t, filepath.Join(host, "f.txt"), "F", 0o640)

	r := sb(t, "cp", "--format", "json", src, s+":src")
	j := cpDecode(t, r)
	if j.Files != 5 || j.Dirs != 2 || j.Symlinks != 1 || j.Bytes != 13 || j.StrippedCount != 1 || j.Source != src || j.Destination != s+":src" {
		t.Errorf("cp --format json: %+v", j)
	}
	execMustPass(t, "cp", filepath.Join(host, "f.txt"), s+":src/")
	execMustPass(t, "cp", "-a", src, s+":/opt/user/kept")
	got := cpSh(t, s, `cd /opt/workspace/src && `+shTreeModes+`; readlink link; `+shModes+` /opt/user/kept/su /opt/user/kept/sub/b.txt /opt/user/kept/w.txt`)
	want := ". 755\n./a.txt 644\n./f.txt 640\n./link 777\n./run.sh 755\n./su 755\n./sub 755\n./sub/b.txt 600\n./w.txt 644\na.txt\n755\n600\n666\n"
	if got != want {
		t.Errorf("in the sandbox:\n%s\nwant:\n%s", got, want)
	}

	out := filepath.Join(host, "out")
	execMustPass(t, "cp", s+":src", out) // a new folder
	wantTree := []string{"a.txt=A 0644", "f.txt=F 0640", "link -> a.txt", "run.sh=#!/bin/sh 0755", "su=S 0755", "sub/ 0755", "sub/b.txt=B 0600", "w.txt=W 0644"}
	if diff := cmp.Diff(wantTree, cpHostTree(t, out)); diff != "" {
		t.Errorf("copied back (-want +got):\n%s", diff)
	}
	into := filepath.Join(host, "into")
	os.Mkdir(into, 0o755)
	execMustPass(t, "cp", s+":src", into)                                         // into an existing folder
	execMustPass(t, "cp", s+":src/.", into)                                       // its contents
	execMustPass(t, "cp", s+":src/sub/b.txt", filepath.Join(into, "renamed.txt")) // a file to a new name
	tr := cpHostTree(t, into)
	for _, w := range []string{"src/ 0755", "src/sub/b.txt=B 0600", "a.txt=A 0644", "sub/b.txt=B 0600", "renamed.txt=B 0600"} {
		if !cpContains(tr, w) {
			t.Errorf("missing %q in %q", w, tr)
		}
	}
	// docker cp's error cases.
	cpWantErr(t, sb(t, "cp", "--format", "json", filepath.Join(host, "f.txt"), s+":nope/"), "file_not_found")
	cpWantErr(t, sb(t, "cp", "--format", "json", s+":src", filepath.Join(out, "a.txt")), "not_directory")
	cpWantErr(t, sb(t, "cp", "--format", "json", s+":src/a.txt/", filepath.Join(host, "x")), "not_directory")
	cpWantErr(t, sb(t, "cp", "--format", "json", s+":nothing", filepath.Join(host, "x")), "file_not_found")
	cpWantErr(t, sb(t, "cp", "--format", "json", filepath.Join(host, "nothing"), s+":x"), "file_not_found")
	cpWantErr(t, sb(t, "cp", "--format", "json", filepath.Join(host, "f.txt"), filepath.Join(host, "g.txt")), "bad_flag")
	cpMissing(t, filepath.Join(host, "x"))
	cpMissing(t, filepath.Join(host, "g.txt"))
}

func cpContains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// TestCpBetweenSandboxes: another scope and a session, streamed from one
// helper to the other; sessions keep their workspaces apart.
func TestCpBetweenSandboxes(t *testing.T) {
	needE2E(t)
	a, b := newScope(t), newScope(t)
	cpSh(t, a, `mkdir -p data/sub && echo one > data/1.txt && echo two > data/sub/2.txt && ln -s 1.txt data/l`)
	execMustPass(t, "cp", a+":data", a+"/chatA:copy")
	execMustPass(t, "cp", a+"/chatA:copy", b+":/opt/user/fromA")
	execMustPass(t, "cp", a+":data/.", b+"/s2:")
	got := cpSh(t, b, `cd /opt/user/fromA && cat 1.txt sub/2.txt && readlink l`)
	if got != "one\ntwo\n1.txt\n" {
		t.Errorf("in %s: %q", b, got)
	}
	if got := strings.TrimSpace(sb(t, "exec", "-s", b, "--session", "s2", "-c", "cat /opt/workspace/sub/2.txt").Stdout); got != "two" {
		t.Errorf("in %s/s2: %q", b, got)
	}
	// The session's copy is in its own workspace, not the scope's.
	if got := cpSh(t, a, `test -e /opt/workspace/copy && echo leaked || echo private`); got != "private\n" {
		t.Errorf("a session's workspace is visible in the scope's: %q", got)
	}
}

// TestCpTarStreams: "-" as SRC extracts a tar stream into a folder, "-" as
// DST writes one.
func TestCpTarStreams(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	cpSh(t, s, "mkdir in")
	data := cpTar(t, &tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "./x.txt", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "X"},
		&tar.Header{Name: "./d/y.txt", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "Y"})
	wantCode(t, sbRun(t, run{args: []string{"cp", "-", s + ":in"}, stdin: bytes.NewReader(data)}), 0)
	if got := cpSh(t, s, "cat in/x.txt in/d/y.txt"); got != "XY" {
		t.Errorf("extracted: %q", got)
	}
	r := sb(t, "cp", s+":in", "-")
	wantCode(t, r, 0)
	var names []string
	tr := tar.NewReader(strings.NewReader(r.Stdout))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("cp SRC - wrote a bad tar stream: %v", err)
		}
		names = append(names, h.Name)
	}
	sort.Strings(names)
	if diff := cmp.Diff([]string{"in/", "in/d/", "in/d/y.txt", "in/x.txt"}, names); diff != "" {
		t.Errorf("tar stream (-want +got):\n%s", diff)
	}
	cpWantErr(t, sb(t, "cp", "--format", "json", s+":in", "-"), "bad_flag")
	cpWantErr(t, sbRun(t, run{args: []string{"cp", "--format", "json", "-", s + ":nope"}, stdin: bytes.NewReader(data)}), "file_not_found")
}

// TestCpStartsSandbox: copying into a scope that has no container creates
// it; into one whose container was stopped starts a new one; all of it
// with the read-only root filesystem in place.
func TestCpStartsSandbox(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	host := t.TempDir()
	cpWriteHost(t, filepath.Join(host, "f.txt"), "persisted", 0o644)
	execMustPass(t, "cp", filepath.Join(host, "f.txt"), s+":f.txt")
	if c, _ := objects(t, s); c != 1 {
		t.Fatalf("cp into a new scope: %d containers, want 1", c)
	}
	if !inspectSandbox(t, s, "").HostConfig.ReadonlyRootfs {
		t.Fatal("the sandbox's root filesystem is not read-only")
	}
	execMustPass(t, "stop", s)
	poll(t, 30*time.Second, func() error {
		if c, _ := objects(t, s); c != 0 {
			return fmt.Errorf("%d containers", c)
		}
		return nil
	})
	execMustPass(t, "cp", s+":f.txt", filepath.Join(host, "back.txt"))
	if b, _ := os.ReadFile(filepath.Join(host, "back.txt")); string(b) != "persisted" {
		t.Fatalf("copied back from a restarted sandbox: %q", b)
	}
	wantStdout(t, sb(t, "files", "cat", s+":f.txt"), "persisted")
}

// cpEntry mirrors the documented files ls --format json entry.
type cpEntry struct {
	Name       string    `json:"name"`
	Type       string    `json:"type"`
	Size       int64     `json:"size"`
	Mode       string    `json:"mode"`
	ModTime    time.Time `json:"mod_time"`
	LinkTarget string    `json:"link_target"`
}

func TestFilesCommands(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	wantCode(t, sbIn(t, "hello\n", "files", "put", s+":notes/day1.txt"), 0) // creates the parents
	wantStdout(t, sb(t, "files", "cat", s+":notes/day1.txt"), "hello\n")
	wantCode(t, sbIn(t, "v2", "files", "put", "--mode", "0600", s+":notes/day1.txt"), 0) // overwrites
	wantStdout(t, sb(t, "files", "cat", "-s", s, "notes/day1.txt"), "v2")
	r := sbIn(t, "x", "files", "put", "--format", "json", s+":/opt/user/u.txt")
	wantStdout(t, r, `{"path":"/opt/user/u.txt","bytes":1}`+"\n")
	cpSh(t, s, "ln -s day1.txt notes/link && mkdir notes/sub")

	r = sb(t, "files", "ls", "--format", "json", s+":notes")
	wantCode(t, r, 0)
	var ls struct {
		Path    string    `json:"path"`
		Entries []cpEntry `json:"entries"`
	}
	dec := json.NewDecoder(strings.NewReader(r.Stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ls); err != nil {
		t.Fatalf("files ls --format json: %v\n%s", err, r)
	}
	if ls.Path != "/opt/workspace/notes" || len(ls.Entries) != 3 {
		t.Fatalf("ls: %+v", ls)
	}
	e := ls.Entries
	if e[0].Name != "day1.txt" || e[0].Type != "file" || e[0].Size != 2 || e[0].Mode != "0600" || time.Since(e[0].ModTime) > time.Hour ||
		e[1].Name != "link" || e[1].Type != "symlink" || e[1].LinkTarget != "day1.txt" || e[2].Name != "sub" || e[2].Type != "dir" {
		t.Errorf("ls entries: %+v", e)
	}
	r = sb(t, "files", "ls", "-r", s+":")
	wantCode(t, r, 0)
	for _, w := range []string{"notes/", "notes/day1.txt", "notes/link -> day1.txt", "notes/sub/"} {
		if !strings.Contains(r.Stdout, w) {
			t.Errorf("ls -r lacks %q:\n%s", w, r.Stdout)
		}
	}
	cpWantErr(t, sb(t, "files", "rm", "--format", "json", s+":notes"), "is_directory")
	cpWantErr(t, sb(t, "files", "cat", "--format", "json", s+":notes"), "is_directory")
	cpWantErr(t, sb(t, "files", "cat", "--format", "json", s+":nope"), "file_not_found")
	execMustPass(t, "files", "rm", s+":notes/link")
	wantStdout(t, sb(t, "files", "cat", s+":notes/day1.txt"), "v2") // rm of a link leaves its target
	wantStdout(t, sb(t, "files", "rm", "-r", "--format", "json", s+":notes"), `{"path":"/opt/workspace/notes","removed":true}`+"\n")
	wantStdout(t, sb(t, "files", "rm", "-f", "--format", "json", s+":notes"), `{"path":"/opt/workspace/notes","removed":false}`+"\n")
	// Without a session, /opt/user is the workspace's volume too.
	if got := cpSh(t, s, shLsA+" /opt/workspace"); got != "u.txt\n" {
		t.Errorf("after rm -r: %q", got)
	}
}

// TestFilesPutInterrupted: a put whose plugin is killed mid-upload leaves
// the old file, never a half-written one, and no temporary file.
func TestFilesPutInterrupted(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	wantCode(t, sbIn(t, "old", "files", "put", s+":f.txt"), 0)
	cmd := osexec.Command(pluginBin, "files", "put", s+":f.txt")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("new!"), 64<<10)
	for i := 0; i < 8; i++ { // 2 MiB, then the plugin dies
		if _, err := stdin.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the helper's temporary file exists: the upload is on
	// its way.
	poll(t, 30*time.Second, func() error {
		if out := cpSh(t, s, shLsA+" /opt/workspace"); !strings.Contains(out, ".sandbox-cp-put-") {
			return fmt.Errorf("no upload in progress yet: %q", out)
		}
		return nil
	})
	cmd.Process.Kill()
	cmd.Wait()
	stdin.Close()
	poll(t, 30*time.Second, func() error {
		if out := cpSh(t, s, shLsA+" /opt/workspace"); out != "f.txt\n" {
			return fmt.Errorf("the workspace holds %q", out)
		}
		return nil
	})
	wantStdout(t, sb(t, "files", "cat", s+":f.txt"), "old")
}

// TestCpHostileSymlinks: links planted by the sandbox that lead outside, at
// any depth of the path a command names, are refused (path_escape) and never
// followed, in both directions and by every files command; nothing is read
// from outside the workspace and nothing is written outside the
// destination. (A link out inside a copied folder is skipped: see
// TestCpLinksLeadingOut.)
func TestCpHostileSymlinks(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	cpSh(t, s, `ln -s /etc out && ln -s ../../.. out2 && mkdir -p folder deep/a && echo ok > folder/ok &&
		ln -s /root folder/link && ln -s /tmp tmpl && ln -s /tmp deep/a/tmpl`)
	host := t.TempDir()
	canary := newCpCanary(t)
	for i, src := range []string{"out/passwd", "out2", "out2/etc/passwd", "out", "deep/a/tmpl/x", "/opt/workspace/out/hostname", "folder/link", "folder/link/x"} {
		dst := filepath.Join(host, fmt.Sprintf("dst%d", i))
		cpWantErr(t, sb(t, "cp", "--format", "json", s+":"+src, dst), "path_escape")
		cpMissing(t, dst)
	}
	// With --strict, the folder that holds a link to /root is refused too.
	cpWantErr(t, sb(t, "cp", "--strict", "--format", "json", s+":folder", filepath.Join(host, "strict")), "path_escape")
	cpMissing(t, "/root/x")
	cpMissing(t, "/root/ok")
	if got := cpHostTree(t, host); len(got) != 0 {
		t.Fatalf("refused copies left %q on the host", got)
	}
	// Writes into the sandbox through links to /tmp (writable there) are
	// refused too, at any depth.
	cpWriteHost(t, filepath.Join(host, "payload.txt"), "P", 0o644)
	for _, dst := range []string{"tmpl/", "tmpl/p.txt", "deep/a/tmpl/", "/opt/workspace/deep/a/tmpl/p.txt"} {
		cpWantErr(t, sb(t, "cp", "--format", "json", filepath.Join(host, "payload.txt"), s+":"+dst), "path_escape")
	}
	for _, args := range [][]string{
		{"files", "cat", s + ":out/passwd"}, {"files", "ls", s + ":out"}, {"files", "ls", "-r", s + ":out2"},
		{"files", "cat", s + ":deep/a/tmpl/x"}, {"files", "rm", s + ":tmpl/x"}, {"files", "rm", "-r", s + ":deep/a/tmpl/x"},
	} {
		cpWantErr(t, sb(t, append(args, "--format", "json")...), "path_escape")
	}
	for _, dst := range []string{"tmpl/evil", "deep/a/tmpl/evil", "out2/tmp/evil"} {
		cpWantErr(t, sbIn(t, "evil", "files", "put", "--format", "json", s+":"+dst), "path_escape")
	}
	if got := cpSh(t, s, cpTmpList); got != "" {
		t.Fatalf("writes went through a link to /tmp: %q", got)
	}
	canary.intact(t)
	// Without --strict the folder copies, without its link to /root.
	execMustPass(t, "cp", s+":folder", filepath.Join(host, "ok"))
	if diff := cmp.Diff([]string{"ok/ 0755", "ok/ok=ok\n 0644", "payload.txt=P 0644"}, cpHostTree(t, host)); diff != "" {
		t.Errorf("host (-want +got):\n%s", diff)
	}
}

// TestCpHostilePaths: paths outside /opt/workspace and /opt/user are
// refused before anything runs in the sandbox.
func TestCpHostilePaths(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	host := t.TempDir()
	for _, p := range []string{"../../etc/passwd", "/etc/passwd", "/proc/self/environ", "/opt/sandbox/sandbox-helper", "/opt/workspace/../../etc/shadow", "/opt/workspacex"} {
		dst := filepath.Join(host, "dst")
		cpWantErr(t, sb(t, "cp", "--format", "json", s+":"+p, dst), "path_escape")
		cpMissing(t, dst)
		cpWantErr(t, sb(t, "files", "cat", "--format", "json", s+":"+p), "path_escape")
		cpWantErr(t, sbIn(t, "x", "files", "put", "--format", "json", s+":"+p), "path_escape")
	}
	// (A NUL byte cannot travel in a command's arguments; the path rules'
	// unit and fuzz tests cover it.)
	if c, v := objects(t, s); c != 0 || v != 0 {
		t.Fatalf("refused paths created %d containers and %d volumes", c, v)
	}
}

// TestCpHostileTarIn: a host tar fed to `cp - SCOPE:dir` with entries that
// escape, link out, are devices or setuid: the escapes are refused and
// leave nothing; devices are skipped and reported; setuid bits removed.
func TestCpHostileTarIn(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	cpSh(t, s, "mkdir -p box/dir")
	f := func(name, body string, mode int64) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Linkname: body}
	}
	for name, data := range map[string][]byte{
		"dotdot":                   cpTar(t, f("ok.txt", "ok", 0o644), f("../evil", "E", 0o644)),
		"deep dotdot":              cpTar(t, f("a/../../../evil", "E", 0o644)),
		"absolute":                 cpTar(t, f("ok.txt", "ok", 0o644), f("/opt/workspace/box/evil", "E", 0o644)),
		"hard link to /etc/shadow": cpTar(t, f("ok.txt", "ok", 0o644), &tar.Header{Name: "shadow", Typeflag: tar.TypeLink, Linkname: "/etc/shadow"}),
		"symlink out then through": cpTar(t, &tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/tmp"}, f("l/evil", "E", 0o644)),
	} {
		r := sbRun(t, run{args: []string{"cp", "--format", "json", "-", s + ":box/dir"}, stdin: bytes.NewReader(data)})
		cpWantErr(t, r, "path_escape")
		if got := cpSh(t, s, "find /opt/workspace /tmp -mindepth 1 -not -path '/tmp/.sandbox-code-*' -not -path '/tmp/.sandbox-helper.*' | sort"); got != "/opt/workspace/box\n/opt/workspace/box/dir\n" {
			t.Fatalf("%s: the refused copy left:\n%s", name, got)
		}
	}
	data := cpTar(t, &tar.Header{Name: "tty", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 5},
		&tar.Header{Name: "fifo", Typeflag: tar.TypeFifo, Mode: 0o644},
		f("su", "#!/bin/sh", 0o4755), f("sg", "G", 0o2755), f("plain.txt", "P", 0o644))
	r := sbRun(t, run{args: []string{"cp", "--format", "json", "-", s + ":box/dir"}, stdin: bytes.NewReader(data)})
	j := cpDecode(t, r)
	if j.SkippedCount != 2 || len(j.Skipped) != 2 || j.Skipped[0].Type != "char-device" || j.Skipped[1].Type != "fifo" || j.StrippedCount != 2 || j.Files != 3 {
		t.Errorf("result: %+v", j)
	}
	r = sbRun(t, run{args: []string{"cp", "-", s + ":box/dir"}, stdin: bytes.NewReader(data)})
	wantCode(t, r, 0)
	for _, w := range []string{"skipped tty (char-device)", "skipped fifo (fifo)", "setuid/setgid/sticky bits of su"} {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.Stderr)
		}
	}
	if got := cpSh(t, s, `cd box/dir && for f in *; do printf '%s %s %s\n' "$f" "$(stat -c %F "$f")" "$(stat -c %a "$f")"; done`); got != "plain.txt regular file 644\nsg regular file 755\nsu regular file 755\n" {
		t.Errorf("in the sandbox:\n%s", got)
	}
}

// TestCpHostilePreexistingLink: the host destination already holds
// dest/sub -> (outside); copying a folder with sub/file into dest never
// writes through it, and leaves dest as it was.
func TestCpHostilePreexistingLink(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	cpSh(t, s, "mkdir -p folder/sub && echo E > folder/sub/file && echo K > folder/keep")
	canary := newCpCanary(t)
	dest := filepath.Join(t.TempDir(), "dest")
	os.Mkdir(dest, 0o755)
	if err := os.Symlink(canary.dir, filepath.Join(dest, "sub")); err != nil {
		t.Fatal(err)
	}
	cpWantErr(t, sb(t, "cp", "--format", "json", s+":folder/.", dest), "path_escape")
	canary.intact(t)
	if diff := cmp.Diff([]string{"sub -> " + canary.dir}, cpHostTree(t, dest)); diff != "" {
		t.Errorf("dest changed (-want +got):\n%s", diff)
	}
	// The same folder copied under its own name is fine.
	execMustPass(t, "cp", s+":folder", dest)
	canary.intact(t)
	if diff := cmp.Diff([]string{"folder/ 0755", "folder/keep=K\n 0644", "folder/sub/ 0755", "folder/sub/file=E\n 0644", "sub -> " + canary.dir}, cpHostTree(t, dest)); diff != "" {
		t.Errorf("dest (-want +got):\n%s", diff)
	}
}

// TestCpHostileSize: a sparse 100 GiB file in the sandbox, copied out with
// the default cap, stops at once (too_large) and leaves nothing; so do the
// configured caps, in both directions.
func TestCpHostileSize(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	cpSh(t, s, "truncate -s 100G big && mkdir many && cd many && for i in 1 2 3 4 5; do echo $i > f$i; done && head -c 3000000 /dev/zero > ../mid")
	host := t.TempDir()
	start := time.Now()
	cpWantErr(t, sb(t, "cp", "--format", "json", s+":big", filepath.Join(host, "big")), "too_large")
	t.Logf("the 100 GiB copy stopped after %v", time.Since(start))
	if r := sb(t, "cp", s+":big", "-"); r.Code != 125 || !strings.Contains(r.Stderr, "--max-size") || len(r.Stdout) > 0 {
		t.Fatalf("cp of the 100 GiB file to stdout:\n%s", r)
	}
	cpWantErr(t, sb(t, "cp", "--format", "json", "--max-size", "1m", s+":mid", filepath.Join(host, "mid")), "too_large")
	cpWantErr(t, sb(t, "cp", "--format", "json", "--max-file-size", "1m", s+":mid", filepath.Join(host, "mid")), "too_large")
	cpWantErr(t, sb(t, "cp", "--format", "json", "--max-entries", "3", s+":many", filepath.Join(host, "many")), "too_large")
	cpWantErr(t, sb(t, "cp", "--format", "json", "--max-size", "1m", s+":mid", s+"/other:mid"), "too_large")
	if got := cpHostTree(t, host); len(got) != 0 {
		t.Fatalf("capped copies left %q", got)
	}
	// Into the sandbox: a sparse 3 GiB host file with the default cap.
	sparse := filepath.Join(host, "sparse")
	fh, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	fh.Truncate(3 << 30)
	fh.Close()
	cpWantErr(t, sb(t, "cp", "--format", "json", sparse, s+":sparse"), "too_large")
	cpWantErr(t, sb(t, "cp", "--format", "json", "--max-entries", "3", s+":many", s+":many2"), "too_large")
	if got := cpSh(t, s, "ls -A /opt/workspace"); got != "big\nmany\nmid\n" {
		t.Fatalf("capped copies into the sandbox left: %q", got)
	}
	cpWantErr(t, sb(t, "cp", "--format", "json", "--max-size", "lots", s+":mid", host), "bad_flag")

	// The caps from the configuration (copy_max_size and the others, here
	// in their environment form); a flag given on the call wins.
	cfgHost := t.TempDir()
	env := []string{"DOCKER_SANDBOX_COPY_MAX_SIZE=1m", "DOCKER_SANDBOX_COPY_MAX_ENTRIES=3"}
	r := sbRun(t, run{args: []string{"cp", "--format", "json", s + ":mid", filepath.Join(cfgHost, "mid")}, env: env})
	cpWantErr(t, r, "too_large")
	if !strings.Contains(r.Stdout, "copy_max_size") {
		t.Errorf("the error does not name the setting:\n%s", r)
	}
	cpWantErr(t, sbRun(t, run{args: []string{"cp", "--format", "json", s + ":many", filepath.Join(cfgHost, "many")}, env: env}), "too_large")
	cpWantErr(t, sbRun(t, run{args: []string{"cp", "--format", "json", sparse, s + ":sparse"}, env: env}), "too_large")
	if got := cpHostTree(t, cfgHost); len(got) != 0 {
		t.Fatalf("copies capped by the configuration left %q", got)
	}
	wantCode(t, sbRun(t, run{args: []string{"cp", "--max-size", "4m", s + ":mid", filepath.Join(cfgHost, "mid")}, env: env}), 0)
	if fi, err := os.Stat(filepath.Join(cfgHost, "mid")); err != nil || fi.Size() != 3000000 {
		t.Fatalf("with --max-size over copy_max_size: %v", err)
	}
	r = sbRun(t, run{args: []string{"cp", "--format", "json", s + ":mid", filepath.Join(cfgHost, "x")}, env: []string{"DOCKER_SANDBOX_COPY_MAX_SIZE=lots"}})
	wantCode(t, r, 125)
	if !strings.Contains(r.Stdout+r.Stderr, "DOCKER_SANDBOX_COPY_MAX_SIZE") {
		t.Errorf("a bad copy_max_size does not name its source:\n%s", r)
	}
	cpMissing(t, filepath.Join(cfgHost, "x"))
}

// TestCpSymlinkSwapRace: while cp runs, the sandbox exchanges a folder and
// a symbolic link to / (renameat2 RENAME_EXCHANGE, the docker cp race of
// CVE-2018-15664) in a tight loop, at the top of the copied path and inside
// the copied tree. Nothing outside the workspace is ever read (the
// container's /etc/hostname and / entries never appear in a copy), and
// nothing is written outside the destination: not on the host, and not in
// the sandbox's /tmp through a link to it. It counts the copies that saw the
// swap and fails when none did; the exact worst moment (between listing an
// entry and opening it) is hit deterministically, through a hook, by
// files/tarsafe's TestCreateSwapAtTheWorstMoment.
func TestCpSymlinkSwapRace(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	hostname := strings.TrimSpace(cpSh(t, s, `mkdir -p d/sub t/sub w/in && echo inside > d/inside.txt && echo deep > d/sub/deep.txt &&
		echo tree > t/sub/leaf.txt && ln -s / l && ln -s / t/l && ln -s /tmp wl && cat /etc/hostname`))
	if hostname == "" {
		t.Fatal("no hostname")
	}
	stop, bgOut := cpSwapper(t, s, `[(b'd', b'l'), (b't/sub', b't/l'), (b'w', b'wl')]`)

	host := t.TempDir()
	canary := newCpCanary(t)
	known := map[string]bool{"inside.txt": true, "sub": true, "sub/deep.txt": true, "deep.txt": true, "leaf.txt": true,
		"t": true, "t/sub": true, "t/sub/leaf.txt": true, "t/l": true, "t/l/leaf.txt": true}
	checkFile := func(src, rel string, body []byte) {
		if !known[filepath.ToSlash(rel)] {
			t.Errorf("cp %s copied %s, which is not in the workspace", src, rel)
		}
		if strings.Contains(string(body), hostname) {
			t.Errorf("cp %s copied the container's /etc/hostname as %s", src, rel)
		}
	}
	// The race is hit when a copy observes the swapped state (it is
	// refused, or streams t/sub as the link to /), and hit in the middle
	// of a walk when the helper saw an entry change between listing it and
	// opening it ("while the copy ran"). At least 6 rounds, more (up to 20)
	// until it was hit; never hit is a failure: the test proved nothing.
	ok, refused, hits, midWalk := 0, 0, 0, 0
	rounds := 0
	for i := 0; i < 20 && (i < 6 || hits == 0); i++ {
		rounds++
		// The swapped folder at the top of the path (d), inside it
		// (t/sub), and a path through it.
		for j, src := range []string{"d", "d/.", "d/sub/deep.txt", "t/sub/."} {
			dst := filepath.Join(host, fmt.Sprintf("run%d-%d", i, j))
			r := sb(t, "cp", "--format", "json", s+":"+src, dst)
			if r.Code != 0 {
				if c := decodeErr(t, r).Error.Code; c != "path_escape" && c != "file_not_found" && c != "not_directory" {
					t.Fatalf("cp %s: unexpected error:\n%s", src, r)
				}
				cpMissing(t, dst)
				refused++
				hits++
				if strings.Contains(r.Stdout, "while the copy ran") {
					midWalk++
				}
				continue
			}
			ok++
			if strings.Contains(r.Stdout, "while the copy ran") {
				hits++
				midWalk++
			}
			filepath.Walk(dst, func(p string, fi os.FileInfo, err error) error {
				if err != nil || p == dst {
					return nil
				}
				rel, _ := filepath.Rel(dst, p)
				var body []byte
				if fi.Mode().IsRegular() {
					body, _ = os.ReadFile(p)
				}
				checkFile(src, rel, body)
				if fi.Mode()&os.ModeSymlink != 0 {
					if target, _ := os.Readlink(p); filepath.IsAbs(target) {
						t.Errorf("cp %s wrote a link to %s", src, target)
					}
				}
				return nil
			})
		}
		// The whole tree while its folder is swapped: read the raw
		// stream (its link to /, t/l or t/sub, is left out), and check
		// that nothing in it came from outside.
		r := sb(t, "cp", s+":t", "-")
		switch {
		case strings.Contains(r.Stderr, "while the copy ran"):
			hits++
			midWalk++
		case r.Code != 0 || strings.Contains(r.Stderr, "skipped t/sub "):
			hits++
		}
		tr := tar.NewReader(strings.NewReader(r.Stdout))
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			body, _ := io.ReadAll(tr)
			checkFile("t -", strings.TrimSuffix(h.Name, "/"), body)
		}
		// Into the sandbox, through the folder that is swapped with a
		// link to /tmp.
		cpWriteHost(t, filepath.Join(host, "in", "payload.txt"), "P", 0o644)
		r = sb(t, "cp", "--format", "json", filepath.Join(host, "in"), s+":w/in/")
		if r.Code != 0 {
			if c := decodeErr(t, r).Error.Code; c != "path_escape" && c != "file_not_found" && c != "not_directory" {
				t.Fatalf("cp into the sandbox: unexpected error:\n%s", r)
			}
			hits++
		}
	}
	stop()
	t.Logf("%d rounds: %d copies out complete, %d refused; the race was hit %d times, %d of them in the middle of a walk; swapper: %s",
		rounds, ok, refused, hits, midWalk, strings.TrimSpace(bgOut.String()))
	if hits == 0 {
		t.Fatalf("in %d rounds no copy ever saw the swapped state: the race was never hit", rounds)
	}
	if !strings.Contains(bgOut.String(), "swapping") || strings.Contains(bgOut.String(), "errno") {
		t.Fatalf("the swapper did not run: %s", bgOut.String())
	}
	if got := cpSh(t, s, cpTmpList); got != "" {
		t.Fatalf("a copy wrote into /tmp through the swapped link: %q", got)
	}
	canary.intact(t)
	ents, _ := os.ReadDir(host)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "run") && e.Name() != "in" {
			t.Errorf("unexpected %s next to the destinations", e.Name())
		}
	}
}

// cpSwapper starts a program in the scope's sandbox that exchanges each
// pair of paths (a Python list of byte-string pairs, relative to
// /opt/workspace) with renameat2(RENAME_EXCHANGE) in a tight loop, and
// waits until it runs. stop ends it (also at the test's end); the output
// is "swapping", then the number of rounds.
func cpSwapper(t *testing.T, s, pairs string) (stop func(), out *cpSyncBuffer) {
	t.Helper()
	swapper := `
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
AT, EXCHANGE = -100, 2
os.chdir('/opt/workspace')
os.nice(10)  # a tight loop, but let the copies run on a small machine
pairs = ` + pairs + `
n = 0
print('swapping', flush=True)
while not os.path.exists('stop'):
    for a, b in pairs:
        if libc.renameat2(AT, a, AT, b, EXCHANGE) != 0:
            if ctypes.get_errno() != 22:
                sys.exit('renameat2: errno %d' % ctypes.get_errno())
            # gVisor (runsc 2022-12) has no RENAME_EXCHANGE: three renames.
            os.rename(a, b'.swap'); os.rename(b, a); os.rename(b'.swap', b)
    n += 1
print(n)
`
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	bg := osexec.CommandContext(ctx, pluginBin, "exec", "-s", s, "--timeout", "110s", "--lang", "python", "-c", swapper)
	out = &cpSyncBuffer{}
	bg.Stdout, bg.Stderr = out, out
	if err := bg.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		sbIn(t, "", "files", "put", s+":stop")
		bg.Wait()
		cancel()
	}
	t.Cleanup(stop)
	poll(t, 30*time.Second, func() error {
		if !strings.Contains(out.String(), "swapping") {
			return fmt.Errorf("the swapper has not started: %q", out.String())
		}
		return nil
	})
	return stop, out
}

// cpSyncBuffer is a buffer a process writes while the test reads it.
type cpSyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *cpSyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *cpSyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// cpRunRSS runs the standalone plugin and returns its result and peak
// resident memory, sampled from /proc/PID/status (VmHWM) while it runs.
// (The rusage of a child started by Go counts the parent's memory: Go
// starts children with vfork, and the kernel charges the parent's high
// water mark to the child at exec.)
func cpRunRSS(t *testing.T, args ...string) (result, int64) {
	t.Helper()
	cmd := osexec.Command(pluginBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	peak := make(chan int64)
	go func() {
		var max int64
		status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
		for {
			if b, err := os.ReadFile(status); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					var kb int64
					if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil && kb<<10 > max {
						max = kb << 10
					}
				}
			}
			select {
			case <-done:
				peak <- max
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	rss := <-peak
	r := result{Stdout: stdout.String(), Stderr: stderr.String()}
	if ee, ok := err.(*osexec.ExitError); ok {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r, rss
}

const cpStreamSize = 256 << 20

func TestCpStreaming(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	host := t.TempDir()
	big := filepath.Join(host, "big")
	fh, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteAt([]byte("head"), 0)
	fh.WriteAt([]byte("tail"), cpStreamSize-4)
	fh.Close()
	cpSh(t, s, "true") // the sandbox exists: measure the copy, not the creation
	r, rssIn := cpRunRSS(t, "cp", big, s+":big")
	wantCode(t, r, 0)
	r, rssOut := cpRunRSS(t, "cp", s+":big", filepath.Join(host, "back"))
	wantCode(t, r, 0)
	fi, err := os.Stat(filepath.Join(host, "back"))
	if err != nil || fi.Size() != cpStreamSize {
		t.Fatalf("copied back: %v %v", fi, err)
	}
	fb, _ := os.Open(filepath.Join(host, "back"))
	tail := make([]byte, 4)
	fb.ReadAt(tail, cpStreamSize-4)
	fb.Close()
	if string(tail) != "tail" {
		t.Fatalf("the copy's last bytes: %q", tail)
	}
	t.Logf("peak RSS of the plugin: in %d MiB, out %d MiB", rssIn>>20, rssOut>>20)
	for _, rss := range []int64{rssIn, rssOut} {
		if rss == 0 || rss > 64<<20 {
			t.Errorf("peak RSS %d MiB, want under 64 MiB", rss>>20)
		}
	}
}

// TestCpInterrupted: Ctrl-C during a copy out stops it with exit 130 and
// leaves nothing of it on the host (not even its staging file); in, it
// leaves nothing in the sandbox.
func TestCpInterrupted(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	cpSh(t, s, "head -c 400000000 /dev/zero > big")
	host := t.TempDir()
	for _, args := range [][]string{{"cp", s + ":big", filepath.Join(host, "big")}, {"cp", filepath.Join(host, "src"), s + ":copy"}} {
		if args[1] != s+":big" {
			cpWriteHost(t, filepath.Join(host, "src", "a"), strings.Repeat("x", 1<<20), 0o644)
			fh, _ := os.Create(filepath.Join(host, "src", "zeros"))
			fh.Truncate(1 << 30)
			fh.Close()
		}
		cmd := osexec.Command(pluginBin, args...)
		// Out through the helper's stream: the local route (copy_local)
		// reads 400 MB before a poll sees it; its Ctrl-C is
		// TestReadLocalCanceled's.
		cmd.Env = append(os.Environ(), "DOCKER_SANDBOX_COPY_LOCAL=false")
		var stderr cpSyncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until the copy is on its way (its staging entry exists).
		poll(t, 60*time.Second, func() error {
			var where string
			if args[1] == s+":big" {
				ents, _ := os.ReadDir(host)
				for _, e := range ents {
					where += e.Name() + " "
				}
			} else {
				where = sb(t, "exec", "-s", s, "-c", "ls -A /opt/workspace").Stdout
			}
			if !strings.Contains(where, ".sandbox-cp-") {
				return fmt.Errorf("no copy in progress yet: %q", where)
			}
			return nil
		})
		cmd.Process.Signal(os.Interrupt)
		err := cmd.Wait()
		if ee, ok := err.(*osexec.ExitError); !ok || ee.ExitCode() != 130 {
			t.Fatalf("%v after Ctrl-C: %v, want exit 130\n%s", args, err, stderr.String())
		}
		if args[1] == s+":big" {
			if got := cpHostTree(t, host); len(got) != 0 {
				t.Fatalf("the interrupted copy left %q on the host", got)
			}
			continue
		}
		poll(t, 30*time.Second, func() error {
			if got := sb(t, "exec", "-s", s, "-c", "ls -A /opt/workspace").Stdout; got != "big\n" {
				return fmt.Errorf("the interrupted copy left %q in the sandbox", got)
			}
			return nil
		})
	}
}

// cpHostLinks maps every symbolic link below root to its target, and fails
// when one resolves to somewhere outside root.
func cpHostLinks(t *testing.T, root string) map[string]string {
	t.Helper()
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]string{}
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		target, _ := os.Readlink(p)
		links[rel] = target
		if r, err := filepath.EvalSymlinks(p); err == nil && r != real && !strings.HasPrefix(r, real+string(filepath.Separator)) {
			t.Errorf("%s -> %s leads outside %s, to %s", rel, target, root, r)
		}
		return nil
	})
	return links
}

// cpHostFiles lists the folders and files (with their sizes) below root.
func cpHostFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case fi.IsDir():
			out = append(out, rel+"/")
		case fi.Mode().IsRegular():
			out = append(out, fmt.Sprintf("%s %d", rel, fi.Size()))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// cpDirNames lists the names in a host folder.
func cpDirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestCpLinksLeadingOut: a real Python virtualenv, with more links planted
// next to its own (absolute, to /etc and /proc, climbing out with "..",
// dangling inside and outside, chains), copied out of the sandbox: the copy
// completes; links that stay inside the copied tree are written as they
// are; each link that leads outside is not written and is reported (one
// JSON skipped entry with its target, one stderr line in text mode);
// nothing outside the destination is created or changed; --strict refuses
// and leaves nothing. The same rule holds into an existing folder, for a
// folder's contents, to another sandbox, for "-" and from the host into a
// sandbox.
func TestCpLinksLeadingOut(t *testing.T) {
	needE2E(t)
	s, s2 := newScope(t), newScope(t)
	minor := strings.TrimSpace(cpSh(t, s, `python3 -m venv --without-pip venv && cd venv &&
		ln -s /etc etc && ln -s /proc/self/environ environ && ln -s ../../../etc/passwd lib/escape &&
		ln -s ../bin lib/site && ln -s nothing-here dangling && ln -s ../nothing dangling-out &&
		ln -s bin/python3 chain && ln -s lib/escape chain-out && ln -s lib/site/../../x dotdot-after-name &&
		python3 -c 'import sys; print(sys.version_info[1])'`))
	py := "python3." + minor
	// Hand-written: what stays (a venv's own relative links, and ours) and
	// what leads out. (Python 3.11's venv, in the runtime image: bin/python3
	// -> /usr/bin/python3, python and python3.11 -> python3, lib64 -> lib.)
	wantLinks := map[string]string{
		"bin/python": "python3", "bin/" + py: "python3", "lib64": "lib", "lib/site": "../bin",
		"dangling": "nothing-here", "chain": "bin/python3", "chain-out": "lib/escape",
	}
	wantSkipped := []string{
		"venv/bin/python3 -> /usr/bin/python3", "venv/dangling-out -> ../nothing", "venv/dotdot-after-name -> lib/site/../../x",
		"venv/environ -> /proc/self/environ", "venv/etc -> /etc", "venv/lib/escape -> ../../../etc/passwd",
	}
	// The files and folders, as the sandbox sees them.
	var wantFiles []string
	for _, l := range strings.Split(strings.TrimSpace(cpSh(t, s, `cd venv && find . -mindepth 1 \( -type d -printf '%P/\n' \) -o \( -type f -printf '%P %s\n' \)`)), "\n") {
		wantFiles = append(wantFiles, l)
	}
	sort.Strings(wantFiles)
	if len(wantFiles) < 4 || !cpContains(wantFiles, "bin/") || !cpContains(wantFiles, "lib/") {
		t.Fatalf("the venv: %q", wantFiles)
	}
	skippedOf := func(j cpJSON) []string {
		var out []string
		for _, sk := range j.Skipped {
			if sk.Type != "symlink" || sk.Reason == "" {
				t.Errorf("skipped entry %+v", sk)
			}
			out = append(out, sk.Name+" -> "+sk.LinkTarget)
		}
		if j.SkippedCount != int64(len(out)) {
			t.Errorf("skipped_count %d, %d listed", j.SkippedCount, len(out))
		}
		sort.Strings(out)
		return out
	}
	checkTree := func(what, root string) {
		t.Helper()
		if diff := cmp.Diff(wantLinks, cpHostLinks(t, root)); diff != "" {
			t.Errorf("%s: links (-want +got):\n%s", what, diff)
		}
		if diff := cmp.Diff(wantFiles, cpHostFiles(t, root)); diff != "" {
			t.Errorf("%s: files and folders (-want +got):\n%s", what, diff)
		}
	}
	canary := newCpCanary(t)
	host := t.TempDir()

	// To a new folder, with JSON.
	j := cpDecode(t, sb(t, "cp", "--format", "json", s+":venv", filepath.Join(host, "dst")))
	checkTree("cp venv dst", filepath.Join(host, "dst"))
	if diff := cmp.Diff(wantSkipped, skippedOf(j)); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if j.Symlinks != int64(len(wantLinks)) {
		t.Errorf("symlinks %d, want %d", j.Symlinks, len(wantLinks))
	}
	if diff := cmp.Diff([]string{"dst"}, cpDirNames(t, host)); diff != "" {
		t.Errorf("next to the destination (-want +got):\n%s", diff)
	}
	// In text mode: one line on stderr per link left out, and nothing else.
	r := sb(t, "cp", s+":venv", filepath.Join(host, "text"))
	wantCode(t, r, 0)
	lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
	if len(lines) != len(wantSkipped) {
		t.Errorf("stderr has %d lines, want %d:\n%s", len(lines), len(wantSkipped), r.Stderr)
	}
	for _, w := range wantSkipped {
		name, target, _ := strings.Cut(w, " -> ")
		if !strings.Contains(r.Stderr, "docker sandbox: skipped "+name+" (symlink -> "+target+"): ") {
			t.Errorf("stderr lacks the line of %s:\n%s", w, r.Stderr)
		}
	}
	checkTree("cp venv text", filepath.Join(host, "text"))
	// Into an existing folder, and a folder's contents into one: what was
	// there stays.
	cpWriteHost(t, filepath.Join(host, "into", "mine"), "M", 0o644)
	cpWriteHost(t, filepath.Join(host, "contents", "mine"), "M", 0o644)
	j = cpDecode(t, sb(t, "cp", "--format", "json", s+":venv", filepath.Join(host, "into")))
	checkTree("cp venv into", filepath.Join(host, "into", "venv"))
	if diff := cmp.Diff(wantSkipped, skippedOf(j)); diff != "" {
		t.Errorf("into: skipped (-want +got):\n%s", diff)
	}
	// The contents land in a folder that was there: the venv's own links
	// at its top are left out too (a later copy could write through
	// them); those in its folders, which the copy creates, stay.
	j = cpDecode(t, sb(t, "cp", "--format", "json", s+":venv/.", filepath.Join(host, "contents")))
	os.Remove(filepath.Join(host, "contents", "mine"))
	if diff := cmp.Diff(map[string]string{"bin/python": "python3", "bin/" + py: "python3", "lib/site": "../bin"}, cpHostLinks(t, filepath.Join(host, "contents"))); diff != "" {
		t.Errorf("contents: links (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantFiles, cpHostFiles(t, filepath.Join(host, "contents"))); diff != "" {
		t.Errorf("contents: files and folders (-want +got):\n%s", diff)
	}
	wantTop := append([]string{"venv/chain -> bin/python3", "venv/chain-out -> lib/escape", "venv/dangling -> nothing-here", "venv/lib64 -> lib"}, wantSkipped...)
	sort.Strings(wantTop)
	if diff := cmp.Diff(wantTop, skippedOf(j)); diff != "" {
		t.Errorf("contents: skipped (-want +got):\n%s", diff)
	}
	if got, _ := os.ReadFile(filepath.Join(host, "into", "mine")); string(got) != "M" {
		t.Errorf("into/mine: %q", got)
	}
	// --strict: refused, nothing left, in each shape.
	before := cpHostTree(t, host)
	for _, dst := range []string{filepath.Join(host, "strict"), filepath.Join(host, "into"), filepath.Join(host, "into") + "/"} {
		cpWantErr(t, sb(t, "cp", "--strict", "--format", "json", s+":venv", dst), "path_escape")
		cpWantErr(t, sb(t, "cp", "--strict", "--format", "json", s+":venv/.", dst), "path_escape")
	}
	if diff := cmp.Diff(before, cpHostTree(t, host)); diff != "" {
		t.Errorf("--strict changed the host (-before +after):\n%s", diff)
	}
	canary.intact(t)

	// To another sandbox.
	j = cpDecode(t, sb(t, "cp", "--format", "json", s+":venv", s2+":/opt/user/v"))
	if diff := cmp.Diff(wantSkipped, skippedOf(j)); diff != "" {
		t.Errorf("sandbox to sandbox: skipped (-want +got):\n%s", diff)
	}
	var gotLinks []string
	for _, l := range strings.Split(strings.TrimSpace(cpSh(t, s2, `cd /opt/user/v && find . -type l -printf '%P -> %l\n'`)), "\n") {
		gotLinks = append(gotLinks, l)
	}
	sort.Strings(gotLinks)
	var want []string
	for k, v := range wantLinks {
		want = append(want, k+" -> "+v)
	}
	sort.Strings(want)
	if diff := cmp.Diff(want, gotLinks); diff != "" {
		t.Errorf("sandbox to sandbox: links (-want +got):\n%s", diff)
	}
	cpWantErr(t, sb(t, "cp", "--strict", "--format", "json", s+":venv", s2+":/opt/user/strict"), "path_escape")
	if got := cpSh(t, s2, "ls -A /opt/user"); got != "v\n" {
		t.Errorf("after a refused --strict copy, /opt/user holds %q", got)
	}

	// To "-": the stream leaves them out, and says so on stderr.
	r = sb(t, "cp", s+":venv", "-")
	wantCode(t, r, 0)
	streamed := map[string]string{}
	tr := tar.NewReader(strings.NewReader(r.Stdout))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("cp venv - wrote a bad stream: %v", err)
		}
		if h.Typeflag == tar.TypeSymlink {
			streamed[strings.TrimPrefix(h.Name, "venv/")] = h.Linkname
		}
	}
	if diff := cmp.Diff(wantLinks, streamed); diff != "" {
		t.Errorf("cp venv -: links in the stream (-want +got):\n%s", diff)
	}
	if n := strings.Count(r.Stderr, "docker sandbox: skipped "); n != len(wantSkipped) {
		t.Errorf("cp venv -: %d skipped lines, want %d:\n%s", n, len(wantSkipped), r.Stderr)
	}
	if r := sb(t, "cp", "--strict", s+":venv", "-"); r.Code != 125 || !strings.Contains(r.Stderr, "--strict") {
		t.Errorf("cp --strict venv -:\n%s", r)
	}

	// From the host into a sandbox: the same rule.
	hv := filepath.Join(t.TempDir(), "hv")
	cpWriteHost(t, filepath.Join(hv, "bin", "activate"), "A", 0o644)
	for target, name := range map[string]string{"/usr/bin/python3": "bin/python", "python": "bin/python3", "../../etc": "bin/etc", "bin": "scripts"} {
		if err := os.Symlink(target, filepath.Join(hv, name)); err != nil {
			t.Fatal(err)
		}
	}
	j = cpDecode(t, sb(t, "cp", "--format", "json", hv, s2+":hv"))
	if diff := cmp.Diff([]string{"hv/bin/etc -> ../../etc", "hv/bin/python -> /usr/bin/python3"}, skippedOf(j)); diff != "" {
		t.Errorf("host to sandbox: skipped (-want +got):\n%s", diff)
	}
	if got := cpSh(t, s2, `cd hv && find . -type l -printf '%P -> %l\n' | sort`); got != "bin/python3 -> python\nscripts -> bin\n" {
		t.Errorf("host to sandbox: links %q", got)
	}
	cpWantErr(t, sb(t, "cp", "--strict", "--format", "json", hv, s2+":hvs"), "path_escape")
	if got := cpSh(t, s2, "ls -A /opt/workspace"); got != "hv\nv\n" {
		t.Errorf("after a refused --strict copy, the workspace holds %q", got)
	}
	canary.intact(t)
}

// TestCpLinksWhereTheyLand: a copy out plants dst/sub -> . (a link that
// stays inside a folder the copy creates, written as a link); a second copy
// of a folder's contents into dst would go through dst/sub (sub/l -> ../x
// would land as dst/l -> ../x, outside dst): the copy is refused, as
// nothing is written through a link on the host (--strict or not), and the
// file next to dst it would reach is untouched. Into a new folder the same
// contents keep their links that stay inside, the others left out.
func TestCpLinksWhereTheyLand(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	cpSh(t, s, `mkdir -p one two/sub/new && ln -s . one/sub && echo F > two/sub/f && ln -s ../x two/sub/l &&
		ln -s ../../x two/sub/new/l2 && ln -s f two/sub/ok`)
	host := t.TempDir()
	dst := filepath.Join(host, "dst")
	cpWriteHost(t, filepath.Join(host, "x"), "next to the destination", 0o600)
	execMustPass(t, "cp", s+":one", dst)
	if diff := cmp.Diff(map[string]string{"sub": "."}, cpHostLinks(t, dst)); diff != "" {
		t.Fatalf("the first copy (-want +got):\n%s", diff)
	}
	cpWantErr(t, sb(t, "cp", "--strict", "--format", "json", s+":two/.", dst), "path_escape")
	cpWantErr(t, sb(t, "cp", "--format", "json", s+":two/.", dst), "path_escape")
	if diff := cmp.Diff(map[string]string{"sub": "."}, cpHostLinks(t, dst)); diff != "" {
		t.Errorf("links in dst after the refused copies (-want +got):\n%s", diff)
	}
	// Into a new folder: its links stay inside it (sub/l -> ../x is
	// dst2/x, which the copy does not make), none reaches the file x.
	dst2 := filepath.Join(host, "dst2")
	j := cpDecode(t, sb(t, "cp", "--format", "json", s+":two/.", dst2))
	if j.SkippedCount != 0 || j.Symlinks != 3 {
		t.Errorf("into a new folder: %+v", j)
	}
	if diff := cmp.Diff(map[string]string{"sub/l": "../x", "sub/new/l2": "../../x", "sub/ok": "f"}, cpHostLinks(t, dst2)); diff != "" {
		t.Errorf("links in dst2 (-want +got):\n%s", diff)
	}
	if b, err := os.ReadFile(filepath.Join(host, "x")); err != nil || string(b) != "next to the destination" {
		t.Errorf("the file next to dst: %q %v", b, err)
	}
	if diff := cmp.Diff([]string{"dst", "dst2", "x"}, cpDirNames(t, host)); diff != "" {
		t.Errorf("next to dst (-want +got):\n%s", diff)
	}
}

// cpHostileNames are file names a sandbox can make (no "/" or NUL): a
// terminal title change, a color, a carriage return, a newline, a
// right-to-left override, a C1 CSI and bytes that are not UTF-8.
var cpHostileNames = []string{"t\x1b]0;PWNED-TITLE\x07", "c\x1b[31mRED", "r\roverwritten", "n\nline", "b\u202Egnp.exe", "k\u009b31m", "u\xff\xfe"}

// cpRawControl returns what a terminal would act on in out (newlines that
// end lines aside), or "".
func cpRawControl(out string) string {
	for i, r := range out {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(out[i:], "\uFFFD"):
			return fmt.Sprintf("invalid UTF-8 at %d", i)
		case r == '\n':
		case r < 0x20 || r == 0x7f:
			return fmt.Sprintf("control byte %#x at %d", r, i)
		case r >= 0x80 && r <= 0x9f:
			return fmt.Sprintf("C1 control U+%04X at %d", r, i)
		case r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
			return fmt.Sprintf("bidi control U+%04X at %d", r, i)
		}
	}
	return ""
}

// TestFilesHostileNames: names and link targets made in the sandbox with
// terminal escapes, control characters, bidi overrides and bytes that are
// not UTF-8 reach the terminal quoted — files ls, files ls -r, cp's skipped
// lines (links out and FIFOs), cp to "-", and error messages that carry
// them (cp --strict) — with one line per item: the output holds no byte a
// terminal would act on. JSON carries the exact names (name_bytes for the
// ones that are not UTF-8).
func TestFilesHostileNames(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	var script strings.Builder
	script.WriteString("import os\nos.makedirs(b'names/sub')\n")
	for i, n := range cpHostileNames {
		fmt.Fprintf(&script, "n = %s\n", pyBytes(n))
		script.WriteString("open(b'names/' + n, 'w').write('x')\n")
		script.WriteString("os.symlink(b'/etc/' + n, b'names/sub/l' + n)\n")
		if i == 0 {
			script.WriteString("os.mkfifo(b'names/sub/f' + n)\n")
		}
	}
	wantCode(t, sb(t, "exec", "-s", s, "--lang", "python", "-c", script.String()), 0)

	check := func(what string, out string, lines int) {
		t.Helper()
		if c := cpRawControl(out); c != "" {
			t.Errorf("%s: %s in %q", what, c, out)
		}
		if n := strings.Count(out, "\n"); n != lines {
			t.Errorf("%s: %d lines, want %d:\n%q", what, n, lines, out)
		}
	}
	n := len(cpHostileNames)
	r := sb(t, "files", "ls", s+":names")
	wantCode(t, r, 0)
	check("files ls", r.Stdout, 1+n+1) // header, the files, sub/
	r = sb(t, "files", "ls", "-r", s+":names")
	wantCode(t, r, 0)
	check("files ls -r", r.Stdout, 1+n+1+n+1)
	if !strings.Contains(r.Stdout, `"t\x1b]0;PWNED-TITLE\a"`) || !strings.Contains(r.Stdout, `"u\xff\xfe"`) {
		t.Errorf("files ls -r does not show the quoted names:\n%s", r.Stdout)
	}
	// JSON: the exact names.
	r = sb(t, "files", "ls", "-r", "--format", "json", s+":names")
	wantCode(t, r, 0)
	var ls struct {
		Entries []struct {
			Name            string `json:"name"`
			LinkTarget      string `json:"link_target"`
			NameBytes       []byte `json:"name_bytes"`
			LinkTargetBytes []byte `json:"link_target_bytes"`
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &ls); err != nil {
		t.Fatal(err)
	}
	exact := func(s string, b []byte) string {
		if b != nil {
			return string(b)
		}
		return s
	}
	got := map[string]string{}
	for _, e := range ls.Entries {
		got[exact(e.Name, e.NameBytes)] = exact(e.LinkTarget, e.LinkTargetBytes)
	}
	for _, name := range cpHostileNames {
		if target, ok := got[name]; !ok || target != "" {
			t.Errorf("files ls --format json lacks the exact name %q", name)
		}
		if target, ok := got["sub/l"+name]; !ok || target != "/etc/"+name {
			t.Errorf("files ls --format json lacks the exact link sub/l%q -> %q (got %q)", name, "/etc/"+name, target)
		}
		if utf8.ValidString(name) && !strings.Contains(r.Stdout, mustJSON(t, name)) {
			t.Errorf("the JSON name of %q is not the name itself", name)
		}
	}

	// cp: each link out (and the FIFO) is a skipped line.
	host := t.TempDir()
	r = sb(t, "cp", s+":names", filepath.Join(host, "out"))
	wantCode(t, r, 0)
	check("cp stderr", r.Stderr, n+1)
	r = sb(t, "cp", "--format", "json", s+":names", filepath.Join(host, "out2"))
	j := cpDecode(t, r)
	gotSkipped := map[string]string{}
	for _, sk := range j.Skipped {
		gotSkipped[exact(sk.Name, sk.NameBytes)] = exact(sk.LinkTarget, sk.LinkTargetBytes)
	}
	for _, name := range cpHostileNames {
		if target, ok := gotSkipped["names/sub/l"+name]; !ok || target != "/etc/"+name {
			t.Errorf("cp --format json: skipped lacks the exact names/sub/l%q -> %q", name, "/etc/"+name)
		}
		// On the host: the files, with their exact names.
		if b, err := os.ReadFile(filepath.Join(host, "out", name)); err != nil || string(b) != "x" {
			t.Errorf("the host copy of %q: %q %v", name, b, err)
		}
	}
	r = sb(t, "cp", s+":names", "-")
	wantCode(t, r, 0)
	check("cp - stderr", r.Stderr, n+1)
	// An error message that carries a name (the first link that leads
	// out, refused by --strict): quoted on stderr, one line.
	r = sb(t, "cp", "--strict", s+":names", filepath.Join(host, "strict"))
	wantCode(t, r, 125)
	check("cp --strict stderr", r.Stderr, 1)
	cpMissing(t, filepath.Join(host, "strict"))
}

// pyBytes is a Python bytes literal of s.
func pyBytes(s string) string {
	var b strings.Builder
	b.WriteString("b'")
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "\\x%02x", s[i])
	}
	b.WriteString("'")
	return b.String()
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCpLinkChainsOut: a link that leads outside through another link
// (x -> e/secret with e -> /tmp/outside), on the way of a path or as the
// path itself, for every command that reads, writes or removes. os.Root
// refuses such a chain on Linux's kernel; under gVisor (the runsc pass) its
// openat follows a link despite O_NOFOLLOW|O_DIRECTORY, so os.Root alone
// resolved e there: the helper walks each path one folder at a time
// itself (tarsafe.Walk). What must not happen: a byte of /tmp/outside on
// the host or in an answer, a file written, or one removed, there.
func TestCpLinkChainsOut(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	const outside = "/tmp/outside"
	secret := fmt.Sprintf("SECRET-%d", time.Now().UnixNano())
	cpSh(t, s, fmt.Sprintf(`mkdir -p %[1]s/sub/d && echo %[2]s > %[1]s/secret && echo %[2]s > %[1]s/sub/deep.txt &&
		ln -s %[1]s e && ln -s e/secret x && ln -s e/sub y && mkdir -p real/in && echo ok > real/in/ok && ln -s ../e/sub real/z`, outside, secret))
	listOutside := func() string {
		return cpSh(t, s, "cd "+outside+" && find . | sort")
	}
	before := listOutside()
	host := t.TempDir()
	noSecret := func(what string, r result) {
		t.Helper()
		if strings.Contains(r.Stdout, secret) || strings.Contains(r.Stderr, secret) {
			t.Fatalf("%s answered with a byte of %s:\n%s", what, outside, r)
		}
	}
	// Reads: refused, nothing of the outside answered or copied.
	for _, args := range [][]string{
		{"files", "cat", s + ":x"}, {"files", "cat", s + ":y/deep.txt"}, {"files", "cat", s + ":real/z/deep.txt"},
		{"files", "ls", s + ":y"}, {"files", "ls", s + ":y/d"}, {"files", "ls", s + ":real/z"}, {"files", "ls", "-r", s + ":y/."},
	} {
		r := sb(t, append(args, "--format", "json")...)
		noSecret(strings.Join(args, " "), r)
		cpWantErr(t, r, "path_escape")
	}
	for i, src := range []string{"x", "y/deep.txt", "y/.", "y/d", "real/z/deep.txt", "real/z/."} {
		dst := filepath.Join(host, fmt.Sprintf("dst%d", i))
		r := sb(t, "cp", "--format", "json", s+":"+src, dst)
		noSecret("cp "+src, r)
		if r.Code != 0 {
			cpWantErr(t, r, "path_escape")
			cpMissing(t, dst)
		}
	}
	// The folder that holds the chain copies, without the link leading out.
	execMustPass(t, "cp", s+":real", filepath.Join(host, "real"))
	for _, e := range cpHostTree(t, host) {
		if strings.Contains(e, secret) || strings.Contains(e, "deep.txt") {
			t.Fatalf("the host got %q from %s", e, outside)
		}
	}
	// Writes through the chain: refused, nothing lands outside.
	cpWriteHost(t, filepath.Join(host, "payload.txt"), "P", 0o644)
	if err := os.MkdirAll(filepath.Join(host, "pdir", "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	cpWriteHost(t, filepath.Join(host, "pdir", "in", "p2.txt"), "P2", 0o644)
	for _, dst := range []string{"y/", "y/p.txt", "y/d/", "y/d/p.txt", "real/z/", "real/z/new/"} {
		cpWantErr(t, sb(t, "cp", "--format", "json", filepath.Join(host, "payload.txt"), s+":"+dst), "path_escape")
		cpWantErr(t, sb(t, "cp", "--format", "json", filepath.Join(host, "pdir"), s+":"+dst), "path_escape")
	}
	for _, dst := range []string{"y/evil", "y/d/evil", "y/new/evil", "real/z/evil"} {
		cpWantErr(t, sbIn(t, "evil", "files", "put", "--format", "json", s+":"+dst), "path_escape")
	}
	// Removals through the chain: refused; of the links themselves: only them.
	for _, args := range [][]string{{"files", "rm", s + ":y/deep.txt"}, {"files", "rm", "-r", s + ":y/d"}, {"files", "rm", "-r", s + ":real/z/d"}} {
		cpWantErr(t, sb(t, append(args, "--format", "json")...), "path_escape")
	}
	if after := listOutside(); after != before {
		t.Fatalf("%s changed:\nbefore:\n%s\nafter:\n%s", outside, before, after)
	}
	execMustPass(t, "files", "rm", "-r", s+":real")
	execMustPass(t, "files", "rm", s+":y")
	if after := listOutside(); after != before {
		t.Fatalf("removing the links changed %s:\nbefore:\n%s\nafter:\n%s", outside, before, after)
	}
}

// TestCpSwapRaceOutside: a folder on the way of a path (w in w/sub/deep.txt)
// exchanged, in a tight loop, with a link to a folder outside the
// workspace shaped like it (/tmp/outside/sub/deep.txt holds a secret),
// while copies and reads go through it and writes go into it. Under
// gVisor (the runsc pass) os.Root alone follows such a link on the way
// (README, runc vs runsc); the helper's walk opens each folder and checks
// it is what its name holds. What must not happen: the secret on the host
// or in an answer, or a file written in /tmp/outside. At least 6 rounds,
// up to 20 until the swapped state was seen; never seen fails the test.
func TestCpSwapRaceOutside(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	secret := fmt.Sprintf("SECRET-%d", time.Now().UnixNano())
	cpSh(t, s, fmt.Sprintf(`mkdir -p w/sub /tmp/outside/sub && echo inside > w/sub/deep.txt && echo %s > /tmp/outside/sub/deep.txt && ln -s /tmp/outside wl`, secret))
	stop, bgOut := cpSwapper(t, s, `[(b'w', b'wl')]`)
	host := t.TempDir()
	cpWriteHost(t, filepath.Join(host, "p.txt"), "P", 0o644)
	check := func(what string, r result) bool {
		t.Helper()
		if strings.Contains(r.Stdout, secret) || strings.Contains(r.Stderr, secret) {
			t.Fatalf("%s answered with the secret from /tmp/outside:\n%s", what, r)
		}
		if r.Code == 0 {
			return false
		}
		if c := decodeErr(t, r).Error.Code; c != "path_escape" && c != "file_not_found" && c != "not_directory" {
			t.Fatalf("%s: unexpected error:\n%s", what, r)
		}
		return true
	}
	ok, hits, rounds := 0, 0, 0
	for i := 0; i < 20 && (i < 6 || hits == 0); i++ {
		rounds++
		for j, src := range []string{"w/sub/deep.txt", "w/sub/.", "w/sub"} {
			dst := filepath.Join(host, fmt.Sprintf("run%d-%d", i, j))
			if check("cp "+src, sb(t, "cp", "--format", "json", s+":"+src, dst)) {
				hits++
				cpMissing(t, dst)
			} else {
				ok++
			}
		}
		if check("files cat", sb(t, "files", "cat", "--format", "json", s+":w/sub/deep.txt")) {
			hits++
		}
		if check("cp in", sb(t, "cp", "--format", "json", filepath.Join(host, "p.txt"), s+":w/sub/p.txt")) {
			hits++
		}
		if check("files put", sbIn(t, "Q", "files", "put", "--format", "json", s+":w/sub/q.txt")) {
			hits++
		}
	}
	stop()
	t.Logf("%d rounds: %d copies out complete, %d calls saw the swapped state; swapper: %s", rounds, ok, hits, strings.TrimSpace(bgOut.String()))
	for _, e := range cpHostTree(t, host) {
		if strings.Contains(e, secret) {
			t.Fatalf("the host got the secret from /tmp/outside: %q", e)
		}
	}
	if got := cpSh(t, s, "cd /tmp/outside && find . | sort"); got != ".\n./sub\n./sub/deep.txt\n" {
		t.Fatalf("/tmp/outside changed: %q", got)
	}
	if hits == 0 {
		t.Fatalf("in %d rounds no call ever saw the swapped state: the race was never hit", rounds)
	}
}
