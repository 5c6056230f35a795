package inside

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
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

func testSocketName(t *testing.T) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "@sandbox-helper-test-" + hex.EncodeToString(b)
}

// initHarness is a test init (not PID 1) on its own control socket, whose
// exec roots are the test process's children: the wrappers and drains the
// test starts.
type initHarness struct {
	t      *testing.T
	ctx    context.Context
	socket string
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	env    []string // for clients: the socket and init's pid
}

func newInitHarness(t *testing.T, args ...string) *initHarness {
	t.Helper()
	return newInitHarnessEnv(t, nil, args...)
}

// drain runs `sandbox-helper drain [--undo]` and returns its exit code.
func (h *initHarness) drain(args ...string) int {
	h.t.Helper()
	cmd := helperCommand(h.t, h.ctx, h.env, append([]string{"drain"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errorsAs(err, &ee):
		return ee.ExitCode()
	}
	h.t.Fatalf("drain: %v (%s)", err, out.String())
	return -1
}

func errorsAs(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*ee = e
	}
	return ok
}

// startRun starts a `run` of sh code registered with the harness's init and
// returns it once its Started frame arrived (or its Status, if refused).
type liveRun struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *bytes.Buffer // everything, once done
	first  byte          // the first frame's type
	done   chan error
}

func (h *initHarness) startRun(code string, extra ...string) *liveRun {
	h.t.Helper()
	cmd := helperCommand(h.t, h.ctx, h.env, shArgs("30s", "100000", extra)...)
	r, w, err := os.Pipe()
	if err != nil {
		h.t.Fatal(err)
	}
	cmd.Stdin = r
	outR, outW, err := os.Pipe()
	if err != nil {
		h.t.Fatal(err)
	}
	cmd.Stdout = outW
	lr := &liveRun{cmd: cmd, stdin: w, stdout: &bytes.Buffer{}, done: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	r.Close()
	outW.Close()
	_, _ = w.Write(codeStdin(code, nil))
	// Read until the first frame's header says Started or Status.
	hdr := make([]byte, 8)
	if _, err := ioReadFull(outR, hdr); err != nil {
		h.t.Fatalf("run: no frame: %v", err)
	}
	lr.stdout.Write(hdr)
	lr.first = hdr[0]
	go func() {
		_, _ = lr.stdout.ReadFrom(outR)
		lr.done <- cmd.Wait()
	}()
	return lr
}

func (lr *liveRun) firstFrame() byte { return lr.first }

// finish closes the run's stdin and waits for it; it returns the decoded run.
func (lr *liveRun) finish(t *testing.T) result {
	t.Helper()
	lr.stdin.Close()
	select {
	case <-lr.done:
	case <-time.After(30 * time.Second):
		t.Fatal("run did not end")
	}
	var r result
	decode(t, &r, lr.stdout.Bytes())
	return r
}

func ioReadFull(f *os.File, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := f.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TestControlDrain: a registered run makes a drain busy; once it ended the
// drain succeeds and a new run is refused before it starts (nothing runs);
// undo lets runs start again.
func TestControlDrain(t *testing.T) {
	t.Parallel()
	h := newInitHarness(t, "--idle-ttl", "0")
	marker := filepath.Join(t.TempDir(), "ran")
	lr := h.startRun("read x; echo got $x")
	if lr.firstFrame() != wire.Started {
		t.Fatalf("first frame %d, want Started", lr.firstFrame())
	}
	if code := h.drain(); code != exitDrainBusy {
		t.Fatalf("drain while a run is registered: exit %d, want %d (busy)", code, exitDrainBusy)
	}
	_, _ = lr.stdin.Write([]byte("line\n"))
	if r := lr.finish(t); string(r.stdout) != "got line\n" || r.status.ExitCode != 0 {
		t.Fatalf("run: %q %+v", r.stdout, r.status)
	}
	// The run's end reaches init through its connection; poll with a deadline.
	deadline := time.Now().Add(10 * time.Second)
	code := h.drain()
	for code == exitDrainBusy && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		code = h.drain()
	}
	if code != 0 {
		t.Fatalf("drain after the run ended: exit %d, want 0", code)
	}
	r := runHelper(t, codeStdin("touch "+marker+"; echo ran", nil), h.env, shArgs("10s", "100", nil)...)
	if r.status.ErrorCode != wire.ErrDraining || r.exitCode != 125 || r.started || len(r.stdout) != 0 {
		t.Fatalf("run while drained: status %+v, exit %d, started %v", r.status, r.exitCode, r.started)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a program ran in a drained sandbox")
	}
	if code := h.drain("--undo"); code != 0 {
		t.Fatalf("undo: exit %d", code)
	}
	r = runHelper(t, codeStdin("touch "+marker+"; echo ran", nil), h.env, shArgs("10s", "100", nil)...)
	if r.status.ErrorCode != "" || !r.started || string(r.stdout) != "ran\n" {
		t.Fatalf("run after undo: %+v %q", r.status, r.stdout)
	}
}

// TestControlOnlyExecRoots: sandboxed code (any process that the engine did
// not start: here a child of a run) cannot drain the sandbox, undo a drain,
// or register a fake run that holds a drain off; nor can a process that is
// not the helper.
func TestControlOnlyExecRoots(t *testing.T) {
	t.Parallel()
	h := newInitHarness(t, "--idle-ttl", "0")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The program of a run execs the helper as sandboxed code would (it is
	// the run's child, not an exec root): drain, and a run that would
	// register and hold on.
	envs := strings.Join(append(append([]string{}, h.env...), envExec+"=1"), " ")
	code := "env " + envs + " " + self + " drain; echo drain=$?; " +
		"env " + envs + " " + self + " run --interp sh --timeout 20s --max-output 10 -- -c 'sleep 20' </dev/null >/dev/null & " +
		"sleep 1; echo started"
	r := runHelper(t, codeStdin(code, nil), h.env, shArgs("30s", "100000", nil)...)
	if !strings.Contains(string(r.stdout), "drain=1") {
		t.Fatalf("a drain from sandboxed code: %q (want exit 1, refused)", r.stdout)
	}
	// Nothing is registered: a drain from an exec root succeeds at once.
	if c := h.drain(); c != 0 {
		t.Fatalf("drain after sandboxed code's attempts: exit %d, want 0 (a fake run must not hold it off)", c)
	}
	if c := h.drain("--undo"); c != 0 {
		t.Fatalf("undo: %d", c)
	}
}

// TestControlLifetime: at the max lifetime, a registered run's program is
// killed and the run ends with lifetime_reached; init exits.
func TestControlLifetime(t *testing.T) {
	t.Parallel()
	h := newInitHarness(t, "--idle-ttl", "0", "--max-lifetime", "2s")
	lr := h.startRun("echo $$; sleep 60")
	r := lr.finish(t)
	if r.status.ErrorCode != wire.ErrLifetime || r.status.ExitCode != 125 {
		t.Fatalf("run at the max lifetime: %+v", r.status)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(r.stdout)))
	if pid <= 0 {
		t.Fatalf("no pid in %q", r.stdout)
	}
	assertGone(t, pid, "the program")
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("init did not exit at its max lifetime")
	}
}

