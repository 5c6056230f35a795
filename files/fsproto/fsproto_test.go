package fsproto

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

func TestResolve(t *testing.T) {
	tests := []struct {
		in, space, rel string
		escape         bool
	}{
		{"", WorkspaceDir, ".", false},
		{".", WorkspaceDir, ".", false},
		{"a.txt", WorkspaceDir, "a.txt", false},
		{"./a/b/", WorkspaceDir, "a/b", false},
		{"a/../b", WorkspaceDir, "b", false},
		{"/opt/workspace", WorkspaceDir, ".", false},
		{"/opt/workspace/x/y", WorkspaceDir, "x/y", false},
		{"/opt/user", UserDir, ".", false},
		{"/opt/user/.cache/pip", UserDir, ".cache/pip", false},
		{"../user/x", UserDir, "x", false},
		{"/opt/workspace/../user", UserDir, ".", false},
		// Refused: outside both, or a NUL byte.
		{"../../etc/passwd", "", "", true},
		{"..", "", "", true},
		{"../", "", "", true},
		{"/etc/passwd", "", "", true},
		{"/proc/self/environ", "", "", true},
		{"/proc/1/root/etc/shadow", "", "", true},
		{"/opt/workspacefoo", "", "", true},
		{"/opt/users", "", "", true},
		{"/opt", "", "", true},
		{"/", "", "", true},
		{"/opt/sandbox/sandbox-helper", "", "", true},
		{"/opt/workspace/../../etc", "", "", true},
		{"a\x00b", "", "", true},
		{"/opt/workspace/a\x00/../../../etc", "", "", true},
		{"/tmp/x", "", "", true},
	}
	for _, tc := range tests {
		space, rel, err := Resolve(tc.in)
		if tc.escape {
			var fe *Error
			if !errors.As(err, &fe) || fe.Code != CodePathEscape {
				t.Errorf("Resolve(%q) = %q, %q, %v; want path_escape", tc.in, space, rel, err)
			}
			continue
		}
		if err != nil || space != tc.space || rel != tc.rel {
			t.Errorf("Resolve(%q) = %q, %q, %v; want %q, %q", tc.in, space, rel, err, tc.space, tc.rel)
		}
	}
}

// FuzzResolve: an accepted path lies, lexically, under one of the two
// spaces; the relative part is clean.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"a", "../../etc/passwd", "/etc/passwd", "/proc/self/environ", "a\x00b", "/opt/workspace/../user/x",
		"/opt/workspacex", "....//..", "/opt/user/../../", "./././x", "x/../../opt/user"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		space, rel, err := Resolve(p)
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) || fe.Code != CodePathEscape {
				t.Fatalf("Resolve(%q): %v, want a path_escape error", p, err)
			}
			return
		}
		if strings.IndexByte(p, 0) >= 0 {
			t.Fatalf("Resolve(%q) accepted a NUL byte", p)
		}
		if space != WorkspaceDir && space != UserDir {
			t.Fatalf("Resolve(%q): space %q", p, space)
		}
		if rel != "." && (path.Clean(rel) != rel || path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../")) {
			t.Fatalf("Resolve(%q): rel %q is not clean and local", p, rel)
		}
		full := path.Join(space, rel)
		if full != space && !strings.HasPrefix(full, space+"/") {
			t.Fatalf("Resolve(%q) = %q: outside %s", p, full, space)
		}
		if !filepath.IsLocal(rel) {
			t.Fatalf("Resolve(%q): rel %q is not local", p, rel)
		}
	})
}

