package plugin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/files"
	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

func TestParseCpArgs(t *testing.T) {
	u1 := core.Target{Scope: "u1"}
	for _, tc := range []struct {
		src, dst, format string
		want             [2]files.Location
		code             string
	}{
		{src: "./src", dst: "u1:src", want: [2]files.Location{{Kind: files.Host, Path: "./src", Arg: "./src"}, {Kind: files.Sandbox, Target: u1, Path: "/opt/workspace/src", Arg: "u1:src"}}},
		{src: "u1/chat:/opt/user/a", dst: "-", want: [2]files.Location{{Kind: files.Sandbox, Target: core.Target{Scope: "u1", Session: "chat"}, Path: "/opt/user/a", Arg: "u1/chat:/opt/user/a"}, {Kind: files.Stdio, Arg: "-"}}},
		{src: "-", dst: "u1:dir", format: "json", want: [2]files.Location{{Kind: files.Stdio, Arg: "-"}, {Kind: files.Sandbox, Target: u1, Path: "/opt/workspace/dir", Arg: "u1:dir"}}},
		// DST - is the tar stream on stdout: no room for --format.
		{src: "u1:a", dst: "-", format: "json", code: core.CodeBadFlag},
		{src: "u1:a", dst: "-", format: "{{.bytes}}", code: core.CodeBadFlag},
		{src: "", dst: "u1:a", code: core.CodeBadFlag},
		{src: "a b:x", dst: ".", code: core.CodeBadName},
		{src: ".", dst: "u1/s/t:x", code: core.CodeBadName},
		// A leading "." or "/" is a host path, as with docker cp.
		{src: "./a:b", dst: "/x:y", want: [2]files.Location{{Kind: files.Host, Path: "./a:b", Arg: "./a:b"}, {Kind: files.Host, Path: "/x:y", Arg: "/x:y"}}},
		{src: "u1:/etc/passwd", dst: ".", code: core.CodePathEscape},
		{src: "u1:../../etc", dst: ".", code: core.CodePathEscape},
	} {
		a, err := parseCpArgs(tc.src, tc.dst, tc.format)
		if tc.code != "" {
			if err == nil || core.AsError(err).Code != tc.code {
				t.Errorf("cp %q %q --format %q: %v, want %s", tc.src, tc.dst, tc.format, err, tc.code)
			}
			continue
		}
		if err != nil {
			t.Fatalf("cp %q %q: %v", tc.src, tc.dst, err)
		}
		if d := cmp.Diff(tc.want, [2]files.Location{a.src, a.dst}); d != "" || a.srcArg != tc.src || a.dstArg != tc.dst {
			t.Errorf("cp %q %q (-want +got):\n%s", tc.src, tc.dst, d)
		}
	}
}