// TestControlDiskLimit: a program that writes past the disk limit is
// stopped with disk_limit; a new run is refused (nothing runs) until data
// is removed; the usage never went far past the limit.
func TestControlDiskLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h2 := newInitHarnessEnv(t, []string{envDiskRoots + "=" + dir}, "--idle-ttl", "0", "--disk", strconv.Itoa(8<<20))
	code := "i=0; while [ $i -lt 400 ]; do head -c 1048576 /dev/zero > " + dir + "/f$i || exit 9; i=$((i+1)); done; echo finished"
	r := runHelper(t, codeStdin(code, nil), h2.env, shArgs("60s", "100000", nil)...)
	if r.status.ErrorCode != wire.ErrDiskLimit || r.status.ExitCode != 125 || strings.Contains(string(r.stdout), "finished") {
		t.Fatalf("writing 400 MiB under an 8 MiB limit: status %+v, stdout %q", r.status, r.stdout)
	}
	used := measureDisk([]string{dir})
	t.Logf("usage when stopped: %d MiB (limit 8 MiB)", used.used>>20)
	if used.used > 8<<20+256<<20 {
		t.Errorf("usage reached %d MiB under an 8 MiB limit", used.used>>20)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	r = runHelper(t, codeStdin("touch "+marker, nil), h2.env, shArgs("10s", "100", nil)...)
	if r.status.ErrorCode != wire.ErrDiskLimit || r.started {
		t.Fatalf("a run over the limit: %+v (started %v)", r.status, r.started)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a program ran over the disk limit")
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		_ = os.Remove(filepath.Join(dir, e.Name()))
	}
	r = runHelper(t, codeStdin("head -c 1000 /dev/zero > "+dir+"/small; echo ok", nil), h2.env, shArgs("10s", "100", nil)...)
	if r.status.ErrorCode != "" || string(r.stdout) != "ok\n" {
		t.Fatalf("a run after the data was removed: %+v %q", r.status, r.stdout)
	}
}

