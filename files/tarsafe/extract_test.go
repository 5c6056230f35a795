package tarsafe

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
)

func TestExtractLayouts(t *testing.T) {
	folder := []ent{dir("top"), file("top/a", "A"), dir("top/sub"), file("top/sub/b", "B"), symlink("top/l", "a"), symlink("top/sub/up", "../a")}
	tests := []struct {
		name  string
		setup func(s *sandbox)
		dest  Dest
		ents  []ent
		want  []string
	}{
		{name: "folder to a new path", dest: Dest{Path: "dst"}, ents: folder,
			want: []string{"dst/ 0755", "dst/a 0644 A", "dst/l -> a", "dst/sub/ 0755", "dst/sub/b 0644 B", "dst/sub/up -> ../a"}},
		{name: "folder into an existing folder", setup: func(s *sandbox) { mustWrite(t, filepath.Join(s.base, "dst", "keep"), "K") },
			dest: Dest{Path: "dst"}, ents: folder,
			want: []string{"dst/ 0755", "dst/keep 0644 K", "dst/top/ 0755", "dst/top/a 0644 A", "dst/top/l -> a", "dst/top/sub/ 0755", "dst/top/sub/b 0644 B", "dst/top/sub/up -> ../a"}},
		{name: "folder contents into an existing folder", setup: func(s *sandbox) { mustWrite(t, filepath.Join(s.base, "dst", "a"), "old") },
			dest: Dest{Path: "dst", Contents: true}, ents: folder,
			want: []string{"dst/ 0755", "dst/a 0644 A", "dst/l -> a", "dst/sub/ 0755", "dst/sub/b 0644 B", "dst/sub/up -> ../a"}},
		{name: "merge into existing subfolders", setup: func(s *sandbox) { mustWrite(t, filepath.Join(s.base, "dst", "top", "sub", "c"), "C") },
			dest: Dest{Path: "dst"}, ents: folder,
			want: []string{"dst/ 0755", "dst/top/ 0755", "dst/top/a 0644 A", "dst/top/l -> a", "dst/top/sub/ 0755", "dst/top/sub/b 0644 B", "dst/top/sub/c 0644 C", "dst/top/sub/up -> ../a"}},
		{name: "file to a new path", dest: Dest{Path: "f2"}, ents: []ent{file("f", "F")}, want: []string{"f2 0644 F"}},
		{name: "file into a folder", setup: func(s *sandbox) { os.Mkdir(filepath.Join(s.base, "d"), 0o755) },
			dest: Dest{Path: "d", MustBeDir: true}, ents: []ent{file("f", "F")}, want: []string{"d/ 0755", "d/f 0644 F"}},
		{name: "file over a file", setup: func(s *sandbox) { mustWrite(t, filepath.Join(s.base, "f"), "old") },
			dest: Dest{Path: "f"}, ents: []ent{file("f", "new")}, want: []string{"f 0644 new"}},
		{name: "the base itself", dest: Dest{Path: "."}, ents: []ent{file("f", "F")}, want: []string{"f 0644 F"}},
		{name: "link file", dest: Dest{Path: "l"}, ents: []ent{symlink("x", "y")}, want: []string{"l -> y"}},
		{name: "raw archive", setup: func(s *sandbox) { os.Mkdir(filepath.Join(s.base, "d"), 0o755) },
			dest: Dest{Path: "d", Raw: true}, ents: []ent{dir("./"), file("./a", "A"), file("b/c", "C"), hardlink("b/h", "./a")},
			want: []string{"d/ 0755", "d/a 0644 A", "d/b/ 0755", "d/b/c 0644 C", "d/b/h 0644 A"}},
		{name: "repeated names: the last wins", dest: Dest{Path: "dst"}, ents: []ent{dir("top"), file("top/a", "1"), file("top/a", "2"), symlink("top/a", "x")},
			want: []string{"dst/ 0755", "dst/a -> x"}},
		{name: "read-only folder", dest: Dest{Path: "dst"}, ents: []ent{dir("top"), {name: "top/ro", typ: tar.TypeDir, mode: 0o555}, file("top/ro/f", "F")},
			want: []string{"dst/ 0755", "dst/ro/ 0555", "dst/ro/f 0644 F"}},
		{name: "umask", dest: Dest{Path: "dst"}, ents: []ent{{name: "top", typ: tar.TypeDir, mode: 0o777}, {name: "top/x", typ: tar.TypeReg, mode: 0o777, body: "X"}},
			want: []string{"dst/ 0755", "dst/x 0755 X"}},
		{name: "implicit parents", dest: Dest{Path: "dst"}, ents: []ent{dir("top"), file("top/p/q/f", "F")},
			want: []string{"dst/ 0755", "dst/p/ 0755", "dst/p/q/ 0755", "dst/p/q/f 0644 F"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			if tc.setup != nil {
				tc.setup(s)
			}
			if _, err := s.extract(tc.dest, mkTar(t, tc.ents...), Options{Umask: 0o022}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, tree(t, s.base)); diff != "" {
				t.Errorf("destination (-want +got):\n%s", diff)
			}
			s.checkCanary()
			s.noStaging()
		})
	}
}

