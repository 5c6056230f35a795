//go:build unix

package files

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
	"github.com/docker-sandbox/docker-sandbox/files/fsserver"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
)

func TestParseLocation(t *testing.T) {
	tests := []struct {
		arg  string
		want Location
		code string
	}{
		{arg: "-", want: Location{Kind: Stdio, Arg: "-"}},
		{arg: "./a:b", want: Location{Kind: Host, Path: "./a:b", Arg: "./a:b"}},
		{arg: "/abs/x:y", want: Location{Kind: Host, Path: "/abs/x:y", Arg: "/abs/x:y"}},
		{arg: "plain", want: Location{Kind: Host, Path: "plain", Arg: "plain"}},
		{arg: "dir/", want: Location{Kind: Host, Path: "dir/", Arg: "dir/", DirSuffix: true}},
		{arg: "dir/.", want: Location{Kind: Host, Path: "dir/.", Arg: "dir/.", DirSuffix: true, Contents: true}},
		{arg: "u1:a.txt", want: Location{Kind: Sandbox, Target: core.Target{Scope: "u1"}, Path: "/opt/workspace/a.txt", Arg: "u1:a.txt"}},
		{arg: "u1/chat-A:/opt/user/x/", want: Location{Kind: Sandbox, Target: core.Target{Scope: "u1", Session: "chat-A"}, Path: "/opt/user/x", Arg: "u1/chat-A:/opt/user/x/", DirSuffix: true}},
		{arg: "u1:", want: Location{Kind: Sandbox, Target: core.Target{Scope: "u1"}, Path: "/opt/workspace", Arg: "u1:", DirSuffix: true, Contents: true}},
		{arg: "u1:d/.", want: Location{Kind: Sandbox, Target: core.Target{Scope: "u1"}, Path: "/opt/workspace/d", Arg: "u1:d/.", DirSuffix: true, Contents: true}},
		{arg: "u1:../../etc/passwd", code: core.CodePathEscape},
		{arg: "u1:/etc/passwd", code: core.CodePathEscape},
		{arg: "u1:/proc/self/environ", code: core.CodePathEscape},
		{arg: "u1:a\x00b", code: core.CodePathEscape},
		{arg: "./a\x00b", code: core.CodePathEscape},
		{arg: "bad.name:x", code: core.CodeBadName},
		{arg: "u1/s/t:x", code: core.CodeBadName},
		{arg: ":x", code: core.CodeBadName},
		{arg: "", code: core.CodeBadFlag},
	}
	for _, tc := range tests {
		got, err := ParseLocation(tc.arg)
		if tc.code != "" {
			var e *core.Error
			if !errors.As(err, &e) || e.Code != tc.code || e.Exit != 125 {
				t.Errorf("ParseLocation(%q) = %+v, %v; want code %s, exit 125", tc.arg, got, err, tc.code)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseLocation(%q): %v", tc.arg, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseLocation(%q) (-want +got):\n%s", tc.arg, diff)
		}
	}
	def := core.Target{Scope: "d"}
	l, err := ParseFilesLocation("a:b", def, true)
	if err != nil || l.Target != def || l.Path != "/opt/workspace/a:b" {
		t.Errorf("ParseFilesLocation with --scope: %+v %v", l, err)
	}
	l, err = ParseFilesLocation("u2:b", def, false)
	if err != nil || l.Target.Scope != "u2" || l.Path != "/opt/workspace/b" {
		t.Errorf("ParseFilesLocation: %+v %v", l, err)
	}
	l, err = ParseFilesLocation("b", def, false)
	if err != nil || l.Target != def {
		t.Errorf("ParseFilesLocation without a scope: %+v %v", l, err)
	}
}

