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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
	"github.com/docker-sandbox/docker-sandbox/internal/testenv"
)

// The integration tests run the helper as a subprocess: the test binary
// re-executes itself with envExec=1 and then behaves as sandbox-helper
// (realMain), with the package variables below pointed elsewhere through the
// environment. The variables are removed from the environment before
// realMain runs, so the sandboxed programs do not see them.
const (
	envExec          = "SANDBOX_HELPER_TEST_EXEC"
	envProc1Cmdline  = "SANDBOX_HELPER_TEST_PROC1_CMDLINE"
	envCgroupV2      = "SANDBOX_HELPER_TEST_CGROUP_V2"
	envCgroupV1      = "SANDBOX_HELPER_TEST_CGROUP_V1"
	envProcRoot      = "SANDBOX_HELPER_TEST_PROC_ROOT"
	envAllowNonPID1  = "SANDBOX_HELPER_TEST_ALLOW_NON_PID1"
	envInitReadyFile = "SANDBOX_HELPER_TEST_INIT_READY_FILE"
	envControl       = "SANDBOX_HELPER_TEST_CONTROL_SOCKET"
	envInitPID       = "SANDBOX_HELPER_TEST_INIT_PID"
	envRootPPID      = "SANDBOX_HELPER_TEST_ROOT_PPID"
	envNoInit        = "SANDBOX_HELPER_TEST_NO_INIT"
	envDiskRoots     = "SANDBOX_HELPER_TEST_DISK_ROOTS"
)

func TestMain(m *testing.M) {
	if os.Getenv(envExec) != "1" {
		os.Exit(m.Run())
	}
	os.Unsetenv(envExec)
	if self, err := os.Executable(); err == nil {
		helperNames[filepath.Base(self)] = true
	}
	for name, p := range map[string]*string{
		envProc1Cmdline: &proc1Cmdline,
		envCgroupV2:     &cgroupV2MemoryEvents,
		envCgroupV1:     &cgroupV1OOMControl,
		envProcRoot:     &procRoot,
		envControl:      &controlSocket,
	} {
		if v, ok := os.LookupEnv(name); ok {
			*p = v
			os.Unsetenv(name)
		}
	}
	for name, p := range map[string]*int{envInitPID: &initPID, envRootPPID: &rootPPID} {
		if v, ok := os.LookupEnv(name); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				panic(name + ": " + err.Error())
			}
			*p = n
			os.Unsetenv(name)
		}
	}
	if v, ok := os.LookupEnv(envDiskRoots); ok {
		diskRoots = strings.Split(v, ":")
		os.Unsetenv(envDiskRoots)
	}
	if os.Getenv(envNoInit) == "1" {
		initRequired = false
	}
	os.Unsetenv(envNoInit)
	if os.Getenv(envAllowNonPID1) == "1" {
		initAllowNonPID1 = true
	}
	os.Unsetenv(envAllowNonPID1)
	if f := os.Getenv(envInitReadyFile); f != "" {
		initReadyHook = func() { _ = os.WriteFile(f, []byte("ready"), 0o600) }
	}
	os.Unsetenv(envInitReadyFile)
	os.Exit(realMain(os.Args[1:]))
}

