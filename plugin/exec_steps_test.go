package plugin

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/cli/cli"
	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

// -e KEY takes the host's value and is dropped when the host has none; -e
// wins over --env-file; a bad name is refused (bad_flag).
func TestExecEnv(t *testing.T) {
	envFile := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(envFile, []byte("A=file\nB=file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	host := map[string]string{"HOSTVAR": "h"}
	lookup := func(k string) (string, bool) { v, ok := host[k]; return v, ok }
	got, err := execEnv([]string{"HOSTVAR", "MISSING", "B=flag", "C=x=y"}, []string{envFile}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"A=file", "B=file", "HOSTVAR=h", "B=flag", "C=x=y"}, got); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
	for _, bad := range []string{"=v", "A B=v"} {
		if _, err := execEnv([]string{bad}, nil, lookup); core.AsError(err).Code != core.CodeBadFlag {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// The code comes from -c (stdin stays the program's), standard input (the
// program gets none), or FILE; a missing FILE or a folder is file_not_found.
func TestExecCode(t *testing.T) {
	in := strings.NewReader("print(1)\n")
	s, err := execCode(in, -1, []string{"a"}, &execOptions{code: "echo hi", codeSet: true})
	if err != nil || string(s.code) != "echo hi" || s.stdin != in || !cmp.Equal(s.args, []string{"a"}) {
		t.Errorf("-c: %+v %v", s, err)
	}
	s, err = execCode(in, -1, nil, &execOptions{})
	if err != nil || string(s.code) != "print(1)\n" || s.stdin != nil || s.fileName != "" {
		t.Errorf("stdin: %+v %v", s, err)
	}
	f := filepath.Join(t.TempDir(), "x.py")
	if err := os.WriteFile(f, []byte("pass\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = execCode(in, -1, []string{f, "--", "b"}, &execOptions{})
	if err != nil || string(s.code) != "pass\n" || s.fileName != f || s.stdin != in || !cmp.Equal(s.args, []string{"b"}) {
		t.Errorf("FILE: %+v %v", s, err)
	}
	for _, bad := range []string{filepath.Join(t.TempDir(), "missing.py"), t.TempDir()} {
		if _, err := execCode(in, -1, []string{bad}, &execOptions{}); core.AsError(err).Code != core.CodeFileNotFound {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// The status a run ended with becomes the call's error, or the error
// object of a program the sandbox stopped, or the program's exit status.
func TestExecOutcome(t *testing.T) {
	out := func(st wire.RunStatus) *execOutcome {
		return &execOutcome{c: config.Default(), spec: sbexec.Spec{Settings: core.Settings{Image: "img:1"}}, res: sbexec.Result{Status: st}}
	}
	var b strings.Builder
	if err := out(wire.RunStatus{ExitCode: 3, TimedOut: true}).reportPlain(io.Discard, &b); err != (cli.StatusError{StatusCode: 3}) || b.String() != "docker sandbox: killed at --timeout 1m0s\n" {
		t.Errorf("timeout: %v %q", err, b.String())
	}
	err := out(wire.RunStatus{ErrorCode: wire.ErrInterpreterNotFound, Error: "python3 not found", ExitCode: 127}).reportPlain(io.Discard, &b)
	if e := core.AsError(err); e.Code != core.CodeInterpreterMissing || e.Exit != 127 || !strings.Contains(e.Message, "(image img:1)") {
		t.Errorf("interpreter missing: %+v", e)
	}
	stoppedBy, err := out(wire.RunStatus{ErrorCode: wire.ErrLifetime, Error: "reached"}).stopped()
	if err != nil || stoppedBy == nil || stoppedBy.Code != core.CodeLifetimeReached {
		t.Errorf("lifetime: %+v %v", stoppedBy, err)
	}
	if err := out(wire.RunStatus{}).reportPlain(io.Discard, &b); err != nil {
		t.Errorf("success: %v", err)
	}
	// A kernel call: the result on stdout, a kernel's death on stderr as
	// a stop with its error object.
	res := "42"
	var o, e strings.Builder
	if err := out(wire.RunStatus{Result: &res, KernelRestarted: true, StateLost: true, Error: "the kernel was restarted"}).reportPlain(&o, &e); err != nil ||
		o.String() != "42\n" || e.String() != "docker sandbox: the kernel was restarted\n" {
		t.Errorf("kernel result: %v %q %q", err, o.String(), e.String())
	}
	stoppedBy, err = out(wire.RunStatus{ErrorCode: wire.ErrKernelDied, Error: "died", ExitCode: 3}).stopped()
	if err != nil || stoppedBy == nil || stoppedBy.Code != core.CodeKernelDied {
		t.Errorf("kernel died: %+v %v", stoppedBy, err)
	}
}
