package plugin_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/docker-sandbox/docker-sandbox/audit"
)

// auditConfig is a Docker config of the test's own: its audit trail is
// <cfg>/sandbox/audit, seen by no other test.
func auditConfig(t *testing.T) (cfg string, env []string) {
	t.Helper()
	cfg = privateConfig(t)
	return cfg, []string{"DOCKER_CONFIG=" + cfg}
}

// auditFile is a scope's audit file of today (UTC).
func auditFile(cfg, scope string) string {
	return filepath.Join(cfg, "sandbox", "audit", time.Now().UTC().Format("20060102"), scope+".jsonl")
}

// auditRecords reads a scope's audit file of today: every line must parse
// as a whole record, with no field the Record type does not know.
func auditRecords(t *testing.T, cfg, scope string) []audit.Record {
	t.Helper()
	f, err := os.Open(auditFile(cfg, scope))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []audit.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var r audit.Record
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("line %d of %s does not parse: %v\n%.300s", len(out)+1, f.Name(), err, sc.Bytes())
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// An exec writes one line with what ran and how it ended; environment
// values never reach the file (only the names); the file is 0600 in
// folders of 0700; code over audit_max_code is cut, its SHA-256 is of the
// whole; a timeout is recorded as such.
func TestAuditExec(t *testing.T) {
	needE2E(t)
	cfg, env := auditConfig(t)
	scope := newScope(t)
	secret := "s3cr3t-" + randID(8)
	code := "import sys\nprint('out', sys.argv[1:], sys.stdin.read())\nprint('err', file=sys.stderr)\nsys.exit(3)\n"
	r := sbRun(t, run{env: env, stdin: strings.NewReader("in!"), args: []string{"exec", "-s", scope, "--session", "a", "--lang", "python",
		"-e", "TOKEN=" + secret, "-e", "OTHER=1", "-c", code, "--", "x", "y"}})
	wantCode(t, r, 3)
	if r.Stdout != "out ['x', 'y'] in!\n" || r.Stderr != "err\n" {
		t.Fatalf("the output changed:\n%s", r)
	}
	data, err := os.ReadFile(auditFile(cfg, scope))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(secret)) {
		t.Fatalf("the secret value reached the audit file:\n%s", data)
	}
	recs := auditRecords(t, cfg, scope)
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1: %+v", len(recs), recs)
	}
	got := recs[0]
	sum := sha256.Sum256([]byte(code))
	want := audit.Record{Scope: scope, Session: "a", Command: "exec", Lang: "python", Code: code,
		CodeSHA256: hex.EncodeToString(sum[:]), CodeBytes: int64(len(code)), Args: []string{"x", "y"},
		EnvNames: []string{"OTHER", "TOKEN"}, ExitCode: 3, Status: audit.StatusExited,
		BytesIn: int64(len(code) + 3), BytesOut: int64(len(r.Stdout) + len(r.Stderr)), Stdout: r.Stdout, Stderr: r.Stderr}
	if d := cmp.Diff(want, got, cmpopts.IgnoreFields(audit.Record{}, "Time", "Context", "Engine", "DurationMS")); d != "" {
		t.Errorf("record (-want +got):\n%s", d)
	}
	if time.Since(got.Time) > 5*time.Minute || got.DurationMS <= 0 || got.Context == "" || got.Engine == "" {
		t.Errorf("time %v, duration %d ms, context %q, engine %q", got.Time, got.DurationMS, got.Context, got.Engine)
	}
	for p, mode := range map[string]os.FileMode{auditFile(cfg, scope): 0o600, filepath.Dir(auditFile(cfg, scope)): 0o700 | os.ModeDir, filepath.Join(cfg, "sandbox", "audit"): 0o700 | os.ModeDir} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != mode {
			t.Errorf("%s: %v, want mode %v (%v)", p, fi.Mode(), mode, err)
		}
	}

	// An untrusted project file can neither turn the trail off nor move it:
	// the record is written where the user's configuration says, and the
	// warning names the values ignored.
	proj := t.TempDir()
	if err := os.WriteFile(filepath.Join(proj, ".docker-sandbox.toml"), []byte("audit = false\naudit_dir = \""+filepath.Join(proj, "elsewhere")+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = sbRun(t, run{env: env, dir: proj, args: []string{"exec", "-s", scope, "--session", "a", "-c", "echo from-project"}})
	wantCode(t, r, 0)
	if !strings.Contains(r.Stderr, "audit = false is ignored") || !strings.Contains(r.Stderr, "audit_dir = ") {
		t.Errorf("no warning about the ignored audit keys:\n%s", r)
	}
	if recs := auditRecords(t, cfg, scope); len(recs) != 2 || recs[1].Stdout != "from-project\n" {
		t.Errorf("the untrusted project file stopped the record: %d records", len(recs))
	}
	if _, err := os.Stat(filepath.Join(proj, "elsewhere")); !os.IsNotExist(err) {
		t.Errorf("the untrusted project file moved the trail: %v", err)
	}

	// Capped code, a timeout.
	long := "sleep 5 # " + strings.Repeat("z", 100) + "\n"
	r = sbRun(t, run{env: append(env, "DOCKER_SANDBOX_AUDIT_MAX_CODE=16"), args: []string{"exec", "-s", scope, "--session", "a", "--timeout", "1s", "-c", long}})
	wantCode(t, r, 124)
	recs = auditRecords(t, cfg, scope)
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	sum = sha256.Sum256([]byte(long))
	got = recs[2]
	if got.Code != long[:16] || !got.CodeTruncated || got.CodeSHA256 != hex.EncodeToString(sum[:]) || got.CodeBytes != int64(len(long)) ||
		got.Status != audit.StatusTimedOut || got.ExitCode != 124 || got.Lang != "sh" {
		t.Errorf("capped, timed out: %+v", got)
	}
}

// audit = false writes nothing; an audit folder that cannot be written
// (it is a file) leaves the command's exit code and output as they were,
// with one warning line on stderr.
func TestAuditOffAndUnwritable(t *testing.T) {
	needE2E(t)
	cfg, env := auditConfig(t)
	scope := newScope(t)
	r := sbRun(t, run{env: append(env, "DOCKER_SANDBOX_AUDIT=false"), args: []string{"exec", "-s", scope, "-c", "echo hi; echo ho >&2; exit 5"}})
	wantCode(t, r, 5)
	if r.Stdout != "hi\n" || r.Stderr != "ho\n" {
		t.Fatalf("output:\n%s", r)
	}
	if _, err := os.Stat(filepath.Join(cfg, "sandbox", "audit")); !os.IsNotExist(err) {
		t.Fatalf("audit = false made the audit folder: %v", err)
	}

	blocked := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(blocked, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	benv := append(env, "DOCKER_SANDBOX_AUDIT_DIR="+blocked)
	r = sbRun(t, run{env: benv, args: []string{"exec", "-s", scope, "-c", "echo hi; echo ho >&2; exit 5"}})
	wantCode(t, r, 5)
	lines := strings.Split(strings.TrimSuffix(r.Stderr, "\n"), "\n")
	if r.Stdout != "hi\n" || len(lines) != 2 || lines[0] != "ho" || !strings.Contains(lines[1], "warning: the audit trail was not written") {
		t.Fatalf("want the output unchanged and one warning line:\n%s", r)
	}
	r = sbRun(t, run{env: benv, args: []string{"exec", "-s", scope, "--format", "json", "-c", "echo hi; exit 5"}})
	wantCode(t, r, 5)
	if j := decodeExec(t, r); j.Stdout != "hi\n" || j.ExitCode != 5 || strings.Count(r.Stderr, "\n") != 1 {
		t.Fatalf("json:\n%s", r)
	}
	if b, _ := os.ReadFile(blocked); string(b) != "x" {
		t.Errorf("the file in the way changed: %q", b)
	}
}

// 8 parallel execs of one scope: every line of its audit file parses, and
// all 8 are there (each line is larger than PIPE_BUF).
func TestAuditParallelExecs(t *testing.T) {
	needE2E(t)
	cfg, env := auditConfig(t)
	scope := newScope(t)
	wantCode(t, sbRun(t, run{env: env, args: []string{"exec", "-s", scope, "-c", "true"}}), 0)
	pad := "# " + strings.Repeat("p", 8000) + "\n"
	var wg sync.WaitGroup
	results := make([]result, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = sbRun(t, run{env: env, args: []string{"exec", "-s", scope, "-c", pad + fmt.Sprintf("echo run-%d; head -c 6000 /dev/zero | tr '\\0' q", i)}})
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.Code != 0 || !strings.HasPrefix(r.Stdout, fmt.Sprintf("run-%d\n", i)) {
			t.Fatalf("exec %d:\n%s", i, r)
		}
	}
	recs := auditRecords(t, cfg, scope)
	var runs []string
	for _, r := range recs[1:] {
		runs = append(runs, strings.SplitN(r.Stdout, "\n", 2)[0])
		if !strings.HasPrefix(r.Code, pad) || len(r.Stdout) < 6000 {
			t.Errorf("record cut: %d bytes of code, %d of stdout", len(r.Code), len(r.Stdout))
		}
	}
	slices.Sort(runs)
	if d := cmp.Diff([]string{"run-0", "run-1", "run-2", "run-3", "run-4", "run-5", "run-6", "run-7"}, runs); len(recs) != 9 || d != "" {
		t.Errorf("%d records; runs (-want +got):\n%s", len(recs), d)
	}
}

// syncBuffer is a buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func auditCommands(recs []audit.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Command+" "+r.Status)
	}
	return out
}