// FuzzParseLocation: a sandbox location's path always lies under
// /opt/workspace or /opt/user; a NUL byte is never accepted.
func FuzzParseLocation(f *testing.F) {
	for _, s := range []string{"u1:../../etc/passwd", "u1:/etc/passwd", "u1:/proc/self/environ", "u1:a\x00b", "u1/s:x/./", "./x:y", "-", "u1:/opt/user/../workspace"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		l, err := ParseLocation(arg)
		if err != nil {
			return
		}
		if strings.IndexByte(arg, 0) >= 0 {
			t.Fatalf("%q: a NUL byte was accepted", arg)
		}
		if l.Kind == Sandbox {
			if l.Path != fsproto.WorkspaceDir && l.Path != fsproto.UserDir &&
				!strings.HasPrefix(l.Path, fsproto.WorkspaceDir+"/") && !strings.HasPrefix(l.Path, fsproto.UserDir+"/") {
				t.Fatalf("%q: sandbox path %q outside the spaces", arg, l.Path)
			}
			if strings.Contains(l.Path+"/", "/../") || strings.Contains(l.Path+"/", "/./") {
				t.Fatalf("%q: sandbox path %q not clean", arg, l.Path)
			}
			if err := l.Target.Validate(); err != nil {
				t.Fatalf("%q: invalid target accepted: %v", arg, err)
			}
		}
	})
}

func TestCodesMatchExec(t *testing.T) {
	pairs := map[string]string{
		fsproto.CodePathEscape: core.CodePathEscape, fsproto.CodeTooLarge: core.CodeTooLarge, fsproto.CodeNotFound: core.CodeFileNotFound,
		fsproto.CodeIsDirectory: core.CodeIsDirectory, fsproto.CodeNotDirectory: core.CodeNotDirectory, fsproto.CodeBadArchive: core.CodeBadArchive,
		fsproto.CodePermissionDenied: core.CodePermissionDenied, fsproto.CodeUnsupportedFile: core.CodeUnsupportedFile, fsproto.CodeIOError: core.CodeIOError,
		fsproto.CodeBadFlag: core.CodeBadFlag,
	}
	for a, b := range pairs {
		if a != b {
			t.Errorf("fsproto code %q != exec code %q", a, b)
		}
	}
}

// fakeRunner runs the helper's file server in-process on folders per
// target; hostile, when set, replaces the output of tar-out.
type fakeRunner struct {
	t       *testing.T
	top     string
	mu      sync.Mutex
	calls   []string
	hostile func(args []string) ([]byte, int)
}

func (f *fakeRunner) dirs(t core.Target) (ws, user string) {
	user = filepath.Join(f.top, t.Scope+".user")
	ws = user
	if t.Session != "" {
		ws = filepath.Join(f.top, t.Scope+"."+t.Session+".ws")
	}
	os.MkdirAll(ws, 0o755)
	os.MkdirAll(user, 0o755)
	return ws, user
}

func (f *fakeRunner) HelperExec(ctx context.Context, spec sbexec.Spec, rr sbexec.RawRequest) (int, sbexec.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, strings.Join(rr.Args, " "))
	f.mu.Unlock()
	if f.hostile != nil && rr.Args[1] == "tar-out" {
		data, code := f.hostile(rr.Args)
		rr.Stdout.Write(data)
		return code, sbexec.Result{}, nil
	}
	ws, user := f.dirs(spec.Target)
	stdin := rr.Stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	s := &fsserver.Server{Workspace: ws, User: user, Stdin: stdin, Stdout: rr.Stdout, Stderr: rr.Stderr, Umask: 0o022, Exit: func(int) {}}
	return s.Run(rr.Args[1:]), sbexec.Result{}, nil
}

type world struct {
	t      *testing.T
	runner *fakeRunner
	cp     *Copier
	host   string // a host folder to copy from and to
	canary string // a host folder nothing may touch
}

func newWorld(t *testing.T) *world {
	top := t.TempDir()
	w := &world{t: t, host: filepath.Join(top, "host"), canary: filepath.Join(top, "canary")}
	os.Mkdir(w.host, 0o755)
	os.Mkdir(w.canary, 0o755)
	os.WriteFile(filepath.Join(w.canary, "secret"), []byte("SECRET"), 0o644)
	w.runner = &fakeRunner{t: t, top: filepath.Join(top, "engine")}
	w.cp = &Copier{Runner: w.runner, Spec: func(t core.Target) sbexec.Spec { return sbexec.Spec{Target: t} }, Umask: 0o022}
	return w
}