// TestIsEscape pins the text of os.Root's escape error that IsEscape
// recognises, for every operation the copy uses.
func TestIsEscape(t *testing.T) {
	dir := t.TempDir()
	out := t.TempDir()
	os.WriteFile(filepath.Join(out, "f"), []byte("x"), 0o644)
	os.Symlink(out, filepath.Join(dir, "abs"))
	os.Symlink("../"+filepath.Base(out), filepath.Join(dir, "rel"))
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, name := range []string{"abs/f", "rel/f", "../x", "abs"} {
		ops := map[string]error{}
		_, ops["stat"] = r.Stat(name)
		_, ops["open"] = r.Open(name)
		_, ops["openroot"] = r.OpenRoot(name)
		ops["mkdirall"] = r.MkdirAll(name+"/sub", 0o755)
		_, ops["create"] = r.OpenFile(name+"/new", os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
		ops["rename"] = r.Rename("nonexistent", name+"/new")
		for op, err := range ops {
			if op == "rename" && name == "abs" {
				continue
			}
			if !IsEscape(err) {
				t.Errorf("%s(%q): %v is not recognised as an escape", op, name, err)
			}
			if fe := FromOS(err, name); fe.Code != CodePathEscape && op != "rename" {
				t.Errorf("%s(%q): FromOS code %q", op, name, fe.Code)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(out, "sub")); err == nil {
		t.Fatal("MkdirAll wrote outside the root")
	}
	if IsEscape(os.ErrNotExist) || IsEscape(nil) {
		t.Fatal("false positive")
	}
}

func TestFromOS(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644)
	r, _ := os.OpenRoot(dir)
	defer r.Close()
	_, err := r.Open("missing")
	if c := FromOS(err, "missing").Code; c != CodeNotFound {
		t.Errorf("missing: %s", c)
	}
	_, err = r.Open("f/x")
	if c := FromOS(err, "f/x").Code; c != CodeNotDirectory {
		t.Errorf("f/x: %s", c)
	}
	own := Errorf(CodeTooLarge, "big")
	if FromOS(own, "x") != own {
		t.Error("an *Error must pass as it is")
	}
}

func TestParseError(t *testing.T) {
	stderr := []byte("some noise\n{\"code\":\"path_escape\",\"message\":\"no\"}\n")
	e := ParseError(stderr)
	if e == nil || e.Code != CodePathEscape || e.Message != "no" {
		t.Fatalf("ParseError: %+v", e)
	}
	if ParseError([]byte("panic: boom")) != nil {
		t.Fatal("no object, no error")
	}
}

func TestCommitFraming(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789"), 300_000) // 3 MB: several chunks
	for _, tc := range []struct {
		name   string
		src    io.Reader
		commit bool
	}{
		{"whole", bytes.NewReader(payload), true},
		{"one byte reads", iotest.OneByteReader(bytes.NewReader(payload[:5000])), true},
		{"empty", bytes.NewReader(nil), true},
		{"source error", io.MultiReader(bytes.NewReader(payload[:100000]), iotest.ErrReader(errors.New("disk on fire"))), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr := NewFramer(tc.src)
			var wire bytes.Buffer
			if _, err := io.Copy(&wire, fr); (err == nil) != tc.commit { // WriteTo
				t.Fatalf("framer: %v", err)
			}
			got, err := io.ReadAll(NewCommitReader(&wire))
			if tc.commit {
				if err != nil {
					t.Fatalf("reader: %v", err)
				}
				if !bytes.HasPrefix(payload, got) || (tc.name == "whole" && len(got) != len(payload)) {
					t.Fatalf("got %d bytes", len(got))
				}
				return
			}
			if !errors.Is(err, ErrNotCommitted) {
				t.Fatalf("an uncommitted stream: %v", err)
			}
		})
	}
	// The Read path frames the same stream as WriteTo.
	var viaWriteTo, viaRead bytes.Buffer
	io.Copy(&viaWriteTo, NewFramer(bytes.NewReader(payload)))
	io.Copy(&viaRead, struct{ io.Reader }{NewFramer(bytes.NewReader(payload))})
	a, _ := io.ReadAll(NewCommitReader(&viaWriteTo))
	b, _ := io.ReadAll(NewCommitReader(&viaRead))
	if !bytes.Equal(a, payload) || !bytes.Equal(b, payload) {
		t.Fatalf("WriteTo and Read disagree: %d and %d bytes", len(a), len(b))
	}
	if _, err := io.ReadAll(NewCommitReader(iotest.OneByteReader(&viaRead))); err == nil {
		// already consumed: nothing left, so not committed
		t.Fatal("an empty stream must not be committed")
	}
	// A writer's stream, cut anywhere before its commit, is never
	// committed.
	var wire bytes.Buffer
	w := NewCommitWriter(&wire)
	w.Write(payload[:3000])
	w.Commit()
	full := wire.Bytes()
	for cut := 0; cut < len(full); cut += 97 {
		if _, err := io.ReadAll(NewCommitReader(bytes.NewReader(full[:cut]))); !errors.Is(err, ErrNotCommitted) {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	if _, err := io.ReadAll(NewCommitReader(bytes.NewReader(full))); err != nil {
		t.Fatal(err)
	}
	bad := []byte{0xff, 0xff, 0xff, 0xff}
	if _, err := io.ReadAll(NewCommitReader(bytes.NewReader(bad))); err == nil {
		t.Fatal("an oversized chunk must fail")
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[os.FileMode]string{0o644: "0644", 0o755 | os.ModeSetuid: "4755", os.ModeDir | 0o1777 | os.ModeSticky: "1777", 0o2750 | os.ModeSetgid: "2750"} {
		if got := ModeString(m); got != want {
			t.Errorf("ModeString(%v) = %q, want %q", m, got, want)
		}
	}
}
