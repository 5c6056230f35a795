package tarsafe

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
)

// ent is one entry of a test archive.
type ent struct {
	name, link string
	typ        byte
	mode       int64
	body       string
	size       int64 // header size when body is not the content (caps, truncation)
	pax        map[string]string
}

func file(name, body string) ent { return ent{name: name, typ: tar.TypeReg, mode: 0o644, body: body} }
func dir(name string) ent        { return ent{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) ent {
	return ent{name: name, typ: tar.TypeSymlink, link: target, mode: 0o777}
}
func hardlink(name, target string) ent {
	return ent{name: name, typ: tar.TypeLink, link: target, mode: 0o644}
}
func special(name string, typ byte) ent { return ent{name: name, typ: typ, mode: 0o644} }

var testTime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

// mkTar builds an archive; truncate > 0 cuts it to that many bytes.
func mkTar(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, ModTime: testTime,
			Size: int64(len(e.body)), PAXRecords: e.pax}
		if e.size != 0 {
			h.Size = e.size
		}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("header %q: %v", e.name, err)
		}
		if e.body != "" {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatalf("body %q: %v", e.name, err)
			}
		}
		if e.size > int64(len(e.body)) {
			// A header that promises more than follows: stop here, the
			// archive is cut (the caps must act on the header alone).
			return buf.Bytes()
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sandbox is a test layout: base/ (the root given to Extract) holding dst
// (maybe) and canary/ with a secret, which no copy may touch.
type sandbox struct {
	t      testing.TB
	top    string // the temp folder
	base   string // top/base
	canary string // top/canary
	root   *os.Root
}

func newSandbox(t testing.TB) *sandbox {
	t.Helper()
	top := t.TempDir()
	s := &sandbox{t: t, top: top, base: filepath.Join(top, "base"), canary: filepath.Join(top, "canary")}
	for _, d := range []string{s.base, s.canary} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.canary, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(s.base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	s.root = r
	return s
}

// tree describes everything under dir: "name" for files (with ":content"),
// "name/" for folders, "name -> target" for links, plus the mode for files
// and folders ("name mode").
func tree(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out = append(out, rel+" -> "+target)
		case fi.IsDir():
			out = append(out, rel+"/ "+fsproto.ModeString(fi.Mode()))
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			out = append(out, rel+" "+fsproto.ModeString(fi.Mode())+" "+string(b))
		default:
			out = append(out, rel+" "+fi.Mode().String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// checkCanary fails when anything outside base changed: the canary folder
// holds exactly its secret, and top holds only base and canary.
func (s *sandbox) checkCanary() {
	s.t.Helper()
	got := tree(s.t, s.canary)
	if len(got) != 1 || got[0] != "secret 0644 secret" {
		s.t.Fatalf("the canary folder outside the destination changed: %q", got)
	}
	ents, err := os.ReadDir(s.top)
	if err != nil {
		s.t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "base,canary" {
		s.t.Fatalf("something was written next to the destination: %q", names)
	}
}

// noStaging fails when a staging folder or temporary file was left.
func (s *sandbox) noStaging() {
	s.t.Helper()
	for _, e := range tree(s.t, s.base) {
		if strings.Contains(e, StagingPrefix) {
			s.t.Fatalf("a staging entry was left behind: %q", e)
		}
	}
}

func (s *sandbox) extract(d Dest, data []byte, o Options) (*Result, error) {
	s.t.Helper()
	return Extract(s.root, d, bytes.NewReader(data), o)
}

func codeOf(err error) string {
	var fe *fsproto.Error
	if errors.As(err, &fe) {
		return fe.Code
	}
	if err == nil {
		return ""
	}
	return "other: " + err.Error()
}

func mustWrite(t testing.TB, p, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