func (w *world) copy(src, dst Location) error {
	_, err := w.cp.Copy(context.Background(), src, dst, nil, nil)
	return err
}

func listTree(t *testing.T, root string) []string {
	var out []string
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			tg, _ := os.Readlink(p)
			out = append(out, rel+" -> "+tg)
		case fi.IsDir():
			out = append(out, rel+"/")
		default:
			b, _ := os.ReadFile(p)
			out = append(out, rel+"="+string(b))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

func (w *world) canaryIntact() {
	w.t.Helper()
	if got := listTree(w.t, w.canary); len(got) != 1 || got[0] != "secret=SECRET" {
		w.t.Fatalf("the canary outside the destination changed: %q", got)
	}
}

func codeOf(err error) string {
	var e *core.Error
	if errors.As(err, &e) {
		return e.Code
	}
	if err == nil {
		return ""
	}
	return "other: " + err.Error()
}

func TestCopyRoundTrips(t *testing.T) {
	w := newWorld(t)
	os.MkdirAll(filepath.Join(w.host, "src", "sub"), 0o755)
	os.WriteFile(filepath.Join(w.host, "src", "a"), []byte("A"), 0o644)
	os.WriteFile(filepath.Join(w.host, "src", "sub", "b"), []byte("B"), 0o644)
	os.Symlink("a", filepath.Join(w.host, "src", "l"))
	os.WriteFile(filepath.Join(w.host, "f.txt"), []byte("F"), 0o644)
	steps := []struct{ src, dst string }{
		{w.host + "/src", "u1:src"},                        // folder to a new path
		{w.host + "/f.txt", "u1:src/"},                     // file into a folder
		{w.host + "/src/.", "u1/s:copy"},                   // contents to a new folder in a session
		{"u1:src", "u2:/opt/user/x"},                       // sandbox to sandbox
		{"u2:/opt/user/x", w.host + "/back"},               // sandbox to host
		{"u1/s:copy/.", w.host + "/back"},                  // contents into an existing folder
		{"u1:src/f.txt", w.host + "/back/sub/renamed.txt"}, // a file to a new name
	}
	for _, s := range steps {
		if _, err := w.cp.Copy(context.Background(), mustParse(t, s.src), mustParse(t, s.dst), nil, nil); err != nil {
			t.Fatalf("cp %s %s: %v", s.src, s.dst, err)
		}
	}
	want := []string{"a=A", "f.txt=F", "l -> a", "sub/", "sub/b=B", "sub/renamed.txt=F"}
	if diff := cmp.Diff(want, listTree(t, filepath.Join(w.host, "back"))); diff != "" {
		t.Errorf("after the round trips (-want +got):\n%s", diff)
	}
	w.canaryIntact()
}

func mustParse(t *testing.T, arg string) Location {
	t.Helper()
	l, err := ParseLocation(arg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestCopyStdio(t *testing.T) {
	w := newWorld(t)
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	for _, h := range []*tar.Header{{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}, {Name: "./a", Typeflag: tar.TypeReg, Mode: 0o4755, Size: 1},
		{Name: "./dev", Typeflag: tar.TypeChar, Mode: 0o644}} {
		tw.WriteHeader(h)
		if h.Size > 0 {
			tw.Write([]byte("A"))
		}
	}
	tw.Close()
	ws, _ := w.runner.dirs(core.Target{Scope: "u1"})
	os.Mkdir(filepath.Join(ws, "dir"), 0o755)
	res, err := w.cp.Copy(context.Background(), mustParse(t, "-"), mustParse(t, "u1:dir"), &in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.SkippedCount != 1 || res.StrippedCount != 1 || res.Files != 1 {
		t.Errorf("result %+v", res)
	}
	fi, _ := os.Stat(filepath.Join(ws, "dir", "a"))
	if fi.Mode() != 0o755 {
		t.Errorf("mode %v", fi.Mode())
	}
	var out bytes.Buffer
	if _, err := w.cp.Copy(context.Background(), mustParse(t, "u1:dir/."), mustParse(t, "-"), nil, &out); err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	if diff := cmp.Diff([]string{"./", "./a"}, names); diff != "" {
		t.Errorf("tar out (-want +got):\n%s", diff)
	}
	for _, pair := range [][2]string{{"-", "-"}, {"-", w.host + "/x"}, {w.host + "/x", w.host + "/y"}, {w.host + "/x", "-"}} {
		if _, err := w.cp.Copy(context.Background(), mustParse(t, pair[0]), mustParse(t, pair[1]), nil, nil); codeOf(err) != core.CodeBadFlag {
			t.Errorf("cp %s %s: %v", pair[0], pair[1], err)
		}
	}
}

// TestCopyFromCompromisedHelper: the host treats what a sandbox sends as
// hostile, whatever the helper claims: a tar-out answer crafted by a
// compromised sandbox writes nothing outside the destination and nothing at
// all when refused.
func TestCopyFromCompromisedHelper(t *testing.T) {
	mk := func(hs ...*tar.Header) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range hs {
			if h.Typeflag == tar.TypeReg {
				h.Size = int64(len(h.Linkname))
				body := h.Linkname
				h.Linkname = ""
				tw.WriteHeader(h)
				tw.Write([]byte(body))
				continue
			}
			tw.WriteHeader(h)
		}
		tw.Close()
		return b.Bytes()
	}
	d := func(n string) *tar.Header { return &tar.Header{Name: n, Typeflag: tar.TypeDir, Mode: 0o755} }
	f := func(n, body string) *tar.Header {
		return &tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Linkname: body}
	}
	l := func(n, target string) *tar.Header {
		return &tar.Header{Name: n, Typeflag: tar.TypeSymlink, Mode: 0o777, Linkname: target}
	}
	w := newWorld(t)
	cases := map[string][]byte{
		"link to /root then a file through it": mk(d("folder"), l("folder/link", "/root"), f("folder/link/x", "E")),
		"link to the canary then through it":   mk(d("folder"), l("folder/link", w.canary), f("folder/link/secret", "E")),
		"relative link out then through it":    mk(d("folder"), l("folder/link", "../../canary"), f("folder/link/secret", "E")),
		"dotdot":                               mk(d("folder"), f("folder/../../canary/secret", "E")),
		"absolute":                             mk(d("folder"), f(w.canary+"/secret", "E")),
		"outside the folder":                   mk(d("folder"), f("other", "E")),
		"hard link to /etc/shadow":             mk(d("folder"), &tar.Header{Name: "folder/h", Typeflag: tar.TypeLink, Linkname: "/etc/shadow"}),
		"truncated":                            mk(d("folder"), f("folder/a", strings.Repeat("x", 4000)))[:1024],
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			w.runner.hostile = func([]string) ([]byte, int) { return data, 0 }
			dst := filepath.Join(w.host, "dst")
			err := w.copy(mustParse(t, "u1:folder"), mustParse(t, dst))
			if err == nil {
				t.Fatal("a hostile archive was accepted")
			}
			if got := listTree(t, w.host); len(got) != 0 {
				t.Fatalf("the refused copy left %q", got)
			}
			w.canaryIntact()
		})
	}
	// The helper's failure mid-stream: nothing is committed.
	w.runner.hostile = func([]string) ([]byte, int) {
		return mk(d("folder"), f("folder/a", "A"))[:1536], 1
	}
	if err := w.copy(mustParse(t, "u1:folder"), mustParse(t, filepath.Join(w.host, "dst"))); err == nil {
		t.Fatal("a failed helper's output was accepted")
	}
	if got := listTree(t, w.host); len(got) != 0 {
		t.Fatalf("left %q", got)
	}
}

