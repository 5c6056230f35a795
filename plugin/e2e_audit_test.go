package plugin_test

import (
	"bufio"
	"bytes"
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

	// Capped code, a timeout.
	long := "sleep 5 # " + strings.Repeat("z", 100) + "\n"
	r = sbRun(t, run{env: append(env, "DOCKER_SANDBOX_AUDIT_MAX_CODE=16"), args: []string{"exec", "-s", scope, "--session", "a", "--timeout", "1s", "-c", long}})
	wantCode(t, r, 124)
	recs = auditRecords(t, cfg, scope)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	sum = sha256.Sum256([]byte(long))
	got = recs[1]
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