// The cap flags go over the configuration's copy_max_* and are checked as
// it checks them; without flags the configuration's are the caps.
func TestCopyLimits(t *testing.T) {
	newFlags := func(args ...string) *cobra.Command {
		cmd := &cobra.Command{}
		config.AddFlags(cmd.Flags(), config.FlagsCopy)
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	c := &config.Config{CopyMaxSize: 2 << 30, CopyMaxFileSize: 0, CopyMaxEntries: 1000000}
	got, err := copyLimits(c, nil)
	if d := cmp.Diff(tarsafe.Limits{MaxBytes: 2 << 30, MaxEntries: 1000000}, got); err != nil || d != "" {
		t.Errorf("%v %s", err, d)
	}
	c2, _ := config.Load(config.LoadOptions{WorkDir: t.TempDir(), LookupEnv: func(string) (string, bool) { return "", false }})
	got, err = copyLimits(c2, newFlags("--max-size", "10m", "--max-file-size", "1k", "--max-entries", "7").Flags())
	if d := cmp.Diff(tarsafe.Limits{MaxBytes: 10 << 20, MaxEntryBytes: 1 << 10, MaxEntries: 7}, got); err != nil || d != "" {
		t.Errorf("%v %s", err, d)
	}
	for _, bad := range [][]string{{"--max-size", "lots"}, {"--max-entries", "0"}, {"--max-size", "-1"}} {
		c3, _ := config.Load(config.LoadOptions{WorkDir: t.TempDir(), LookupEnv: func(string) (string, bool) { return "", false }})
		if _, err := copyLimits(c3, newFlags(bad...).Flags()); err == nil || core.AsError(err).Exit != 125 || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

type fakeCopier struct {
	res      *tarsafe.Result
	err      error
	src, dst files.Location
	stdin    io.Reader
}

func (f *fakeCopier) Copy(ctx context.Context, src, dst files.Location, stdin io.Reader, stdout io.Writer) (*tarsafe.Result, error) {
	f.src, f.dst, f.stdin = src, dst, stdin
	return f.res, f.err
}

func TestCp(t *testing.T) {
	a, err := parseCpArgs("u1:out", ".", "")
	if err != nil {
		t.Fatal(err)
	}
	res := &tarsafe.Result{Files: 2, Bytes: 10, Skipped: []tarsafe.Skipped{tarsafe.NewSkipped("out/venv/python", "symlink", tarsafe.ReasonLinkAbsolute, "/usr/bin/python3")},
		SkippedCount: 1, Stripped: []string{"out/tool"}, StrippedCount: 3}
	in := strings.NewReader("")
	for format, want := range map[string]string{
		"":      "",
		"table": "",
		"{{.files}} {{.bytes}} {{.source}} {{.destination}}": "2 10 u1:out .\n",
	} {
		f := &fakeCopier{res: res}
		var out, errOut bytes.Buffer
		if err := runCp(context.Background(), f, in, &out, &errOut, a, format); err != nil {
			t.Fatal(err)
		}
		if out.String() != want || f.src != a.src || f.dst != a.dst || f.stdin != in {
			t.Errorf("format %q: %q, copied %+v -> %+v", format, out.String(), f.src, f.dst)
		}
		// What was skipped or changed, one line each, on stderr.
		if d := cmp.Diff("docker sandbox: skipped out/venv/python (symlink -> /usr/bin/python3): "+tarsafe.ReasonLinkAbsolute+"\n"+
			"docker sandbox: removed the setuid/setgid/sticky bits of out/tool\n"+
			"docker sandbox: removed the setuid/setgid/sticky bits of 2 more entries\n", errOut.String()); d != "" {
			t.Errorf("format %q: %s", format, d)
		}
	}
	// JSON: the result with source and destination.
	var out bytes.Buffer
	if err := runCp(context.Background(), &fakeCopier{res: &tarsafe.Result{Skipped: []tarsafe.Skipped{}, Stripped: []string{}}}, in, &out, io.Discard, a, "json"); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(`{"source":"u1:out","destination":".","files":0,"dirs":0,"symlinks":0,"hardlinks":0,"bytes":0,"skipped":[],"skipped_count":0,"stripped":[],"stripped_count":0}`+"\n", out.String()); d != "" {
		t.Error(d)
	}
	// The copy's error, nothing printed.
	e := core.Errorf(core.CodePathEscape, "no")
	out.Reset()
	if err := runCp(context.Background(), &fakeCopier{err: e}, in, &out, &out, a, "json"); err != e || out.Len() != 0 {
		t.Errorf("%v %q", err, out.String())
	}
}

// fakeFiles is the files copier as the files subcommands see it.
type fakeFiles struct {
	entries []fsproto.Entry
	err     error
	calls   []string
	put     string
}

func (f *fakeFiles) List(ctx context.Context, loc files.Location, recursive bool, each func(fsproto.Entry) error) error {
	f.calls = append(f.calls, "List "+loc.Target.String()+":"+loc.Path)
	for _, e := range f.entries {
		if err := each(e); err != nil {
			return err
		}
	}
	return f.err
}

func (f *fakeFiles) Cat(ctx context.Context, loc files.Location, w io.Writer) error {
	f.calls = append(f.calls, "Cat "+loc.Path)
	_, err := io.WriteString(w, "content")
	return err
}

func (f *fakeFiles) Put(ctx context.Context, loc files.Location, r io.Reader, mode string) (fsproto.PutResult, error) {
	b, _ := io.ReadAll(r)
	f.put = string(b)
	f.calls = append(f.calls, "Put "+loc.Path+" "+mode)
	return fsproto.PutResult{Path: loc.Path, Bytes: int64(len(b))}, f.err
}

func (f *fakeFiles) Remove(ctx context.Context, loc files.Location, recursive, force bool) (fsproto.RmResult, error) {
	f.calls = append(f.calls, "Remove "+loc.Path)
	return fsproto.RmResult{Path: loc.Path, Removed: true}, f.err
}

func TestFiles(t *testing.T) {
	// PATH: SCOPE[/SESSION]:PATH; with --scope or --session a path (even
	// with a ":"); else the default scope's.
	for _, tc := range []struct {
		arg               string
		o                 filesOptions
		scopeSet, sessSet bool
		want              core.Target
		path              string
		code              string
	}{
		{arg: "u1/chat:notes", want: core.Target{Scope: "u1", Session: "chat"}, path: "/opt/workspace/notes"},
		{arg: "notes", want: core.Target{Scope: "def"}, path: "/opt/workspace/notes"},
		{arg: "a:b", o: filesOptions{scope: "u2"}, scopeSet: true, want: core.Target{Scope: "u2"}, path: "/opt/workspace/a:b"},
		{arg: "/opt/user/x", o: filesOptions{session: "s"}, sessSet: true, want: core.Target{Scope: "def", Session: "s"}, path: "/opt/user/x"},
		{arg: "u1:/etc/shadow", code: core.CodePathEscape},
		{arg: "x", o: filesOptions{scope: "../u"}, scopeSet: true, code: core.CodeBadName},
	} {
		o := tc.o
		loc, err := o.location(tc.arg, "def", tc.scopeSet, tc.sessSet)
		if tc.code != "" {
			if err == nil || core.AsError(err).Code != tc.code {
				t.Errorf("%q %+v: %v, want %s", tc.arg, tc.o, err, tc.code)
			}
			continue
		}
		if err != nil || loc.Target != tc.want || loc.Path != tc.path {
			t.Errorf("%q %+v: %v %+v", tc.arg, tc.o, err, loc)
		}
	}

	loc := files.Location{Kind: files.Sandbox, Target: core.Target{Scope: "u1"}, Path: "/opt/workspace/d"}
	mt := time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local)
	entries := []fsproto.Entry{
		{Name: "d", Type: fsproto.TypeDir, Mode: "0755", ModTime: mt},
		{Name: "d/f.txt", Type: fsproto.TypeFile, Size: 2048, Mode: "0644", ModTime: mt},
		{Name: "d/l", Type: fsproto.TypeSymlink, Mode: "0777", ModTime: mt, LinkTarget: "/etc\x1b[31m"},
	}
	var out bytes.Buffer
	f := &fakeFiles{entries: entries}
	if err := runFilesLs(context.Background(), f, nil, &out, loc, &filesOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "MODE    SIZE  MODIFIED             NAME\n" +
		"d 0755  -     2026-03-01 12:00:00  d/\n" +
		"- 0644  2KiB  2026-03-01 12:00:00  d/f.txt\n" +
		"l 0777  0B    2026-03-01 12:00:00  d/l -> \"/etc\\x1b[31m\"\n"
	if d := cmp.Diff(want, out.String()); d != "" {
		t.Error(d)
	}
	// A listing that fails midway prints only the error.
	out.Reset()
	f = &fakeFiles{entries: entries, err: core.Errorf(core.CodePathEscape, "no")}
	if err := runFilesLs(context.Background(), f, nil, &out, loc, &filesOptions{}); err == nil || out.Len() != 0 {
		t.Errorf("%v %q", err, out.String())
	}
	// JSON: the path and every entry.
	out.Reset()
	if err := runFilesLs(context.Background(), &fakeFiles{}, nil, &out, loc, &filesOptions{format: "json"}); err != nil || out.String() != `{"path":"/opt/workspace/d","entries":[]}`+"\n" {
		t.Errorf("%v %q", err, out.String())
	}
	// cat, put (stdin is the content), rm; quiet unless --format.
	out.Reset()
	f = &fakeFiles{}
	if err := runFilesCat(context.Background(), f, nil, &out, loc, &filesOptions{}); err != nil || out.String() != "content" {
		t.Errorf("cat: %v %q", err, out.String())
	}
	out.Reset()
	if err := runFilesPut(context.Background(), f, strings.NewReader("hello\n"), &out, loc, &filesOptions{mode: "0600"}); err != nil || out.Len() != 0 || f.put != "hello\n" {
		t.Errorf("put: %v %q %q", err, out.String(), f.put)
	}
	if err := runFilesPut(context.Background(), f, strings.NewReader("hello\n"), &out, loc, &filesOptions{format: "json"}); err != nil || out.String() != `{"path":"/opt/workspace/d","bytes":6}`+"\n" {
		t.Errorf("put: %v %q", err, out.String())
	}
	out.Reset()
	if err := runFilesRm(context.Background(), f, nil, &out, loc, &filesOptions{format: "{{.removed}}"}); err != nil || out.String() != "true\n" {
		t.Errorf("rm: %v %q", err, out.String())
	}
	if d := cmp.Diff([]string{"Cat /opt/workspace/d", "Put /opt/workspace/d 0600", "Put /opt/workspace/d ", "Remove /opt/workspace/d"}, f.calls); d != "" {
		t.Error(d)
	}
	e := errors.New("x")
	if err := runFilesRm(context.Background(), &fakeFiles{err: e}, nil, &out, loc, &filesOptions{}); err != e {
		t.Errorf("rm error: %v", err)
	}
}
