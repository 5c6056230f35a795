package plugin

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/docker-sandbox/docker-sandbox/audit"
	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
	"github.com/docker-sandbox/docker-sandbox/files"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
)

type fakeAuditSource struct {
	recs   []audit.Record
	follow bool
}

func (f *fakeAuditSource) Read(each func(audit.Record) error) error {
	for _, r := range f.recs {
		if err := each(r); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeAuditSource) Follow(ctx context.Context, each func(audit.Record) error) error {
	f.follow = true
	return f.Read(each)
}

func TestRunAuditFormats(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	src := &fakeAuditSource{recs: []audit.Record{
		{Time: t0, Scope: "u1", Command: "exec", Lang: "python", Code: "print(1)\nprint(2)", ExitCode: 0, Status: "ok", DurationMS: 1500},
		{Time: t0, Scope: "u1", Session: "s", Command: "cp", Args: []string{"a", "u1/s:b"}, Status: "error", ExitCode: 125, Code: ""},
		{Time: t0, Scope: "u2", Command: "exec", Code: "echo \x1b[31mred", Status: "ok"},
	}}
	var out bytes.Buffer
	if err := runAudit(context.Background(), src, &out, auditOptions{format: "{{.scope}} {{.command}} {{.What}} {{.Exit}}"}); err != nil {
		t.Fatal(err)
	}
	want := "u1 exec print(1) 0\nu1 cp a u1/s:b 125\nu2 exec \"echo \\x1b[31mred\" 0\n"
	if d := cmp.Diff(want, out.String()); d != "" {
		t.Errorf("template (-want +got):\n%s", d)
	}
	out.Reset()
	if err := runAudit(context.Background(), src, &out, auditOptions{format: "json"}); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], `{"time":"2026-12-02T10:00:00Z","scope":"u1","command":"exec"`) {
		t.Errorf("json:\n%s", out.String())
	}
	out.Reset()
	if err := runAudit(context.Background(), &fakeAuditSource{}, &out, auditOptions{follow: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "TIME") || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("empty table: %q", out.String())
	}
}

func TestAuditOptions(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for s, want := range map[string]time.Time{
		"90m":                  now.Add(-90 * time.Minute),
		"7d":                   now.AddDate(0, 0, -7),
		"2026-12-01T08:00:00Z": time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC),
		"2026-12-01":           time.Date(2026, 12, 1, 0, 0, 0, 0, time.Local),
	} {
		f, err := auditOptions{since: s}.filter(now)
		if err != nil || !f.Since.Equal(want) {
			t.Errorf("--since %s: %v %v, want %v", s, f.Since, err, want)
		}
	}
	for _, o := range []auditOptions{{since: "yesterday"}, {since: "-5m"}, {scope: "../x"}, {scope: "a/b"}} {
		_, err := o.filter(now)
		if code := core.AsError(err).Code; err == nil || code != core.CodeBadFlag && code != core.CodeBadName {
			t.Errorf("%+v: %v", o, err)
		}
	}
	if _, err := (auditOptions{scope: "../x"}).filter(now); core.AsError(err).Code != core.CodeBadName {
		t.Errorf("--scope ../x: %v", err)
	}
}