// TestCopyHostDestinationLinks: a link already in the host destination
// that leads out is never written through.
func TestCopyHostDestinationLinks(t *testing.T) {
	w := newWorld(t)
	ws, _ := w.runner.dirs(core.Target{Scope: "u1"})
	os.MkdirAll(filepath.Join(ws, "folder", "sub"), 0o755)
	os.WriteFile(filepath.Join(ws, "folder", "sub", "file"), []byte("E"), 0o644)
	dest := filepath.Join(w.host, "dest")
	os.Mkdir(dest, 0o755)
	os.Symlink(w.canary, filepath.Join(dest, "sub"))
	err := w.copy(mustParse(t, "u1:folder/."), mustParse(t, dest))
	if codeOf(err) != core.CodePathEscape {
		t.Fatalf("copy through dest/sub -> outside: %v", err)
	}
	w.canaryIntact()
	if diff := cmp.Diff([]string{"dest/", "dest/sub -> " + w.canary}, listTree(t, w.host)); diff != "" {
		t.Errorf("host (-want +got):\n%s", diff)
	}
	// The user's own link naming the destination is followed: they named it.
	os.Mkdir(filepath.Join(w.host, "real"), 0o755)
	os.Symlink("real", filepath.Join(w.host, "mine"))
	if err := w.copy(mustParse(t, "u1:folder"), mustParse(t, filepath.Join(w.host, "mine"))); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(w.host, "real", "folder", "sub", "file")); err != nil {
		t.Fatal(err)
	}
}

