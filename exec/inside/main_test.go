package inside

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
)

// The integration tests run the helper as a subprocess: the test binary
// re-executes itself with envExec=1 and then behaves as sandbox-helper
// (testMain), with the package variables below pointed elsewhere through the
// environment. The variables are removed from the environment before
// testMain runs, so the sandboxed programs do not see them.
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
	_ = SetNonDumpable() // as sandbox-helper's main does first
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
	os.Exit(testMain(os.Args[1:]))
}

// testMain is sandbox-helper's dispatch, for this package's commands.
func testMain(args []string) int {
	commands := map[string]func([]string) int{wire.VerbInit: Init, wire.VerbRun: Run, wire.VerbSignal: Signal, wire.VerbStatus: Status,
		wire.VerbDrain: func(args []string) int { return Drain(args, os.Stdout, os.Stderr) }, wire.VerbChannel: Channel}
	if len(args) == 0 || commands[args[0]] == nil {
		fmt.Fprintf(os.Stderr, "sandbox-helper (test): no command in %q\n", args)
		return 2
	}
	return commands[args[0]](args[1:])
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
