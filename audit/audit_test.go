package audit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func readAll(t *testing.T, dir string, f Filter) []Record {
	t.Helper()
	var got []Record
	r := &Reader{Dir: dir, Filter: f}
	if err := r.Read(func(rec Record) error { got = append(got, rec); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestAppendAndRead(t *testing.T) {
	dir := t.TempDir()
	w := &Writer{Dir: dir, MaxCode: DefaultMaxCode, MaxOutput: DefaultMaxOutput}
	a := Record{Time: t0.Add(time.Second), Scope: "u1", Session: "s", Command: "exec", Lang: "python", Args: []string{"x"}, ExitCode: 3}
	a.SetCode([]byte("print(1)"), DefaultMaxCode)
	a.Finish(t0.Add(3 * time.Second))
	b := Record{Time: t0, Scope: "u2", Command: "rm"}
	b.Finish(t0)
	c := Record{Time: t0.AddDate(0, 0, 1), Scope: "u1", Command: "cp"}
	c.Finish(c.Time)
	for _, r := range []Record{a, b, c} {
		if err := w.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if a.Status != StatusExited || a.DurationMS != 2000 || b.Status != StatusOK {
		t.Fatalf("Finish: %+v %+v", a, b)
	}
	// Time order within a day, days in order.
	if d := cmp.Diff([]Record{b, a, c}, readAll(t, dir, Filter{})); d != "" {
		t.Errorf("all (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]Record{a, c}, readAll(t, dir, Filter{Scope: "u1"})); d != "" {
		t.Errorf("scope u1 (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]Record{a, c}, readAll(t, dir, Filter{Since: t0.Add(time.Second)})); d != "" {
		t.Errorf("since (-want +got):\n%s", d)
	}
	// The file is where the README says, one line per record.
	data, err := os.ReadFile(filepath.Join(dir, "20261202", "u1.jsonl"))
	if err != nil || bytes.Count(data, []byte("\n")) != 1 {
		t.Fatalf("u1.jsonl: %v %q", err, data)
	}
	sum := sha256.Sum256([]byte("print(1)"))
	if a.CodeSHA256 != hex.EncodeToString(sum[:]) || a.CodeBytes != 8 || a.Code != "print(1)" || a.CodeTruncated {
		t.Errorf("code: %+v", a)
	}
}

func TestModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	w := &Writer{Dir: dir}
	if err := w.Append(Record{Time: t0, Scope: "u1", Command: "exec"}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: DirMode | os.ModeDir, filepath.Join(dir, "20261202"): DirMode | os.ModeDir, filepath.Join(dir, "20261202", "u1.jsonl"): FileMode} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
}

// TestNotShared: an audit folder or file that someone else could read or
// change (a shared audit_dir, a file planted with a loose mode, a day's
// folder replaced by a link) is not written to, and what was planted stays
// as it was.
func TestNotShared(t *testing.T) {
	rec := Record{Time: t0, Scope: "u1", Command: "exec", Code: "SECRET-CODE"}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string) string // returns a file that must not get the record
	}{
		{"audit folder writable by others", func(t *testing.T, dir string) string {
			must(t, os.MkdirAll(dir, 0o700))
			must(t, os.Chmod(dir, 0o777))
			return filepath.Join(dir, "20261202", "u1.jsonl")
		}},
		{"file readable by others", func(t *testing.T, dir string) string {
			must(t, os.MkdirAll(filepath.Join(dir, "20261202"), 0o700))
			f := filepath.Join(dir, "20261202", "u1.jsonl")
			must(t, os.WriteFile(f, nil, 0o600))
			must(t, os.Chmod(f, 0o644))
			return f
		}},
		{"day folder is a link", func(t *testing.T, dir string) string {
			elsewhere := t.TempDir()
			must(t, os.MkdirAll(dir, 0o700))
			must(t, os.Symlink(elsewhere, filepath.Join(dir, "20261202")))
			return filepath.Join(elsewhere, "u1.jsonl")
		}},
		{"day folder writable by others", func(t *testing.T, dir string) string {
			must(t, os.MkdirAll(filepath.Join(dir, "20261202"), 0o700))
			must(t, os.Chmod(filepath.Join(dir, "20261202"), 0o733))
			return filepath.Join(dir, "20261202", "u1.jsonl")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "audit")
			victim := tc.setup(t, dir)
			if err := (&Writer{Dir: dir}).Append(rec); err == nil {
				t.Errorf("the record was written")
			}
			if b, _ := os.ReadFile(victim); bytes.Contains(b, []byte("SECRET-CODE")) {
				t.Errorf("%s holds the record", victim)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A name that is not a valid scope never becomes a path: nothing is made.
func TestInvalidScopeMakesNothing(t *testing.T) {
	dir := t.TempDir()
	w := &Writer{Dir: filepath.Join(dir, "audit")}
	for _, s := range []string{"../x", "", "a/b", ".", "x.jsonl/../../y"} {
		if err := w.Append(Record{Time: t0, Scope: s}); err == nil {
			t.Errorf("scope %q: no error", s)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("made %v", entries)
	}
}

func TestCaps(t *testing.T) {
	dir := t.TempDir()
	w := &Writer{Dir: dir, MaxCode: 10, MaxOutput: 4}
	code := []byte(strings.Repeat("é", 20)) // 40 bytes, 2 per character
	r := Record{Time: t0, Scope: "u1", Command: "exec"}
	r.SetCode(code, 9) // cut inside a character: back to 8
	if r.Code != strings.Repeat("é", 4) || !r.CodeTruncated || r.CodeBytes != 40 {
		t.Errorf("SetCode: %q %v %d", r.Code, r.CodeTruncated, r.CodeBytes)
	}
	var sink bytes.Buffer
	out := NewCapture(&sink, 4)
	errc := NewCapture(nil, 4)
	fmt.Fprint(out, "ab")
	fmt.Fprint(out, "cdefgh")
	fmt.Fprint(errc, "x")
	r.SetOutput(out, errc)
	if sink.String() != "abcdefgh" {
		t.Errorf("the tee changed the output: %q", sink.String())
	}
	if r.Stdout != "abcd" || !r.StdoutTruncated || r.Stderr != "x" || r.StderrTruncated || r.BytesOut != 9 {
		t.Errorf("SetOutput: %+v", r)
	}
	if len(out.buf) > 4 || cap(out.buf) > 64 {
		t.Errorf("capture holds %d bytes (cap %d)", len(out.buf), cap(out.buf))
	}
	// The writer's caps apply to whatever it is given.
	r.Code, r.CodeTruncated = string(code), false
	r.Stdout, r.StdoutTruncated = "0123456789", false
	if err := w.Append(r); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, dir, Filter{})[0]
	if got.Code != strings.Repeat("é", 5) || !got.CodeTruncated || got.Stdout != "0123" || !got.StdoutTruncated {
		t.Errorf("written: %+v", got)
	}
}

// Environment values never reach the file: only the names.
func TestEnvNamesOnly(t *testing.T) {
	dir := t.TempDir()
	w := &Writer{Dir: dir}
	r := Record{Time: t0, Scope: "u1", Command: "exec"}
	r.SetEnv([]string{"TOKEN=s3cr3t-value", "A=1", "TOKEN=again", "EMPTY="})
	if err := w.Append(r); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "20261202", "u1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("s3cr3t")) || bytes.Contains(data, []byte("again")) {
		t.Fatalf("a value reached the file: %s", data)
	}
	if d := cmp.Diff([]string{"A", "EMPTY", "TOKEN"}, readAll(t, dir, Filter{})[0].EnvNames); d != "" {
		t.Errorf("env names (-want +got):\n%s", d)
	}
}

// 8 writers of one scope, records larger than PIPE_BUF: every line parses
// and every record is there.
func TestConcurrentAppend(t *testing.T) {
	dir := t.TempDir()
	const writers, each = 8, 40
	big := strings.Repeat("x", 20000)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &Writer{Dir: dir, MaxCode: 1 << 20, MaxOutput: 1 << 20}
			for j := range each {
				r := Record{Time: t0, Scope: "u1", Command: "exec", Args: []string{fmt.Sprint(i, "-", j)}, Code: big, Stdout: big}
				if err := w.Append(r); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	f, err := os.Open(filepath.Join(dir, "20261202", "u1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	seen := map[string]bool{}
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Code != big {
			t.Fatalf("line %d does not parse whole: %v", len(seen)+1, err)
		}
		seen[r.Args[0]] = true
	}
	if len(seen) != writers*each {
		t.Errorf("%d records, want %d", len(seen), writers*each)
	}
}

// Retention goes by folder names alone: only real folders named with an
// exact 8-digit date older than the limit go, and in them only *.jsonl
// files. A link named as an old day, what it points to, a folder with
// another name, and a file with a date's name stay.
func TestPruneByNameOnly(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "audit")
	mk := func(p string) {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	file := func(p string) {
		if err := os.WriteFile(p, []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old, keep := "20261001", "20261102" // 62 and 30 days before t0's day
	mk(filepath.Join(dir, old))
	file(filepath.Join(dir, old, "u1.jsonl"))
	mk(filepath.Join(dir, keep))
	file(filepath.Join(dir, keep, "u1.jsonl"))
	// A link named as an old day, to a folder outside with the same
	// layout: neither the link nor anything behind it goes.
	outside := filepath.Join(root, "elsewhere")
	mk(outside)
	file(filepath.Join(outside, "u1.jsonl"))
	if err := os.Symlink(outside, filepath.Join(dir, "20260101")); err != nil {
		t.Fatal(err)
	}
	// Not a date, or not exactly 8 digits.
	for _, n := range []string{"notes", "2026010", "202601011", "2026-01-01", "20261399"} {
		mk(filepath.Join(dir, n))
		file(filepath.Join(dir, n, "u1.jsonl"))
	}
	// A file named as a date.
	file(filepath.Join(dir, "20260202"))
	// An old day holding something that is not ours: that stays.
	mixed := filepath.Join(dir, "20260303")
	mk(mixed)
	file(filepath.Join(mixed, "u1.jsonl"))
	file(filepath.Join(mixed, "README"))

	removed, err := Prune(dir, 30, t0)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{old}, removed); d != "" {
		t.Errorf("removed (-want +got):\n%s", d)
	}
	var left []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(root, p)
		left = append(left, rel)
		return nil
	})
	want := []string{".", "audit", "audit/20260101", "audit/2026-01-01", "audit/2026-01-01/u1.jsonl",
		"audit/2026010", "audit/2026010/u1.jsonl", "audit/20260202", "audit/202601011", "audit/202601011/u1.jsonl",
		"audit/20260303", "audit/20260303/README", "audit/20261102", "audit/20261102/u1.jsonl",
		"audit/20261399", "audit/20261399/u1.jsonl", "audit/notes", "audit/notes/u1.jsonl",
		"elsewhere", "elsewhere/u1.jsonl"}
	slices.Sort(left)
	slices.Sort(want)
	if d := cmp.Diff(want, left); d != "" {
		t.Errorf("left (-want +got):\n%s", d)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "20260101")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link: %v %v", fi, err)
	}
	// 0 keeps everything.
	if removed, err := Prune(dir, 0, t0.AddDate(10, 0, 0)); err != nil || removed != nil {
		t.Errorf("days 0: removed %v, %v", removed, err)
	}
}

// The writer prunes once, after its first record.
func TestWriterPrunes(t *testing.T) {
	dir := t.TempDir()
	w := &Writer{Dir: dir, RetentionDays: 1, Now: func() time.Time { return t0 }}
	if err := w.Append(Record{Time: t0.AddDate(0, 0, -5), Scope: "u1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "20261127")); !os.IsNotExist(err) {
		t.Errorf("the old day stays: %v", err)
	}
}

func TestAppendFailures(t *testing.T) {
	root := t.TempDir()
	asFile := filepath.Join(root, "file")
	if err := os.WriteFile(asFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (&Writer{Dir: asFile}).Append(Record{Time: t0, Scope: "u1"}); err == nil {
		t.Error("audit dir is a file: no error")
	}
	// The audit file is a link: not followed.
	dir := filepath.Join(root, "a")
	if err := os.MkdirAll(filepath.Join(dir, "20261202"), 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(root, "target")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "20261202", "u1.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := (&Writer{Dir: dir}).Append(Record{Time: t0, Scope: "u1"}); err == nil {
		t.Error("audit file is a link: no error")
	}
	if b, _ := os.ReadFile(target); len(b) != 0 {
		t.Errorf("wrote through the link: %q", b)
	}
}

func TestFollow(t *testing.T) {
	dir := t.TempDir()
	w := &Writer{Dir: dir}
	if err := w.Append(Record{Time: t0, Scope: "u1", Command: "first"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan Record, 10)
	done := make(chan error, 1)
	go func() {
		r := &Reader{Dir: dir, Filter: Filter{Scope: "u1"}, Poll: 10 * time.Millisecond}
		done <- r.Follow(ctx, func(rec Record) error { got <- rec; return nil })
	}()
	next := func() Record {
		select {
		case r := <-got:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no record within 10s")
		}
		return Record{}
	}
	if r := next(); r.Command != "first" {
		t.Fatalf("first: %+v", r)
	}
	if err := w.Append(Record{Time: t0.AddDate(0, 0, 1), Scope: "u1", Command: "second"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(Record{Time: t0, Scope: "u2", Command: "other scope"}); err != nil {
		t.Fatal(err)
	}
	if r := next(); r.Command != "second" {
		t.Fatalf("second: %+v", r)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		t.Errorf("unexpected record %+v", r)
	default:
	}
}