func TestExtractKeepsModesAndTimes(t *testing.T) {
	s := newSandbox(t)
	ents := []ent{{name: "top", typ: tar.TypeDir, mode: 0o750}, {name: "top/x", typ: tar.TypeReg, mode: 0o4777, body: "X"}, {name: "top/g", typ: tar.TypeReg, mode: 0o2640, body: "G"}}
	res, err := s.extract(Dest{Path: "dst"}, mkTar(t, ents...), Options{KeepMode: true, Umask: 0o077})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"dst/ 0750", "dst/g 0640 G", "dst/x 0777 X"}
	if diff := cmp.Diff(want, tree(t, s.base)); diff != "" {
		t.Errorf("modes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"top/x", "top/g"}, res.Stripped); diff != "" {
		t.Errorf("stripped (-want +got):\n%s", diff)
	}
	fi, err := os.Stat(filepath.Join(s.base, "dst", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if !fi.ModTime().Equal(testTime) {
		t.Errorf("mtime %v, want %v", fi.ModTime(), testTime)
	}
}

// TestExtractHostile: every refused archive leaves the destination as it
// was, writes nothing outside it and leaves no staging folder.
func TestExtractHostile(t *testing.T) {
	big := int64(100) << 30
	tests := []struct {
		name   string
		setup  func(s *sandbox)
		dest   Dest
		ents   []ent
		data   func(s *sandbox) []byte // instead of ents
		lim    Limits
		strict bool
		code   string
		// want is the base folder afterwards (nil: empty).
		want []string
	}{
		{name: "dotdot", dest: Dest{Path: "dst"}, ents: []ent{dir("top"), file("top/../../evil", "E")}, code: fsproto.CodePathEscape},
		{name: "dotdot raw", setup: mkdirDst, dest: Dest{Path: "dst", Raw: true}, ents: []ent{file("../evil", "E")}, code: fsproto.CodePathEscape, want: []string{"dst/ 0755"}},
		{name: "dotdot in the middle", setup: mkdirDst, dest: Dest{Path: "dst", Raw: true}, ents: []ent{file("a/../../canary/secret", "E")}, code: fsproto.CodePathEscape, want: []string{"dst/ 0755"}},
		{name: "absolute", setup: mkdirDst, dest: Dest{Path: "dst", Raw: true}, ents: []ent{file("ok", "1"), file("/abs", "E")}, code: fsproto.CodePathEscape, want: []string{"dst/ 0755"}},
		{name: "absolute to the canary", setup: mkdirDst, dest: Dest{Path: "dst", Raw: true}, data: func(s *sandbox) []byte {
			return mkTar(t, file(filepath.Join(s.canary, "secret"), "E"))
		}, code: fsproto.CodePathEscape, want: []string{"dst/ 0755"}},
		{name: "entry outside the top folder", dest: Dest{Path: "dst"}, ents: []ent{dir("top"), file("other", "E")}, code: fsproto.CodePathEscape},
		{name: "second entry of a file copy", dest: Dest{Path: "f"}, ents: []ent{file("f", "F"), file("g", "E")}, code: fsproto.CodePathEscape},
		{name: "absolute symlink, strict", strict: true, dest: Dest{Path: "dst"}, ents: []ent{dir("top"), file("top/a", "A"), symlink("top/out", "/etc")}, code: fsproto.CodePathEscape},
		{name: "symlink up and out, strict", strict: true, dest: Dest{Path: "dst"}, ents: []ent{dir("top"), file("top/a", "A"), symlink("top/out2", "../../..")}, code: fsproto.CodePathEscape},
		{name: "symlink up to the destination, into an existing folder, strict", strict: true, setup: mkdirDst, dest: Dest{Path: "dst"}, ents: []ent{dir("top"), symlink("top/up", "../x")},
			code: fsproto.CodePathEscape, want: []string{"dst/ 0755"}},
		{name: "symlink chain out, raw, strict", strict: true, setup: mkdirDst, dest: Dest{Path: "dst", Raw: true}, ents: []ent{dir("a"), symlink("a/s", "."), dir("a/s/b"), symlink("a/s/b/l", "../../../x")},
			code: fsproto.CodePathEscape, want: []string{"dst/ 0755"}},
		{name: "symlink out then a file through it, not strict", dest: Dest{Path: "dst"}, ents: []ent{dir("top"), symlink("top/out", "/etc"), file("top/out/passwd", "E")}, code: fsproto.CodePathEscape},
		{name: "symlink out then a file through it", dest: Dest{Path: "dst"}, data: func(s *sandbox) []byte {
			return mkTar(t, dir("top"), symlink("top/link", s.canary), file("top/link/x", "E"))
		}, code: fsproto.CodePathEscape},
		{name: "relative symlink to the canary then a file through it", dest: Dest{Path: "dst"}, ents: []ent{dir("top"), symlink("top/link", "../canary"), file("top/link/x", "E")}, code: fsproto.CodePathEscape},
		{name: "symlink with .. after a name", dest: Dest{Path: "dst"}, ents: []ent{dir("top"), dir("top/sub"), symlink("top/sub/x", ".."), symlink("top/sub/y", "x/../.."), file("top/sub/y/evil", "E")}, code: fsproto.CodePathEscape},
		{name: "single symlink leading out", dest: Dest{Path: "l"}, ents: []ent{symlink("l", "../canary")}, code: fsproto.CodePathEscape},
		{name: "hard link to an absolute path", setup: mkdirDst, dest: Dest{Path: "dst", Raw: true}, ents: []ent{hardlink("h", "/etc/shadow")}, code: fsproto.CodePathEscape, want: []string{"dst/ 0755"}},
		{name: "hard link up", setup: mkdirDst, dest: Dest{Path: "dst", Raw: true}, ents: []ent{hardlink("h", "../canary/secret")}, code: fsproto.CodePathEscape, want: []string{"dst/ 0755"}},
		{name: "hard link to a file the copy did not write", setup: func(s *sandbox) { mustWrite(t, filepath.Join(s.base, "dst", "mine"), "M") },
			dest: Dest{Path: "dst", Raw: true}, ents: []ent{hardlink("h", "mine")}, code: fsproto.CodePathEscape, want: []string{"dst/ 0755", "dst/mine 0644 M"}},
		{name: "hard link as a single file", dest: Dest{Path: "h"}, ents: []ent{hardlink("h", "x")}, code: fsproto.CodePathEscape},
		{name: "existing link to the outside in the destination", setup: func(s *sandbox) {
			os.Mkdir(filepath.Join(s.base, "dst"), 0o755)
			os.Symlink(s.canary, filepath.Join(s.base, "dst", "sub"))
		}, dest: Dest{Path: "dst", Contents: true}, ents: []ent{dir("top"), dir("top/sub"), file("top/sub/file", "E")}, code: fsproto.CodePathEscape,
			want: []string{"dst/ 0755", "dst/sub -> CANARY"}},
		{name: "existing relative link to the outside", setup: func(s *sandbox) {
			os.Mkdir(filepath.Join(s.base, "dst"), 0o755)
			os.Symlink("../../canary", filepath.Join(s.base, "dst", "sub"))
		}, dest: Dest{Path: "dst", Contents: true}, ents: []ent{dir("top"), file("top/ok", "1"), dir("top/sub"), file("top/sub/file", "E")}, code: fsproto.CodePathEscape,
			want: []string{"dst/ 0755", "dst/sub -> ../../canary"}},
		{name: "file over a folder", setup: func(s *sandbox) { mustWrite(t, filepath.Join(s.base, "dst", "f", "keep"), "K") },
			dest: Dest{Path: "dst"}, ents: []ent{file("f", "E")}, code: fsproto.CodeIsDirectory, want: []string{"dst/ 0755", "dst/f/ 0755", "dst/f/keep 0644 K"}},
		{name: "folder over a file", setup: func(s *sandbox) { mustWrite(t, filepath.Join(s.base, "dst"), "K") },
			dest: Dest{Path: "dst"}, ents: []ent{dir("top")}, code: fsproto.CodeNotDirectory, want: []string{"dst 0644 K"}},
		{name: "missing folder with a slash", dest: Dest{Path: "nope", MustBeDir: true}, ents: []ent{file("f", "F")}, code: fsproto.CodeNotFound},
		{name: "missing parent", dest: Dest{Path: "a/b"}, ents: []ent{file("f", "F")}, code: fsproto.CodeNotFound},
		{name: "sparse 100 GiB file", dest: Dest{Path: "dst"}, ents: []ent{dir("top"), file("top/small", "s"), {name: "top/big", typ: tar.TypeReg, mode: 0o644, size: big}}, code: fsproto.CodeTooLarge},
		{name: "sparse 100 GiB single file", dest: Dest{Path: "big"}, ents: []ent{{name: "big", typ: tar.TypeReg, mode: 0o644, size: big}}, code: fsproto.CodeTooLarge},
		{name: "total cap", dest: Dest{Path: "dst"}, lim: Limits{MaxBytes: 10}, ents: []ent{dir("top"), file("top/a", "123456"), file("top/b", "123456")}, code: fsproto.CodeTooLarge},
		{name: "per-file cap", dest: Dest{Path: "dst"}, lim: Limits{MaxEntryBytes: 5}, ents: []ent{dir("top"), file("top/a", "1234"), file("top/b", "123456")}, code: fsproto.CodeTooLarge},
		{name: "entry cap", dest: Dest{Path: "dst"}, lim: Limits{MaxEntries: 3}, ents: []ent{dir("top"), file("top/a", ""), file("top/b", ""), file("top/c", "")}, code: fsproto.CodeTooLarge},
		{name: "caps into an existing folder leave it as it was", setup: func(s *sandbox) { mustWrite(t, filepath.Join(s.base, "dst", "a"), "old") },
			dest: Dest{Path: "dst", Contents: true}, lim: Limits{MaxBytes: 10}, ents: []ent{dir("top"), file("top/a", "new"), file("top/b", "12345678")}, code: fsproto.CodeTooLarge,
			want: []string{"dst/ 0755", "dst/a 0644 old"}},
		{name: "truncated", dest: Dest{Path: "dst"}, data: func(s *sandbox) []byte {
			b := mkTar(t, dir("top"), file("top/a", strings.Repeat("x", 5000)))
			return b[:1500]
		}, code: fsproto.CodeBadArchive},
		{name: "empty", dest: Dest{Path: "dst"}, data: func(s *sandbox) []byte { return nil }, code: fsproto.CodeBadArchive},
		{name: "garbage", dest: Dest{Path: "dst"}, data: func(s *sandbox) []byte { return bytes.Repeat([]byte("garbage!"), 200) }, code: fsproto.CodeBadArchive},
		{name: "trailing garbage", dest: Dest{Path: "dst"}, data: func(s *sandbox) []byte {
			return append(mkTar(t, dir("top")), make([]byte, maxTrailing+4096)...)
		}, code: fsproto.CodeBadArchive},
		{name: "top with a slash", dest: Dest{Path: "dst"}, ents: []ent{file("a/b", "E")}, code: fsproto.CodeBadArchive},
		{name: "long name", dest: Dest{Path: "dst"}, ents: []ent{dir("top"), file("top/"+strings.Repeat("n/", 2100)+"f", "E")}, code: fsproto.CodeBadArchive},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			if tc.setup != nil {
				tc.setup(s)
			}
			data := tc.data
			if data == nil {
				data = func(*sandbox) []byte { return mkTar(t, tc.ents...) }
			}
			_, err := s.extract(tc.dest, data(s), Options{Limits: tc.lim, Umask: 0o022, Strict: tc.strict})
			if got := codeOf(err); got != tc.code {
				t.Fatalf("error code %q, want %q (%v)", got, tc.code, err)
			}
			got := tree(t, s.base)
			for i, g := range got {
				got[i] = strings.ReplaceAll(g, s.canary, "CANARY")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("the destination changed (-want +got):\n%s", diff)
			}
			s.checkCanary()
		})
	}
}

