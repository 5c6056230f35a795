package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
	"github.com/docker-sandbox/docker-sandbox/internal/testenv"
)

// The tests of the binary's dispatch run it as a subprocess: the test
// binary re-executes itself with envExec=1 and then behaves as
// sandbox-helper (realMain). The commands' own tests, with their harness,
// are in exec/inside (and fs's in files/fsserver).
const envExec = "SANDBOX_HELPER_TEST_EXEC"

func TestMain(m *testing.M) {
	if os.Getenv(envExec) != "1" {
		os.Exit(m.Run())
	}
	os.Unsetenv(envExec)
	os.Exit(realMain(os.Args[1:]))
}

// helperCommand returns a command running the helper with args; env
// entries (NAME=VALUE) are appended.
func helperCommand(t *testing.T, ctx context.Context, env []string, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Env = append(append(os.Environ(), envExec+"=1"), env...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// runStatus reads the helper's framed stdout of a run: whether it said
// Started, and its one Status frame.
func runStatus(t *testing.T, b []byte) (started bool, st wire.RunStatus) {
	t.Helper()
	fr := wire.NewFrameReader(bytes.NewReader(b))
	statuses := 0
	typ, p, err := fr.Next()
	for ; err == nil; typ, p, err = fr.Next() {
		started = started || typ == wire.Started
		if typ == wire.Status {
			statuses++
			if jerr := json.Unmarshal(p, &st); jerr != nil {
				t.Fatalf("status %q: %v", p, jerr)
			}
		}
	}
	if err != io.EOF {
		t.Fatalf("decoding frames: %v", err)
	}
	if statuses != 1 {
		t.Fatalf("got %d Status frames in %q, want 1", statuses, b)
	}
	return started, st
}

func TestCLI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name     string
		args     []string
		wantCode int
		stdout   string
		stderr   string
	}{
		{"version", []string{"version"}, 0, "dev\n", ""},
		{"no subcommand", nil, 2, "", "usage:"},
		{"unknown subcommand", []string{"frobnicate"}, 2, "", `unknown subcommand "frobnicate"`},
		{"init bad flag", []string{"init", "--bogus"}, 2, "", "flag provided but not defined"},
		{"init bad ttl", []string{"init", "--idle-ttl", "soon"}, 2, "", "invalid value"},
		{"init extra argument", []string{"init", "extra"}, 2, "", "unexpected argument"},
		{"init refuses to run as another PID than 1", []string{"init", "--idle-ttl", "1s"}, 2, "", "must run as PID 1"},
	}
	for _, tc := range cases {
		cmd := helperCommand(t, ctx, nil, tc.args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if code != tc.wantCode {
			t.Errorf("%s: exit code %d, want %d (stderr %q)", tc.name, code, tc.wantCode, stderr.String())
		}
		if tc.stdout != "" && stdout.String() != tc.stdout {
			t.Errorf("%s: stdout %q, want %q", tc.name, stdout.String(), tc.stdout)
		}
		if tc.stderr != "" && !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%s: stderr %q, want it to contain %q", tc.name, stderr.String(), tc.stderr)
		}
	}
}

// TestStaticBuild builds the real binary the way the plugin does and runs
// it: the version is settable with -X, and a run outside a sandbox (no init
// to register with) is refused cleanly. The e2e tests run it in sandboxes.
func TestStaticBuild(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: this test builds the helper")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		if _, err := os.Stat(goTool); err != nil {
			testenv.Skip(t, "no go tool")
		}
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "sandbox-helper")
	build := exec.Command(goTool, "build", "-trimpath", "-ldflags=-s -w -X main.version=v9.8.7-test", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || string(out) != "v9.8.7-test\n" {
		t.Fatalf("version: %q, %v", out, err)
	}
	// Outside a sandbox there is no init to register with: the run is
	// refused, in a well-formed Status frame, and runs nothing.
	marker := filepath.Join(t.TempDir(), "ran")
	run := wire.RunArgs{Interps: []string{"sh"}, CodeExt: ".sh", Timeout: 10 * time.Second, MaxOutput: 1000, Args: []string{"x"}}
	cmd := exec.Command(bin, run.Argv()...)
	code := `touch ` + marker + `; exit 7`
	var stdin bytes.Buffer
	_ = wire.WriteCodeHeader(&stdin, int64(len(code)))
	stdin.WriteString(code)
	cmd.Stdin = &stdin
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 125 {
		t.Fatalf("run: %v, want exit status 125", err)
	}
	started, st := runStatus(t, stdout.Bytes())
	if st.ErrorCode != wire.ErrDraining || started {
		t.Fatalf("run without an init: status %+v, started %v", st, started)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the program ran without the sandbox's init")
	}
}