// helperCommand returns a command running the helper with args. By default
// PID 1's cmdline and the cgroup counters point at files that do not exist,
// and `run` does not register with an init (see initHarness for tests
// with one); env entries (NAME=VALUE) are appended and override those.
func helperCommand(t *testing.T, ctx context.Context, env []string, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	missing := filepath.Join(tmp, "missing")
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Env = append(os.Environ(),
		envExec+"=1",
		envNoInit+"=1",
		envControl+"=@sandbox-helper-test-none-"+strconv.Itoa(os.Getpid()),
		envProc1Cmdline+"="+missing,
		envCgroupV2+"="+missing,
		envCgroupV1+"="+missing,
	)
	// Under -race the race runtime sleeps 1 s at exit by default; the
	// timing assertions measure the helper, not that.
	cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Env = append(cmd.Env, env...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// result is one helper run, decoded.
type result struct {
	stdout, stderr []byte  // the program's output, from the frames
	frames         []frame // output frames and the Status frame
	started        bool    // a Started frame came first
	status         wire.RunStatus
	exitCode       int    // the helper process's exit code
	helperStderr   []byte // the helper process's own stderr
	elapsed        time.Duration
}

type frame struct {
	typ     byte
	payload []byte
}

// runHelper runs the helper to completion with stdin and decodes its output.
func runHelper(t *testing.T, stdin []byte, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := helperCommand(t, ctx, env, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{elapsed: time.Since(start), helperStderr: stderr.Bytes()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		r.exitCode = ee.ExitCode()
	default:
		t.Fatalf("helper %v: %v (stderr %q)", args, err, stderr.String())
	}
	decode(t, &r, stdout.Bytes())
	return r
}

// decode decodes the helper's stdout into r, checking that it is a sequence
// of output frames ended by exactly one Status frame.
func decode(t *testing.T, r *result, b []byte) {
	t.Helper()
	fr := wire.NewFrameReader(bytes.NewReader(b))
	var statuses int
	for {
		typ, p, err := fr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("decoding frames: %v", err)
		}
		if statuses > 0 {
			t.Fatalf("frame of type %d after the Status frame", typ)
		}
		if typ == wire.Started {
			if r.started || len(r.frames) > 0 {
				t.Fatalf("a Started frame after other frames")
			}
			r.started = true
			continue
		}
		r.frames = append(r.frames, frame{typ, append([]byte(nil), p...)})
		switch typ {
		case wire.Stdout:
			r.stdout = append(r.stdout, p...)
		case wire.Stderr:
			r.stderr = append(r.stderr, p...)
		case wire.Status:
			statuses++
			if err := json.Unmarshal(p, &r.status); err != nil {
				t.Fatalf("status %q: %v", p, err)
			}
		}
	}
	if statuses != 1 {
		t.Fatalf("got %d Status frames, want 1 (helper stderr %q)", statuses, r.helperStderr)
	}
}

// codeStdin is the helper's stdin for code followed by the program's stdin.
func codeStdin(code string, rest []byte) []byte {
	var b bytes.Buffer
	_ = wire.WriteCodeHeader(&b, int64(len(code)))
	b.WriteString(code)
	b.Write(rest)
	return b.Bytes()
}

// shArgs is `run` for sh code with the given flags and program arguments.
func shArgs(timeout string, maxOutput string, extra []string, userArgs ...string) []string {
	a := []string{"run", "--interp", "sh", "--code-ext", ".sh", "--timeout", timeout, "--max-output", maxOutput}
	a = append(a, extra...)
	a = append(a, "--")
	return append(a, userArgs...)
}

// runSh runs sh code with a 10 s timeout and a 1 MiB cap.
func runSh(t *testing.T, code string, stdin []byte, env []string, userArgs ...string) result {
	t.Helper()
	return runHelper(t, codeStdin(code, stdin), env, shArgs("10s", "1048576", nil, userArgs...)...)
}

// assertGone checks that pid no longer exists; if it does, it is killed.
func assertGone(t *testing.T, pid int, what string) {
	t.Helper()
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Errorf("%s (pid %d) outlived the exec: kill(pid, 0) = %v, want ESRCH", what, pid, err)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// markedProcesses returns the pids of live processes whose environment
// contains marker.
func markedProcesses(t *testing.T, marker string) []int {
	t.Helper()
	procs, err := readProcs("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range procs {
		env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID), "environ"))
		if err != nil || p.State == 'Z' {
			continue
		}
		if bytes.Contains(env, []byte(marker)) {
			pids = append(pids, p.PID)
		}
	}
	return pids
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
	cmd := exec.Command(bin, shArgs("10s", "1000", nil, "x")...)
	cmd.Stdin = bytes.NewReader(codeStdin(`touch `+marker+`; exit 7`, nil))
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 125 {
		t.Fatalf("run: %v, want exit status 125", err)
	}
	var r result
	decode(t, &r, stdout.Bytes())
	if r.status.ErrorCode != wire.ErrDraining || r.started {
		t.Fatalf("run without an init: status %+v, started %v", r.status, r.started)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the program ran without the sandbox's init")
	}
}