func mkdirDst(s *sandbox) { os.Mkdir(filepath.Join(s.base, "dst"), 0o755) }

func TestExtractSkipsDevicesAndStripsBits(t *testing.T) {
	s := newSandbox(t)
	mkdirDst(s)
	data := mkTar(t, special("tty", tar.TypeChar), special("sda", tar.TypeBlock), special("fifo", tar.TypeFifo),
		ent{name: "sock", typ: tar.TypeFifo, pax: map[string]string{PAXType: fsproto.TypeSocket}},
		ent{name: "su", typ: tar.TypeReg, mode: 0o4755, body: "#!"}, ent{name: "sticky", typ: tar.TypeDir, mode: 0o1777},
		ent{name: "odd", typ: 'Z'})
	res, err := s.extract(Dest{Path: "dst", Raw: true}, data, Options{Umask: 0o022})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"dst/ 0755", "dst/sticky/ 0755", "dst/su 0755 #!"}, tree(t, s.base)); diff != "" {
		t.Errorf("destination (-want +got):\n%s", diff)
	}
	want := []Skipped{
		{Name: "tty", Type: "char-device", Reason: "devices, FIFOs and sockets are not copied"},
		{Name: "sda", Type: "block-device", Reason: "devices, FIFOs and sockets are not copied"},
		{Name: "fifo", Type: "fifo", Reason: "devices, FIFOs and sockets are not copied"},
		{Name: "sock", Type: "socket", Reason: "devices, FIFOs and sockets are not copied"},
		{Name: "odd", Type: `type 'Z'`, Reason: "unsupported entry type"},
	}
	if diff := cmp.Diff(want, res.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"su", "sticky"}, res.Stripped); diff != "" {
		t.Errorf("stripped (-want +got):\n%s", diff)
	}
	s.checkCanary()
}