// TestCopySourceFailure: when the sending sandbox fails mid-stream, the
// receiving sandbox keeps nothing of the copy.
func TestCopySourceFailure(t *testing.T) {
	w := newWorld(t)
	w.runner.hostile = func([]string) ([]byte, int) {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		tw.WriteHeader(&tar.Header{Name: "folder/", Typeflag: tar.TypeDir, Mode: 0o755})
		tw.WriteHeader(&tar.Header{Name: "folder/a", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
		tw.Write([]byte("A"))
		tw.Flush()
		return b.Bytes(), 1 // no end of archive, and a failure
	}
	err := w.copy(mustParse(t, "u1:folder"), mustParse(t, "u2:copy"))
	if err == nil {
		t.Fatal("no error")
	}
	ws, _ := w.runner.dirs(core.Target{Scope: "u2"})
	if got := listTree(t, ws); len(got) != 0 {
		t.Fatalf("the receiving sandbox kept %q", got)
	}
}

func TestFilesOps(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	loc := mustParse(t, "u1:notes/today.txt")
	if _, err := w.cp.Put(ctx, loc, strings.NewReader("hello"), ""); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := w.cp.Cat(ctx, loc, &out); err != nil || out.String() != "hello" {
		t.Fatalf("cat: %q %v", out.String(), err)
	}
	// A failing stdin leaves the old file.
	bad := io.MultiReader(strings.NewReader("partial"), errReader{})
	if _, err := w.cp.Put(ctx, loc, bad, ""); err == nil {
		t.Fatal("a failed stdin was committed")
	}
	out.Reset()
	w.cp.Cat(ctx, loc, &out)
	if out.String() != "hello" {
		t.Fatalf("after a failed put: %q", out.String())
	}
	var names []string
	if err := w.cp.List(ctx, mustParse(t, "u1:"), true, func(e fsproto.Entry) error {
		names = append(names, e.Name+" "+e.Type)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"notes dir", "notes/today.txt file"}, names); diff != "" {
		t.Errorf("ls -r (-want +got):\n%s", diff)
	}
	if _, err := w.cp.Remove(ctx, mustParse(t, "u1:notes"), false, false); codeOf(err) != core.CodeIsDirectory {
		t.Fatalf("rm of a folder without -r: %v", err)
	}
	if res, err := w.cp.Remove(ctx, mustParse(t, "u1:notes"), true, false); err != nil || !res.Removed {
		t.Fatal(res, err)
	}
	if res, err := w.cp.Remove(ctx, mustParse(t, "u1:notes"), true, true); err != nil || res.Removed {
		t.Fatal(res, err)
	}
	if err := w.cp.Cat(ctx, loc, &out); codeOf(err) != core.CodeFileNotFound {
		t.Fatalf("cat after rm: %v", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("stdin broke") }

// TestCopyLinksThatLeadOut: one rule in every direction. A tree with links
// that stay inside and links that lead out copies completely; the links out
// are not written and are reported (Skipped, with the link's target);
// Strict refuses the copy and leaves nothing.
func TestCopyLinksThatLeadOut(t *testing.T) {
	w := newWorld(t)
	ws, _ := w.runner.dirs(core.Target{Scope: "u1"})
	mk := func(root string) {
		os.MkdirAll(filepath.Join(root, "venv", "bin"), 0o755)
		os.WriteFile(filepath.Join(root, "venv", "bin", "activate"), []byte("A"), 0o644)
		os.Symlink("/usr/bin/python3", filepath.Join(root, "venv", "bin", "python"))
		os.Symlink("python", filepath.Join(root, "venv", "bin", "python3"))
		os.Symlink("../../etc", filepath.Join(root, "venv", "bin", "etc"))
		os.Symlink("bin", filepath.Join(root, "venv", "scripts"))
	}
	mk(ws)
	mk(w.host)
	want := []string{"bin/", "bin/activate=A", "bin/python3 -> python", "scripts -> bin"}
	wantSkipped := []string{"venv/bin/etc -> ../../etc", "venv/bin/python -> /usr/bin/python3"}
	names := func(t *testing.T, sk []tarsafe.Skipped) []string {
		var out []string
		for _, s := range sk {
			if s.Type != "symlink" || s.Reason == "" {
				t.Errorf("skipped %+v", s)
			}
			out = append(out, s.Name+" -> "+s.LinkTarget)
		}
		sort.Strings(out)
		return out
	}
	for _, tc := range []struct{ src, dst, tree string }{
		{"u1:venv", w.host + "/out", w.host + "/out"},                              // sandbox -> host
		{"u1:venv", "u2:/opt/user/v", filepath.Join(w.runner.top, "u2.user", "v")}, // sandbox -> sandbox
		{w.host + "/venv", "u3:v", filepath.Join(w.runner.top, "u3.user", "v")},    // host -> sandbox
	} {
		res, err := w.cp.Copy(context.Background(), mustParse(t, tc.src), mustParse(t, tc.dst), nil, nil)
		if err != nil {
			t.Fatalf("cp %s %s: %v", tc.src, tc.dst, err)
		}
		if diff := cmp.Diff(want, listTree(t, tc.tree)); diff != "" {
			t.Errorf("cp %s %s (-want +got):\n%s", tc.src, tc.dst, diff)
		}
		if diff := cmp.Diff(wantSkipped, names(t, res.Skipped)); diff != "" {
			t.Errorf("cp %s %s: skipped (-want +got):\n%s", tc.src, tc.dst, diff)
		}
	}
	// sandbox -> "-": the stream leaves them out.
	var out bytes.Buffer
	res, err := w.cp.Copy(context.Background(), mustParse(t, "u1:venv"), mustParse(t, "-"), nil, &out)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantSkipped, names(t, res.Skipped)); diff != "" {
		t.Errorf("cp - : skipped (-want +got):\n%s", diff)
	}
	if strings.Contains(out.String(), "/usr/bin/python3") || strings.Contains(out.String(), "../../etc") {
		t.Error("the stream holds a link that leads out")
	}
	// Strict: refused in every direction, nothing left.
	w.cp.Strict = true
	defer func() { w.cp.Strict = false }()
	for _, tc := range []struct{ src, dst, tree string }{
		{"u1:venv", w.host + "/strict", w.host + "/strict"},
		{"u1:venv", "u2:/opt/user/strict", filepath.Join(w.runner.top, "u2.user", "strict")},
		{w.host + "/venv", "u3:strict", filepath.Join(w.runner.top, "u3.user", "strict")},
	} {
		_, err := w.cp.Copy(context.Background(), mustParse(t, tc.src), mustParse(t, tc.dst), nil, nil)
		if codeOf(err) != core.CodePathEscape {
			t.Errorf("strict cp %s %s: %v, want path_escape", tc.src, tc.dst, err)
		}
		if _, err := os.Lstat(tc.tree); err == nil {
			t.Errorf("strict cp %s %s left %s", tc.src, tc.dst, tc.tree)
		}
	}
	out.Reset()
	if _, err := w.cp.Copy(context.Background(), mustParse(t, "u1:venv"), mustParse(t, "-"), nil, &out); codeOf(err) != core.CodePathEscape {
		t.Errorf("strict cp u1:venv -: %v", err)
	}
	w.canaryIntact()
}