// files put/rm, cp (in the file of each scope it touches) and rm write
// their lines; `audit` reads them back (json, a template, --scope,
// --since, the table), -f prints a line written after it started, and a
// bad --scope is bad_name.
func TestAuditCopyFilesRmAndVerb(t *testing.T) {
	needE2E(t)
	cfg, env := auditConfig(t)
	a, b := newScope(t), newScope(t)
	host := filepath.Join(t.TempDir(), "h.txt")
	if err := os.WriteFile(host, []byte("host!"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Retention (30 days by default) goes by folder names alone: an old
	// day goes; a link named as an old day, what it leads to, and a
	// folder that is not a date stay (and the reader skips the link).
	auditDir := filepath.Join(cfg, "sandbox", "audit")
	outside := t.TempDir()
	oldRec := fmt.Sprintf(`{"time":"2020-01-02T00:00:00Z","scope":%q,"command":"exec","exit_code":0,"status":"ok"}`+"\n", a)
	for p, body := range map[string]string{
		filepath.Join(auditDir, "20200101", a+".jsonl"): oldRec,
		filepath.Join(auditDir, "notes", a+".jsonl"):    oldRec,
		filepath.Join(outside, a+".jsonl"):              oldRec,
	} {
		writeText(t, p, body)
	}
	if err := os.Symlink(outside, filepath.Join(auditDir, "20200102")); err != nil {
		t.Fatal(err)
	}
	steps := []run{
		{args: []string{"files", "put", "-s", a, "f.txt"}, stdin: strings.NewReader("hello")},
		{args: []string{"cp", a + ":f.txt", b + ":g.txt"}},
		{args: []string{"cp", host, a + ":h.txt"}},
		{args: []string{"files", "rm", "-s", a, "f.txt"}},
		{args: []string{"files", "rm", "-s", a, "missing.txt"}},
		{args: []string{"rm", b}},
	}
	for i, s := range steps {
		s.env = env
		r := sbRun(t, s)
		if want := map[bool]int{true: 125, false: 0}[i == 4]; r.Code != want {
			t.Fatalf("%v: want exit %d\n%s", s.args, want, r)
		}
	}
	ra, rb := auditRecords(t, cfg, a), auditRecords(t, cfg, b)
	if d := cmp.Diff([]string{"files put ok", "cp ok", "cp ok", "files rm ok", "files rm error"}, auditCommands(ra)); d != "" {
		t.Errorf("scope a (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"cp ok", "rm ok"}, auditCommands(rb)); d != "" {
		t.Errorf("scope b (-want +got):\n%s", d)
	}
	if len(ra) == 5 && len(rb) == 2 {
		if ra[0].BytesIn != 5 || !cmp.Equal(ra[0].Args, []string{"/opt/workspace/f.txt"}) || ra[1].BytesOut != 5 || rb[0].BytesIn != 5 ||
			ra[2].BytesIn != 5 || ra[4].ErrorCode == "" || !cmp.Equal(rb[1].Args, []string{b}) {
			t.Errorf("records:\n%+v\n%+v", ra, rb)
		}
	}

	if _, err := os.Stat(filepath.Join(auditDir, "20200101")); !os.IsNotExist(err) {
		t.Errorf("the day older than 30 days stays: %v", err)
	}
	for _, p := range []string{filepath.Join(auditDir, "notes", a+".jsonl"), filepath.Join(auditDir, "20200102"), filepath.Join(outside, a+".jsonl")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("retention removed %s: %v", p, err)
		}
	}

	// The audit verb.
	r := sbRun(t, run{env: env, args: []string{"audit", "--format", "json"}})
	wantCode(t, r, 0)
	if n := strings.Count(r.Stdout, "\n"); n != 7 {
		t.Errorf("audit --format json: %d lines, want 7\n%s", n, r)
	}
	for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		var rec audit.Record
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.Command == "" {
			t.Errorf("line %q: %v", l, err)
		}
	}
	r = sbRun(t, run{env: env, args: []string{"audit", "--scope", b, "--format", "{{.scope}} {{.command}}"}})
	if d := cmp.Diff(b+" cp\n"+b+" rm\n", r.Stdout); r.Code != 0 || d != "" {
		t.Errorf("--scope (-want +got):\n%s\n%s", d, r)
	}
	r = sbRun(t, run{env: env, args: []string{"audit", "--since", "1h", "--scope", a, "--format", "{{.Command}}"}})
	if r.Code != 0 || strings.Count(r.Stdout, "\n") != 5 {
		t.Errorf("--since 1h:\n%s", r)
	}
	r = sbRun(t, run{env: env, args: []string{"audit", "--since", "2099-01-01", "--format", "json"}})
	if r.Code != 0 || r.Stdout != "" {
		t.Errorf("--since in the future:\n%s", r)
	}
	r = sbRun(t, run{env: env, args: []string{"audit", "--scope", b}})
	if lines := strings.Split(strings.TrimSpace(r.Stdout), "\n"); r.Code != 0 || len(lines) != 3 || !strings.Contains(lines[0], "COMMAND") || !strings.Contains(lines[2], " rm ") {
		t.Errorf("table:\n%s", r)
	}
	r = sbRun(t, run{env: env, args: []string{"audit", "--scope", "../x", "--format", "json"}})
	wantCode(t, r, 125)
	if e := decodeErr(t, r); e.Error.Code != "bad_name" {
		t.Errorf("--scope ../x: %+v", e)
	}

	// -f: a record written after it started comes out.
	var out syncBuffer
	cmd := osexec.Command("docker", "sandbox", "audit", "-f", "--scope", a, "--format", "{{.command}}")
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = t.TempDir()
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waited := false
	defer func() {
		if !waited {
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	poll(t, 20*time.Second, func() error {
		if n := strings.Count(out.String(), "\n"); n != 5 {
			return fmt.Errorf("%d lines: %q", n, out.String())
		}
		return nil
	})
	wantCode(t, sbRun(t, run{env: env, args: []string{"files", "put", "-s", a, "late.txt"}, stdin: strings.NewReader("x")}), 0)
	poll(t, 20*time.Second, func() error {
		if !strings.HasSuffix(out.String(), "files rm\nfiles put\n") {
			return fmt.Errorf("-f printed %q", out.String())
		}
		return nil
	})
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		waited = true
		if err != nil {
			t.Errorf("audit -f after Ctrl-C: %v\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("audit -f did not end on Ctrl-C")
	}
}

// shell writes a line when it ends: its COMMAND, the names of its
// environment, its exit status (not what was typed).
func TestAuditShell(t *testing.T) {
	needE2E(t)
	rid := lcRunID(t)
	s := newScope(t)
	secret := "s3cr3t-" + randID(8)
	// The suite's Docker config: the scope's name is the test's own.
	_, code := lcShell(t, rid, 24, 80, "-e TOKEN="+secret+" "+s+" -- sh -c 'exit 7'", nil)
	if code != 7 {
		t.Fatalf("shell exit %d, want 7", code)
	}
	cfg := os.Getenv("DOCKER_CONFIG")
	data, err := os.ReadFile(auditFile(cfg, s))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(secret)) {
		t.Fatalf("the secret value reached the audit file:\n%s", data)
	}
	recs := auditRecords(t, cfg, s)
	want := []audit.Record{{Scope: s, Command: "shell", Args: []string{"sh", "-c", "exit 7"}, EnvNames: []string{"TOKEN"}, ExitCode: 7, Status: audit.StatusExited}}
	if d := cmp.Diff(want, recs, cmpopts.IgnoreFields(audit.Record{}, "Time", "Context", "Engine", "DurationMS")); d != "" {
		t.Errorf("records (-want +got):\n%s", d)
	}
}

// TestAuditKernel: kernel calls are recorded as such: the command says
// --kernel, or --kernel-reset (a restart that was asked for, so not a
// kernel_restarted; a call whose kernel died or timed out says so).
func TestAuditKernel(t *testing.T) {
	needE2E(t)
	cfg, env := auditConfig(t)
	scope := newScope(t)
	for _, args := range [][]string{
		{"--kernel", "-c", "x = 41"},
		{"--kernel", "-c", "x + 1"},
		{"--kernel-reset", "-c", "'x' in globals()"},
	} {
		r := sbRun(t, run{env: env, args: append([]string{"exec", "-s", scope, "--lang", "python"}, args...)})
		wantCode(t, r, 0)
	}
	recs := auditRecords(t, cfg, scope)
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3: %+v", len(recs), recs)
	}
	got := [][2]any{}
	for _, r := range recs {
		got = append(got, [2]any{r.Command, r.KernelRestarted})
	}
	want := [][2]any{{"exec --kernel", false}, {"exec --kernel", false}, {"exec --kernel-reset", false}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("kernel records (-want +got):\n%s", d)
	}
}