// TestExtractReplacesLinksInsteadOfWritingThrough: an existing hard link or
// symbolic link where the copy writes a file is replaced, and what it led
// to is untouched.
func TestExtractReplacesLinksInsteadOfWritingThrough(t *testing.T) {
	s := newSandbox(t)
	mkdirDst(s)
	secret := filepath.Join(s.canary, "secret")
	if err := os.Link(secret, filepath.Join(s.base, "dst", "hard")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(s.base, "dst", "soft")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"hard", "soft"} {
		if _, err := s.extract(Dest{Path: "dst"}, mkTar(t, file(name, "new")), Options{}); err != nil {
			t.Fatal(err)
		}
	}
	data := mkTar(t, dir("top"), file("top/hard", "new2"), file("top/soft", "new2"))
	if _, err := s.extract(Dest{Path: "dst", Contents: true}, data, Options{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"dst/ 0755", "dst/hard 0644 new2", "dst/soft 0644 new2"}, tree(t, s.base)); diff != "" {
		t.Errorf("destination (-want +got):\n%s", diff)
	}
	s.checkCanary()
}

// TestExtractFollowsLinksInside: a link of the destination that stays
// inside it is followed (merge into its target).
func TestExtractFollowsLinksInside(t *testing.T) {
	s := newSandbox(t)
	mustWrite(t, filepath.Join(s.base, "dst", "real", "keep"), "K")
	if err := os.Symlink("real", filepath.Join(s.base, "dst", "sub")); err != nil {
		t.Fatal(err)
	}
	data := mkTar(t, dir("top"), dir("top/sub"), file("top/sub/file", "F"))
	if _, err := s.extract(Dest{Path: "dst", Contents: true}, data, Options{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"dst/ 0755", "dst/real/ 0755", "dst/real/file 0644 F", "dst/real/keep 0644 K", "dst/sub -> real"}
	if diff := cmp.Diff(want, tree(t, s.base)); diff != "" {
		t.Errorf("destination (-want +got):\n%s", diff)
	}
}

// TestExtractSenderError: a stream that fails (the sender's error, or an
// upload that was not committed) is returned as it is and leaves nothing.
func TestExtractSenderError(t *testing.T) {
	boom := fsproto.Errorf(fsproto.CodePathEscape, "the sender refused")
	for _, tc := range []struct {
		name string
		r    func(data []byte) io.Reader
		want error
	}{
		{"sender error", func(d []byte) io.Reader { return io.MultiReader(bytes.NewReader(d[:len(d)-1024]), errReader{boom}) }, boom},
		{"after the end", func(d []byte) io.Reader { return io.MultiReader(bytes.NewReader(d), errReader{boom}) }, boom},
		{"not committed", func(d []byte) io.Reader {
			var buf bytes.Buffer
			w := fsproto.NewCommitWriter(&buf)
			w.Write(d)
			return fsproto.NewCommitReader(&buf)
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			data := mkTar(t, dir("top"), file("top/a", "A"), file("top/b", strings.Repeat("b", 3000)))
			_, err := Extract(s.root, Dest{Path: "dst"}, tc.r(data), Options{})
			if err == nil {
				t.Fatal("no error")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want the sender's %v", err, tc.want)
			}
			if got := tree(t, s.base); len(got) != 0 {
				t.Fatalf("the failed copy left %q", got)
			}
		})
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestCleanName(t *testing.T) {
	tests := []struct{ in, want, code string }{
		{"a", "a", ""}, {"./a/b/", "a/b", ""}, {"a//b", "a/b", ""}, {".", "", ""}, {"./", "", ""},
		{"", "", fsproto.CodeBadArchive}, {"/a", "", fsproto.CodePathEscape}, {"..", "", fsproto.CodePathEscape},
		{"a/../b", "", fsproto.CodePathEscape}, {"a/..", "", fsproto.CodePathEscape}, {"a\x00b", "", fsproto.CodePathEscape},
		{strings.Repeat("a", MaxNameLen+1), "", fsproto.CodeBadArchive}, {"...", "...", ""}, {"a\\..\\b", "a\\..\\b", ""},
	}
	for _, tc := range tests {
		got, err := CleanName(tc.in)
		if codeOf(err) != tc.code || got != tc.want {
			t.Errorf("CleanName(%q) = %q, %v; want %q, code %q", tc.in, got, err, tc.want, tc.code)
		}
	}
}

func TestLinkInside(t *testing.T) {
	tests := []struct {
		name, target string
		want         bool
	}{
		{"l", "x", true}, {"l", "./x", true}, {"l", ".", true}, {"l", "..", false}, {"l", "../x", false},
		{"a/l", "..", true}, {"a/l", "../x", true}, {"a/l", "../../x", false}, {"a/b/l", "../../x/y", true},
		{"a/l", "/etc", false}, {"a/l", "", false}, {"a/l", "x/../y", false}, {"a/b/l", "x/../../y", false},
		{"a/l", "x\x00", false}, {"a/l", "x/./y/", true},
	}
	for _, tc := range tests {
		if got := LinkInside(tc.name, tc.target); got != tc.want {
			t.Errorf("LinkInside(%q, %q) = %v, want %v", tc.name, tc.target, got, tc.want)
		}
	}
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 2 << 30: "2 GiB", 100 << 30: "100 GiB"} {
		if got := HumanSize(n); got != want {
			t.Errorf("HumanSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// venvEnts is a tree shaped like a Python virtualenv or a node_modules
// folder: links that stay inside (relative, up to the copied folder, a
// dangling one, a chain) and links that lead outside (absolute, to /proc
// and /etc, climbing out with "..", dangling outside, and a chain that ends
// on a link that is not written).
func venvEnts() []ent {
	return []ent{
		dir("venv"), dir("venv/bin"), file("venv/bin/activate", "A"),
		symlink("venv/bin/python", "/usr/bin/python3"),
		symlink("venv/bin/python3", "python"),
		symlink("venv/bin/py", "./python3"),
		dir("venv/lib"), dir("venv/lib/site"), file("venv/lib/site/pkg.py", "P"),
		symlink("venv/lib64", "lib"),
		symlink("venv/lib/site/bin", "../../bin"),
		symlink("venv/lib/etc", "../../etc"),
		symlink("venv/lib/up", ".."),
		symlink("venv/environ", "/proc/self/environ"),
		symlink("venv/passwd", "/etc/passwd"),
		symlink("venv/dangling", "nothing"),
		symlink("venv/dangling-out", "../nothing"),
		symlink("venv/chain", "bin/py"),
		symlink("venv/lib/deep", "site/../../../x"),
	}
}

var venvSkipped = []Skipped{
	{Name: "venv/bin/python", Type: "symlink", Reason: ReasonLinkAbsolute, LinkTarget: "/usr/bin/python3"},
	{Name: "venv/lib/etc", Type: "symlink", Reason: ReasonLinkOut, LinkTarget: "../../etc"},
	{Name: "venv/environ", Type: "symlink", Reason: ReasonLinkAbsolute, LinkTarget: "/proc/self/environ"},
	{Name: "venv/passwd", Type: "symlink", Reason: ReasonLinkAbsolute, LinkTarget: "/etc/passwd"},
	{Name: "venv/dangling-out", Type: "symlink", Reason: ReasonLinkOut, LinkTarget: "../nothing"},
	{Name: "venv/lib/deep", Type: "symlink", Reason: ReasonLinkOut, LinkTarget: "site/../../../x"},
}

// venvTree is what a copy of venvEnts writes, under prefix.
func venvTree(prefix string) []string {
	out := []string{prefix + "/ 0755"}
	for _, e := range []string{"bin/ 0755", "bin/activate 0644 A", "bin/py -> ./python3", "bin/python3 -> python",
		"chain -> bin/py", "dangling -> nothing", "lib/ 0755", "lib/site/ 0755", "lib/site/bin -> ../../bin",
		"lib/site/pkg.py 0644 P", "lib/up -> ..", "lib64 -> lib"} {
		out = append(out, prefix+"/"+e)
	}
	sort.Strings(out)
	return out
}

// TestExtractSkipsLinksThatLeadOut: a copy of a tree full of links
// completes; the links that stay inside the copied tree are written as they
// are, the ones that lead outside are not written and are each reported;
// Strict refuses the copy and leaves nothing. Whatever the destination's
// shape, nothing outside it changes.
func TestExtractSkipsLinksThatLeadOut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(s *sandbox)
		dest   Dest
		prefix string // where the tree lands
		before []string
	}{
		{name: "new destination", dest: Dest{Path: "dst"}, prefix: "dst"},
		{name: "into an existing folder", setup: mkdirDst, dest: Dest{Path: "dst"}, prefix: "dst/venv", before: []string{"dst/ 0755"}},
		{name: "contents into an existing folder", setup: func(s *sandbox) { mustWrite(t, filepath.Join(s.base, "dst", "mine"), "M") },
			dest: Dest{Path: "dst", Contents: true}, prefix: "dst", before: []string{"dst/ 0755", "dst/mine 0644 M"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			if tc.setup != nil {
				tc.setup(s)
			}
			res, err := s.extract(tc.dest, mkTar(t, venvEnts()...), Options{Umask: 0o022})
			if err != nil {
				t.Fatal(err)
			}
			want := venvTree(tc.prefix)
			switch tc.name {
			case "contents into an existing folder":
				want = append(want[1:], "dst/ 0755", "dst/mine 0644 M")
			case "into an existing folder":
				want = append(want, "dst/ 0755")
			}
			sort.Strings(want)
			if diff := cmp.Diff(want, tree(t, s.base)); diff != "" {
				t.Errorf("destination (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(venvSkipped, res.Skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
			if res.SkippedCount != int64(len(venvSkipped)) || res.Symlinks != 7 || res.Files != 2 {
				t.Errorf("result %+v", res)
			}
			s.checkCanary()
			s.noStaging()
			checkLinksInside(t, filepath.Join(s.base, tc.prefix))

			// Strict: refused, nothing left.
			s2 := newSandbox(t)
			if tc.setup != nil {
				tc.setup(s2)
			}
			if _, err := s2.extract(tc.dest, mkTar(t, venvEnts()...), Options{Strict: true}); codeOf(err) != fsproto.CodePathEscape {
				t.Fatalf("strict: %v, want path_escape", err)
			}
			if diff := cmp.Diff(tc.before, tree(t, s2.base)); diff != "" {
				t.Errorf("strict: the destination changed (-want +got):\n%s", diff)
			}
			s2.checkCanary()
		})
	}
	// Raw (cp - DST): the archive's root is the destination folder.
	s := newSandbox(t)
	mkdirDst(s)
	// A chain that only resolves outside once written: d/s -> . puts
	// d/s/b/l at d/b/l, where ../../../x leads out of the destination.
	res, err := s.extract(Dest{Path: "dst", Raw: true}, mkTar(t, file("a", "A"), symlink("l", "a"), symlink("up", "../a"), symlink("abs", "/a"),
		dir("d"), symlink("d/s", "."), dir("d/s/b"), symlink("d/s/b/l", "../../../x")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"dst/ 0755", "dst/a 0644 A", "dst/d/ 0755", "dst/d/b/ 0755", "dst/d/s -> .", "dst/l -> a"}, tree(t, s.base)); diff != "" {
		t.Errorf("raw (-want +got):\n%s", diff)
	}
	want := []Skipped{
		{Name: "up", Type: "symlink", Reason: ReasonLinkOut, LinkTarget: "../a"},
		{Name: "abs", Type: "symlink", Reason: ReasonLinkAbsolute, LinkTarget: "/a"},
		{Name: "d/b/l", Type: "symlink", Reason: ReasonLinkChain, LinkTarget: "../../../x"},
	}
	if diff := cmp.Diff(want, res.Skipped); diff != "" {
		t.Errorf("raw skipped (-want +got):\n%s", diff)
	}
	s.checkCanary()
	checkLinksInside(t, filepath.Join(s.base, "dst"))
}

// checkLinksInside fails when a link below root resolves outside it.
func checkLinksInside(t *testing.T, root string) {
	t.Helper()
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := walkLinks(r, ".", 0, func(p string, out bool) error {
		if out {
			t.Errorf("%s leads outside %s", p, root)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestExtractLinksWhereTheyLand: a link of the destination that stays
// inside it (planted by an earlier copy: dst/sub -> .) is followed by the
// merge, so what the copy holds under sub/ lands one level higher; a
// relative link that looked inside in the staging folder then leads out of
// the destination. It is removed and reported (Strict: refused).
func TestExtractLinksWhereTheyLand(t *testing.T) {
	setup := func(s *sandbox) {
		mustWrite(t, filepath.Join(s.base, "x"), "next to the destination")
		mkdirDst(s)
		os.Symlink(".", filepath.Join(s.base, "dst", "sub"))
	}
	data := func() []byte {
		return mkTar(t, dir("top"), dir("top/sub"), symlink("top/sub/l", "../x"), file("top/sub/f", "F"),
			dir("top/sub/new"), symlink("top/sub/new/l2", "../../x"), symlink("top/sub/ok", "f"))
	}
	s := newSandbox(t)
	setup(s)
	res, err := s.extract(Dest{Path: "dst", Contents: true}, data(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"dst/ 0755", "dst/f 0644 F", "dst/new/ 0755", "dst/ok -> f", "dst/sub -> .", "x 0644 next to the destination"}
	if diff := cmp.Diff(want, tree(t, s.base)); diff != "" {
		t.Errorf("destination (-want +got):\n%s", diff)
	}
	wantSkipped := []Skipped{
		{Name: "top/sub/l", Type: "symlink", Reason: ReasonLinkLanded, LinkTarget: "../x"},
		{Name: "top/sub/new/l2", Type: "symlink", Reason: ReasonLinkLanded, LinkTarget: "../../x"},
	}
	if diff := cmp.Diff(wantSkipped, res.Skipped, cmpopts.SortSlices(func(a, b Skipped) bool { return a.Name < b.Name })); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if res.Symlinks != 1 {
		t.Errorf("result %+v", res)
	}
	checkLinksInside(t, filepath.Join(s.base, "dst"))
	s.checkCanary()

	s = newSandbox(t)
	setup(s)
	if _, err := s.extract(Dest{Path: "dst", Contents: true}, data(), Options{Strict: true}); codeOf(err) != fsproto.CodePathEscape {
		t.Fatalf("strict: %v", err)
	}
	checkLinksInside(t, filepath.Join(s.base, "dst"))
	s.checkCanary()
}

// TestSkippedExactBytes: a name or link target that is not UTF-8 is kept
// exactly in the *_bytes fields.
func TestSkippedExactBytes(t *testing.T) {
	sk := NewSkipped("a\xffb", "symlink", "r", "/t\xfe")
	if string(sk.NameBytes) != "a\xffb" || string(sk.LinkTargetBytes) != "/t\xfe" {
		t.Fatalf("%+v", sk)
	}
	if sk := NewSkipped("ok", "fifo", "r", ""); sk.NameBytes != nil || sk.LinkTargetBytes != nil {
		t.Fatalf("%+v", sk)
	}
}

// TestExtractWhenALinkIsSwappedIn: extracting into an existing folder that
// sandboxed code controls (the helper's tar-in), the code swaps a folder of
// the destination for a link to an existing folder outside after the
// checks: right before the merge starts, right before it moves entries into
// that folder, or right before the folders' modes are set. Nothing goes through the link: the folder it
// leads to keeps its entries, contents and mode.
func TestExtractWhenALinkIsSwappedIn(t *testing.T) {
	for _, stage := range []string{"merge", "merge-dir", "modes"} {
		t.Run(stage, func(t *testing.T) {
			s := newSandbox(t)
			outside := filepath.Join(s.top, "outside")
			mustWrite(t, filepath.Join(outside, "f"), "OUTSIDE")
			mustWrite(t, filepath.Join(outside, "keep"), "KEEP")
			os.Chmod(outside, 0o755)
			mustWrite(t, filepath.Join(s.base, "dst", "sub", "mine"), "M")
			before := tree(t, outside)
			fi, _ := os.Stat(outside)
			swapped := 0
			testHookExtract = func(st, name string) {
				if st != stage || st == "merge-dir" && name != "sub" {
					return
				}
				swapped++
				p := filepath.Join(s.base, "dst", "sub")
				if err := os.Rename(p, p+".real"); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(outside, p); err != nil {
					t.Error(err)
				}
			}
			defer func() { testHookExtract = nil }()
			data := mkTar(t, dir("top"), ent{name: "top/sub", typ: tar.TypeDir, mode: 0o500}, file("top/sub/f", "EVIL"), file("top/sub/new", "EVIL"))
			_, err := s.extract(Dest{Path: "dst", Contents: true}, data, Options{KeepMode: true})
			if swapped != 1 {
				t.Fatalf("the swap ran %d times", swapped)
			}
			if err != nil && codeOf(err) != fsproto.CodePathEscape {
				t.Errorf("extract: %v, want success or path_escape", err)
			}
			if diff := cmp.Diff(before, tree(t, outside)); diff != "" {
				t.Errorf("the folder outside changed (-before +after):\n%s", diff)
			}
			if fi2, _ := os.Stat(outside); fi2.Mode() != fi.Mode() {
				t.Errorf("the folder outside changed mode: %v, was %v", fi2.Mode(), fi.Mode())
			}
			if got := tree(t, s.canary); len(got) != 1 || got[0] != "secret 0644 secret" {
				t.Errorf("the canary changed: %q", got)
			}
		})
	}
}

// Options.Host: on the user's machine nothing is written through a link the
// destination has, wherever it lies (the reported attack: a first copy out
// plants `results -> .ssh`, a second copies a folder `results` holding
// authorized_keys), and no link of a copy lands in a folder that was there
// before it; links land in folders the copy creates. Without Host (the
// sandbox's side) a link inside the destination is followed, as before.
func TestExtractHostLinks(t *testing.T) {
	ssh := func(s *sandbox) {
		mustWrite(t, filepath.Join(s.base, "home", ".ssh", "authorized_keys"), "mine")
		mustWrite(t, filepath.Join(s.base, "home", ".git", "hooks", "keep"), "K")
	}
	for _, tc := range []struct {
		name    string
		setup   func(s *sandbox)
		dest    Dest
		ents    []ent
		code    string   // the error's code; "" for none
		want    []string // the tree under home afterwards
		skipped []string
	}{
		{name: "a folder onto a planted link to a folder", setup: func(s *sandbox) {
			ssh(s)
			must(t, os.Symlink(".ssh", filepath.Join(s.base, "home", "results")))
		}, dest: Dest{Path: "home"}, ents: []ent{dir("results"), file("results/authorized_keys", "evil")}, code: fsproto.CodePathEscape,
			want: []string{"home/ 0755", "home/.git/ 0755", "home/.git/hooks/ 0755", "home/.git/hooks/keep 0644 K", "home/.ssh/ 0755", "home/.ssh/authorized_keys 0644 mine", "home/results -> .ssh"}},
		{name: "a nested planted link", setup: func(s *sandbox) {
			ssh(s)
			mustWrite(t, filepath.Join(s.base, "home", "out", "a"), "A")
			must(t, os.Symlink("../.git/hooks", filepath.Join(s.base, "home", "out", "hooks")))
		}, dest: Dest{Path: "home"}, ents: []ent{dir("out"), dir("out/hooks"), {name: "out/hooks/pre-commit", typ: tar.TypeReg, mode: 0o755, body: "evil"}}, code: fsproto.CodePathEscape,
			want: []string{"home/ 0755", "home/.git/ 0755", "home/.git/hooks/ 0755", "home/.git/hooks/keep 0644 K", "home/.ssh/ 0755", "home/.ssh/authorized_keys 0644 mine", "home/out/ 0755", "home/out/a 0644 A", "home/out/hooks -> ../.git/hooks"}},
		{name: "contents: a link into an existing folder is left out", setup: ssh,
			dest: Dest{Path: "home", Contents: true}, ents: []ent{dir("top"), file("top/f", "F"), symlink("top/x", ".ssh"), dir("top/new"), symlink("top/new/l", "../f")},
			want:    []string{"home/ 0755", "home/.git/ 0755", "home/.git/hooks/ 0755", "home/.git/hooks/keep 0644 K", "home/.ssh/ 0755", "home/.ssh/authorized_keys 0644 mine", "home/f 0644 F", "home/new/ 0755", "home/new/l -> ../f"},
			skipped: []string{"top/x"}},
		{name: "the copied path is a link", setup: ssh, dest: Dest{Path: "home"}, ents: []ent{symlink("report.txt", ".bashrc")}, code: fsproto.CodePathEscape,
			want: []string{"home/ 0755", "home/.git/ 0755", "home/.git/hooks/ 0755", "home/.git/hooks/keep 0644 K", "home/.ssh/ 0755", "home/.ssh/authorized_keys 0644 mine"}},
		{name: "a new folder keeps its links", setup: ssh, dest: Dest{Path: "home"}, ents: []ent{dir("venv"), file("venv/python3", "P"), symlink("venv/python", "python3")},
			want: []string{"home/ 0755", "home/.git/ 0755", "home/.git/hooks/ 0755", "home/.git/hooks/keep 0644 K", "home/.ssh/ 0755", "home/.ssh/authorized_keys 0644 mine", "home/venv/ 0755", "home/venv/python -> python3", "home/venv/python3 0644 P"}},
		{name: "a file over a planted link replaces the link", setup: func(s *sandbox) {
			ssh(s)
			must(t, os.Symlink(".ssh/authorized_keys", filepath.Join(s.base, "home", "report.txt")))
		}, dest: Dest{Path: "home"}, ents: []ent{file("report.txt", "R")},
			want: []string{"home/ 0755", "home/.git/ 0755", "home/.git/hooks/ 0755", "home/.git/hooks/keep 0644 K", "home/.ssh/ 0755", "home/.ssh/authorized_keys 0644 mine", "home/report.txt 0644 R"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			tc.setup(s)
			res, err := s.extract(tc.dest, mkTar(t, tc.ents...), Options{Umask: 0o022, Host: true})
			if codeOf(err) != tc.code {
				t.Fatalf("error %v, want code %q", err, tc.code)
			}
			if d := cmp.Diff(tc.want, tree(t, s.base)); d != "" {
				t.Errorf("home (-want +got):\n%s", d)
			}
			if res != nil || tc.skipped != nil {
				var got []string
				if res != nil {
					for _, sk := range res.Skipped {
						got = append(got, sk.Name)
						if sk.Reason != ReasonLinkExisting {
							t.Errorf("skipped %s: %s", sk.Name, sk.Reason)
						}
					}
				}
				if d := cmp.Diff(tc.skipped, got); d != "" {
					t.Errorf("skipped (-want +got):\n%s", d)
				}
			}
			s.checkCanary()
			s.noStaging()
		})
	}
	// The sandbox's side follows a link inside the destination, as before.
	s := newSandbox(t)
	ssh(s)
	must(t, os.Symlink(".ssh", filepath.Join(s.base, "home", "results")))
	if _, err := s.extract(Dest{Path: "home"}, mkTar(t, dir("results"), file("results/k2", "x")), Options{Umask: 0o022}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(s.base, "home", ".ssh", "k2")); err != nil || string(b) != "x" {
		t.Fatalf("without Host the copy did not go through the link inside: %q %v", b, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