func TestExecRecordStatus(t *testing.T) {
	tg := core.Target{Scope: "u1", Session: "s"}
	cases := []struct {
		st          wire.RunStatus
		err         error
		interrupted bool
		want        audit.Record
	}{
		{wire.RunStatus{ExitCode: 2}, nil, false, audit.Record{ExitCode: 2, Status: audit.StatusExited}},
		{wire.RunStatus{ExitCode: 124, TimedOut: true, Signal: 9}, nil, false, audit.Record{ExitCode: 124, Status: audit.StatusTimedOut, Signal: "SIGKILL"}},
		{wire.RunStatus{ExitCode: 137, OOMKilled: true}, nil, false, audit.Record{ExitCode: 137, Status: audit.StatusOOMKilled}},
		{wire.RunStatus{ExitCode: 143, Signal: 15}, nil, false, audit.Record{ExitCode: 143, Status: audit.StatusSignaled, Signal: "SIGTERM"}},
		{wire.RunStatus{ExitCode: 1, ErrorCode: wire.ErrDiskLimit, Error: "full"}, nil, false, audit.Record{ExitCode: 1, Status: audit.StatusError, ErrorCode: wire.ErrDiskLimit, Error: "full"}},
		{wire.RunStatus{}, core.Errorf("sandbox_mismatch", "no"), false, audit.Record{ExitCode: 125, Status: audit.StatusError, ErrorCode: "sandbox_mismatch", Error: "no"}},
		{wire.RunStatus{}, nil, true, audit.Record{ExitCode: 130, Status: audit.StatusInterrupted, ErrorCode: "interrupted"}},
	}
	for _, c := range cases {
		r := execRecord(tg, "sh", []byte("echo"), 2, []string{"a"}, []string{"K=secret"}, 3, sbexec.Result{Status: c.st}, c.err, c.interrupted)
		r.Finish(r.Time)
		want := c.want
		want.Scope, want.Session, want.Command, want.Lang, want.Args, want.EnvNames = "u1", "s", "exec", "sh", []string{"a"}, []string{"K"}
		want.Code, want.CodeTruncated, want.CodeBytes, want.CodeSHA256, want.BytesIn = "ec", true, 4, r.CodeSHA256, 7
		if d := cmp.Diff(want, r); d != "" {
			t.Errorf("%+v %v (-want +got):\n%s", c.st, c.err, d)
		}
	}
}

func TestCpAndFlagsRecords(t *testing.T) {
	loc := func(arg string) files.Location {
		l, err := files.ParseLocation(arg)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	res := &tarsafe.Result{Bytes: 10}
	a := cpArgs{srcArg: "u1:x", dstArg: "u2/s:y", src: loc("u1:x"), dst: loc("u2/s:y")}
	got := cpRecords(a, res, nil)
	want := []audit.Record{
		{Scope: "u2", Session: "s", Command: "cp", Args: []string{"u1:x", "u2/s:y"}, BytesIn: 10, BytesOut: 10},
		{Scope: "u1", Command: "cp", Args: []string{"u1:x", "u2/s:y"}, BytesIn: 10, BytesOut: 10},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("sandbox to sandbox (-want +got):\n%s", d)
	}
	a = cpArgs{srcArg: "./h", dstArg: "u1:x", src: loc("./h"), dst: loc("u1:x")}
	got = cpRecords(a, nil, errors.New("boom"))
	want = []audit.Record{{Scope: "u1", Command: "cp", Args: []string{"./h", "u1:x"}, Status: audit.StatusError, ErrorCode: core.AsError(errors.New("boom")).Code, Error: "boom", ExitCode: core.AsError(errors.New("boom")).Exit}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("host to sandbox, failed (-want +got):\n%s", d)
	}
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.StringArray("allow", nil, "")
	fs.String("format", "", "")
	fs.Bool("clear", false, "")
	_ = fs.Parse([]string{"--allow", "pypi.org", "--allow", "*.x", "--format", "json"})
	if d := cmp.Diff(audit.Record{Scope: "u1", Command: "egress policy", Args: []string{"--allow=[pypi.org,*.x]"}}, flagsRecord("egress policy", "u1", fs, nil)); d != "" {
		t.Errorf("flags (-want +got):\n%s", d)
	}
}

// A record that cannot be written is one warning line, however many
// records the command writes; the records' caps come from the
// configuration.
func TestAuditorWarnsOnce(t *testing.T) {
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	a := &auditor{w: &audit.Writer{Dir: blocked}, errOut: &errOut, start: time.Now()}
	a.recordEach([]audit.Record{{Scope: "u1", Command: "cp"}, {Scope: "u2", Command: "cp"}}, nil, nil)
	a.record(audit.Record{Scope: "u1", Command: "rm"}, nil, nil)
	if n := strings.Count(errOut.String(), "\n"); n != 1 || !strings.Contains(errOut.String(), "warning: the audit trail was not written") {
		t.Errorf("warnings: %q", errOut.String())
	}
	// Off: no writer, no capture, nothing written.
	off := &auditor{errOut: &errOut}
	var sink bytes.Buffer
	if w, c := off.tee(&sink); w != &sink || c != nil || off.on() {
		t.Errorf("off: tee gave %T %v", w, c)
	}
}