func newInitHarnessEnv(t *testing.T, env []string, args ...string) *initHarness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	h := &initHarness{t: t, ctx: ctx, socket: testSocketName(t), stderr: &bytes.Buffer{}}
	ready := filepath.Join(t.TempDir(), "ready")
	h.cmd = helperCommand(t, ctx, append([]string{envAllowNonPID1 + "=1", envInitReadyFile + "=" + ready, envControl + "=" + h.socket,
		envRootPPID + "=" + strconv.Itoa(os.Getpid()), envProcRoot + "=/proc", "SANDBOX_HELPER_DEBUG_CONTROL=1"}, env...), append([]string{"init"}, args...)...)
	h.cmd.Stderr = h.stderr
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.cmd.Process.Signal(syscall.SIGTERM)
		_ = h.cmd.Wait()
		if t.Failed() {
			t.Logf("init's stderr:\n%s", h.stderr.String())
		}
	})
	waitFile(t, ctx, ready)
	h.env = []string{envNoInit + "=0", envControl + "=" + h.socket, envInitPID + "=" + strconv.Itoa(h.cmd.Process.Pid)}
	return h
}

// TestControlStoppedWrapper: sandboxed code that stops its wrapper
// (SIGSTOP) gets the wrapper killed by init, so its exec ends at once
// instead of hanging until the plugin's backstop.
func TestControlStoppedWrapper(t *testing.T) {
	t.Parallel()
	h := newInitHarness(t, "--idle-ttl", "0")
	start := time.Now()
	lr := h.startRun("kill -STOP $PPID; sleep 60")
	select {
	case err := <-lr.done:
		var ee *exec.ExitError
		if !errorsAs(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the stopped wrapper: %v, want killed by SIGKILL", err)
		}
	case <-time.After(10 * time.Second):
		_ = lr.cmd.Process.Kill()
		t.Fatal("init left the stopped wrapper stopped for 10 s")
	}
	t.Logf("stopped wrapper killed after %v", time.Since(start))
	lr.stdin.Close()
}

// TestControlSignal: the signals sandboxed code can send its wrapper do not
// end the run; a client's Ctrl-C (`signal --token`, an exec root, through
// PID 1) does, and only for the run with that token.
func TestControlSignal(t *testing.T) {
	t.Parallel()
	h := newInitHarness(t, "--idle-ttl", "0")
	r := runHelper(t, codeStdin("for s in TERM INT HUP QUIT USR1 USR2 ALRM TSTP TTIN TTOU XCPU XFSZ PWR; do kill -$s $PPID; done; sleep 0.2; echo still here", nil),
		h.env, shArgs("10s", "1000", []string{"--token", "t1"})...)
	if string(r.stdout) != "still here\n" || r.status.ExitCode != 0 || r.exitCode != 0 {
		t.Fatalf("signals from the program ended its run: stdout %q, status %+v, exit %d", r.stdout, r.status, r.exitCode)
	}
	lr := h.startRun("echo $$; sleep 60", "--token", "t2")
	other := h.startRun("sleep 3; echo other done", "--token", "t3")
	sig := func(token string) int {
		cmd := helperCommand(t, h.ctx, h.env, "signal", "--token", token)
		err := cmd.Run()
		var ee *exec.ExitError
		if errorsAs(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	if c := sig("nobody"); c != 1 {
		t.Errorf("signal for no run: exit %d, want 1", c)
	}
	start := time.Now()
	if c := sig("t2"); c != 0 {
		t.Fatalf("signal t2: exit %d", c)
	}
	res := lr.finish(t)
	if time.Since(start) > 10*time.Second || res.status.ExitCode == 0 {
		t.Fatalf("the interrupted run: %+v after %v", res.status, time.Since(start))
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(res.stdout)))
	assertGone(t, pid, "the interrupted program")
	if o := other.finish(t); string(o.stdout) != "other done\n" || o.status.ExitCode != 0 {
		t.Fatalf("the other run: %q %+v", o.stdout, o.status)
	}
}
