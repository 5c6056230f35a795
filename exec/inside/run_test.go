package inside

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
	"github.com/docker-sandbox/docker-sandbox/internal/testenv"
)

func TestRunArgsAndOutputStreams(t *testing.T) {
	t.Parallel()
	r := runSh(t, `for a in "$@"; do printf '[%s]' "$a"; done; echo; echo oops >&2`, nil, nil,
		"a b", "", "c'd", "-x", "--")
	if got, want := string(r.stdout), "[a b][][c'd][-x][--]\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if got := string(r.stderr); got != "oops\n" {
		t.Errorf("stderr %q, want %q", got, "oops\n")
	}
	if r.status.ExitCode != 0 || r.exitCode != 0 || r.status.ErrorCode != "" || r.status.TimedOut {
		t.Errorf("status %+v, helper exit %d", r.status, r.exitCode)
	}
}

func TestRunStdinByteExact(t *testing.T) {
	t.Parallel()
	data := make([]byte, 4<<20+12345)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	r := runHelper(t, codeStdin("exec cat", data), nil, shArgs("20s", strconv.Itoa(16<<20), nil)...)
	if r.status.ExitCode != 0 || r.status.StdoutTruncated {
		t.Fatalf("status %+v", r.status)
	}
	if got, want := sha256.Sum256(r.stdout), sha256.Sum256(data); got != want || len(r.stdout) != len(data) {
		t.Fatalf("stdout: %d bytes sha256 %x, want %d bytes sha256 %x", len(r.stdout), got, len(data), want)
	}
	for _, f := range r.frames {
		if f.typ == wire.Stdout && len(f.payload) > pumpBuffer {
			t.Fatalf("stdout frame of %d bytes, want at most %d", len(f.payload), pumpBuffer)
		}
	}
}

func TestRunNoCode(t *testing.T) {
	t.Parallel()
	r := runHelper(t, []byte("raw stdin"), nil,
		"run", "--interp", "missing-shell-xyz,sh", "--no-code", "--timeout", "10s", "--max-output", "1000",
		"--", "-c", `printf '[%s]' "$0" "$1"; cat`, "zero", "one two")
	if got, want := string(r.stdout), "[zero][one two]raw stdin"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if r.status.ExitCode != 0 {
		t.Errorf("status %+v", r.status)
	}
}

func TestRunPython(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		testenv.Skip(t, "no python3 on this host")
	}
	code := "import sys\nprint(sys.argv[1:], flush=True)\nprint(len(sys.stdin.buffer.read()), file=sys.stderr)\nsys.exit(4)\n"
	r := runHelper(t, codeStdin(code, []byte("12345")), nil,
		"run", "--interp", "no-such-python,python3,python", "--code-ext", ".py", "--timeout", "20s", "--max-output", "1000",
		"--", "α", "b c")
	if got, want := string(r.stdout), "['α', 'b c']\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if got := string(r.stderr); got != "5\n" {
		t.Errorf("stderr %q, want %q", got, "5\n")
	}
	if r.status.ExitCode != 4 || r.exitCode != 4 {
		t.Errorf("status %+v, helper exit %d, want 4", r.status, r.exitCode)
	}
}

func TestRunLiveStreaming(t *testing.T) {
	t.Parallel()
	// The program prints a line, then blocks until the test answers it: the
	// test can only answer if the line reached it while the program runs.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := helperCommand(t, ctx, nil, shArgs("20s", "1000", nil)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	if _, err := stdin.Write(codeStdin(`echo first; read x; echo "second $x" >&2`, nil)); err != nil {
		t.Fatal(err)
	}
	frames := make(chan frame)
	go func() {
		defer close(frames)
		fr := wire.NewFrameReader(stdout)
		for {
			typ, p, err := fr.Next()
			if err != nil {
				return
			}
			if typ != wire.Started {
				frames <- frame{typ, append([]byte(nil), p...)}
			}
		}
	}()
	next := func() frame {
		t.Helper()
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatal("output ended early")
			}
			return f
		case <-ctx.Done():
			t.Fatal("no frame in time: output is not streamed")
		}
		return frame{}
	}
	if f := next(); f.typ != wire.Stdout || string(f.payload) != "first\n" {
		t.Fatalf("first frame %d %q, want stdout %q", f.typ, f.payload, "first\n")
	}
	if _, err := stdin.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if f := next(); f.typ != wire.Stderr || string(f.payload) != "second hello\n" {
		t.Fatalf("second frame %d %q, want stderr %q", f.typ, f.payload, "second hello\n")
	}
	f := next()
	var st wire.RunStatus
	if f.typ != wire.Status || json.Unmarshal(f.payload, &st) != nil || st.ExitCode != 0 {
		t.Fatalf("last frame %d %q, want a Status with exit code 0", f.typ, f.payload)
	}
}

func TestRunExitCodes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		code     string
		exit     int
		signal   int
		wantOut  string
		extraEnv []string
	}{
		{code: "exit 0", exit: 0},
		{code: "exit 3", exit: 3},
		{code: "exit 255", exit: 255},
		{code: "kill -9 $$", exit: 137, signal: 9},
		{code: "kill -TERM $$", exit: 143, signal: 15},
		{code: "echo partial; kill -SEGV $$", exit: 139, signal: 11, wantOut: "partial\n"},
	}
	for _, tc := range cases {
		r := runSh(t, tc.code, nil, nil)
		if r.status.ExitCode != tc.exit || r.status.Signal != tc.signal || r.status.TimedOut || r.status.OOMKilled || r.status.ErrorCode != "" {
			t.Errorf("%q: status %+v, want exit %d signal %d", tc.code, r.status, tc.exit, tc.signal)
		}
		if r.exitCode != tc.exit {
			t.Errorf("%q: helper exit code %d, want %d", tc.code, r.exitCode, tc.exit)
		}
		if string(r.stdout) != tc.wantOut {
			t.Errorf("%q: stdout %q, want %q", tc.code, r.stdout, tc.wantOut)
		}
	}
}

func TestRunOutputCap(t *testing.T) {
	t.Parallel()
	const limit = 100000
	cases := []struct {
		name, code            string
		wantOut, wantErr      int
		truncOut, truncErr    bool
		wantSignalNotTimedOut bool
	}{
		{name: "stdout flood", code: "yes", wantOut: limit, truncOut: true},
		{name: "stderr flood", code: "echo small; yes >&2", wantOut: 6, wantErr: limit, truncErr: true},
		{name: "exactly the cap", code: fmt.Sprintf("head -c %d /dev/zero", limit), wantOut: limit},
		{name: "one over the cap", code: fmt.Sprintf("head -c %d /dev/zero", limit+1), wantOut: limit, truncOut: true},
	}
	for _, tc := range cases {
		r := runHelper(t, codeStdin(tc.code, nil), nil, shArgs("20s", strconv.Itoa(limit), nil)...)
		if len(r.stdout) != tc.wantOut || len(r.stderr) != tc.wantErr {
			t.Errorf("%s: %d stdout and %d stderr bytes, want %d and %d", tc.name, len(r.stdout), len(r.stderr), tc.wantOut, tc.wantErr)
		}
		if r.status.StdoutTruncated != tc.truncOut || r.status.StderrTruncated != tc.truncErr {
			t.Errorf("%s: status %+v, want stdout_truncated %v stderr_truncated %v", tc.name, r.status, tc.truncOut, tc.truncErr)
		}
		if r.status.TimedOut {
			t.Errorf("%s: timed out (%v): the cap did not stop the flood", tc.name, r.elapsed)
		}
	}
}

func TestRunTimeoutKillsEverything(t *testing.T) {
	t.Parallel()
	marker := "SANDBOX_TEST_MARKER_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	code := `trap '' TERM
echo "main $$"
sleep 100 &
echo "bg $!"
setsid sh -c 'trap "" TERM; echo "setsid $$"; exec sleep 100' &
(setsid sh -c 'echo "orphan $$"; exec sleep 100' &)
i=0; while [ $i -lt 5000 ]; do sleep 100 & i=$((i+1)); done; wait
`
	timeout := 1500 * time.Millisecond
	r := runHelper(t, codeStdin(code, nil), []string{marker + "=1"}, shArgs(timeout.String(), "100000", nil)...)
	if !r.status.TimedOut || r.status.ExitCode != 124 || r.exitCode != 124 || r.status.Signal != 0 || r.status.OOMKilled {
		t.Errorf("status %+v, helper exit %d, want timed out with 124", r.status, r.exitCode)
	}
	// Generous bounds: 5000 forks to kill on a loaded 2-core machine. The
	// point is that the run ends at the timeout, not at sleep 100's end.
	if r.elapsed > timeout+5*time.Second {
		t.Errorf("run took %v with a timeout of %v", r.elapsed, timeout)
	}
	if d := time.Duration(r.status.DurationMS) * time.Millisecond; d < timeout || d > timeout+5*time.Second {
		t.Errorf("duration_ms %d, want about %v", r.status.DurationMS, timeout)
	}
	pids := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^(\w+) (\d+)$`).FindAllStringSubmatch(string(r.stdout), -1) {
		pids[m[1]], _ = strconv.Atoi(m[2])
	}
	for _, what := range []string{"main", "bg", "setsid", "orphan"} {
		pid, ok := pids[what]
		if !ok {
			t.Errorf("the program did not report its %s pid; stdout %q", what, r.stdout)
			continue
		}
		assertGone(t, pid, what)
	}
	if left := markedProcesses(t, marker); len(left) > 0 {
		t.Errorf("processes started by the program outlived the exec: %v", left)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func TestRunExitKillsLeftovers(t *testing.T) {
	t.Parallel()
	// The background processes hold the output pipes: the run can only end
	// quickly if the wrapper kills them when the main program exits.
	code := `d=$(dirname "$0")
sleep 100 &
echo "bg $!"
setsid sh -c 'echo $$ > "$1/p.tmp" && mv "$1/p.tmp" "$1/pid"; exec sleep 100' x "$d" &
sleep 100 >/dev/null 2>&1 </dev/null &
echo "quiet $!"
while [ ! -s "$d/pid" ]; do :; done
echo "setsid $(cat "$d/pid")"
exit 5`
	r := runSh(t, code, nil, nil)
	if r.status.ExitCode != 5 || r.status.TimedOut {
		t.Errorf("status %+v, want exit 5", r.status)
	}
	if r.elapsed >= drainTimeout {
		t.Errorf("run took %v: the output pipes did not reach EOF when the program exited", r.elapsed)
	}
	ms := regexp.MustCompile(`(?m)^(\w+) (\d+)$`).FindAllStringSubmatch(string(r.stdout), -1)
	if len(ms) != 3 {
		t.Fatalf("stdout %q, want three pids", r.stdout)
	}
	for _, m := range ms {
		pid, _ := strconv.Atoi(m[2])
		assertGone(t, pid, m[1])
	}
}

// TestRunSweepKillsLeaderlessGroups: a process whose process group leader
// has already exited (setsid sh forks a sleep and exits) is in no group the
// wrapper kills: only the per-PID sweep of the wrapper's descendants (it is
// re-parented to the wrapper, a subreaper) reaches it.
func TestRunSweepKillsLeaderlessGroups(t *testing.T) {
	t.Parallel()
	code := `d=$(dirname "$0")
setsid sh -c 'sleep 100 >/dev/null 2>&1 </dev/null & echo $! > "$1/p.tmp" && mv "$1/p.tmp" "$1/pid"' x "$d"
while [ ! -s "$d/pid" ]; do :; done
echo "leaderless $(cat "$d/pid")"
exit 3`
	r := runSh(t, code, nil, nil)
	if r.status.ExitCode != 3 {
		t.Fatalf("status %+v", r.status)
	}
	m := regexp.MustCompile(`leaderless (\d+)`).FindStringSubmatch(string(r.stdout))
	if m == nil {
		t.Fatalf("stdout %q", r.stdout)
	}
	pid, _ := strconv.Atoi(m[1])
	assertGone(t, pid, "the process of a group whose leader exited")
}

// TestRunGroupKillWithoutProc: with /proc unreadable the descendant sweep
// finds nothing; the kill of the program's process group still ends what
// the program left in its group, at its exit and at its timeout.
func TestRunGroupKillWithoutProc(t *testing.T) {
	t.Parallel()
	env := []string{envProcRoot + "=" + filepath.Join(t.TempDir(), "no-proc")}
	for _, tc := range []struct {
		name, timeout, code string
		exit                int
	}{
		{"at exit", "10s", "sleep 100 >/dev/null 2>&1 </dev/null & echo \"bg $!\"; exit 4", 4},
		{"at the timeout", "1s", "sleep 100 >/dev/null 2>&1 </dev/null & echo \"bg $!\"; trap '' TERM; sleep 100", 124},
	} {
		r := runHelper(t, codeStdin(tc.code, nil), env, shArgs(tc.timeout, "1000", nil)...)
		if r.status.ExitCode != tc.exit {
			t.Errorf("%s: status %+v, want exit %d", tc.name, r.status, tc.exit)
		}
		m := regexp.MustCompile(`bg (\d+)`).FindStringSubmatch(string(r.stdout))
		if m == nil {
			t.Fatalf("%s: stdout %q", tc.name, r.stdout)
		}
		pid, _ := strconv.Atoi(m[1])
		assertGone(t, pid, tc.name+": the background process in the program's group")
	}
}

func TestRunCodeFile(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		code    string
		timeout string
	}{
		{"normal exit", `stat -c '%a' "$0" "$(dirname "$0")"; echo "$0"`, "10s"},
		{"timeout", `stat -c '%a' "$0" "$(dirname "$0")"; echo "$0"; exec sleep 100`, "1s"},
	}
	for _, tc := range cases {
		r := runHelper(t, codeStdin(tc.code, nil), nil, shArgs(tc.timeout, "1000", nil)...)
		lines := strings.Split(strings.TrimSpace(string(r.stdout)), "\n")
		if len(lines) != 3 || lines[0] != "600" || lines[1] != "700" {
			t.Fatalf("%s: stdout %q, want modes 600 and 700 and the path", tc.name, r.stdout)
		}
		path := lines[2]
		if filepath.Dir(filepath.Dir(path)) != "/tmp" || !strings.HasPrefix(filepath.Base(filepath.Dir(path)), ".sandbox-code-") || filepath.Base(path) != "main.sh" {
			t.Errorf("%s: code file %q, want /tmp/.sandbox-code-*/main.sh", tc.name, path)
		}
		if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
			t.Errorf("%s: code directory still there after the run: %v", tc.name, err)
			os.RemoveAll(filepath.Dir(path))
		}
	}
}

// A code whose SHA-256 is not the one on the command line (another run of
// the sandbox wrote into this run's stdin, as gVisor allows) is refused
// with stream_tampered, and nothing of it runs; the code that matches runs.
func TestRunCodeSum(t *testing.T) {
	t.Parallel()
	canary := filepath.Join(t.TempDir(), "ran")
	code := "touch " + canary + "; echo ran"
	sum := sha256.Sum256([]byte(code))
	good := hex.EncodeToString(sum[:])
	injected := "echo injected > " + canary
	r := runHelper(t, codeStdin(injected, nil), nil, shArgs("10s", "1000", []string{"--code-sha256", good})...)
	if r.status.ExitCode != 125 || r.status.ErrorCode != wire.ErrStreamTampered || r.exitCode != 125 || len(r.stdout)+len(r.stderr) != 0 {
		t.Errorf("injected code: status %+v, helper exit %d, output %q %q", r.status, r.exitCode, r.stdout, r.stderr)
	}
	if _, err := os.Stat(canary); !os.IsNotExist(err) {
		t.Fatalf("the injected code ran: %v", err)
	}
	// Bytes written before the plugin's header make a header over the
	// code limit.
	r = runHelper(t, append([]byte("\x03\x00\x00\x00\x00\x00\x00\x0f{}"), codeStdin(code, nil)...), nil, shArgs("10s", "1000", []string{"--code-sha256", good})...)
	if r.status.ExitCode != 125 || r.status.ErrorCode != wire.ErrStreamTampered || len(r.stdout)+len(r.stderr) != 0 {
		t.Errorf("bytes before the header: status %+v, output %q %q", r.status, r.stdout, r.stderr)
	}
	if _, err := os.Stat(canary); !os.IsNotExist(err) {
		t.Fatalf("code ran after a bad header: %v", err)
	}
	r = runHelper(t, codeStdin(code, nil), nil, shArgs("10s", "1000", []string{"--code-sha256", good})...)
	if r.status.ExitCode != 0 || string(r.stdout) != "ran\n" {
		t.Errorf("matching code: status %+v, stdout %q", r.status, r.stdout)
	}
	if _, err := os.Stat(canary); err != nil {
		t.Errorf("the matching code did not run: %v", err)
	}
}

func TestRunWorkdir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "a", "b")
	r := runHelper(t, codeStdin("pwd", nil), nil, shArgs("10s", "1000", []string{"--workdir", dir})...)
	if got := strings.TrimSpace(string(r.stdout)); got != dir || r.status.ExitCode != 0 {
		t.Errorf("pwd %q status %+v, want %q", got, r.status, dir)
	}

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r = runHelper(t, codeStdin("pwd", nil), nil, shArgs("10s", "1000", []string{"--workdir", filepath.Join(file, "sub")})...)
	if r.status.ExitCode != 125 || r.status.ErrorCode != wire.ErrBadRequest || r.exitCode != 125 || len(r.stdout) != 0 {
		t.Errorf("workdir under a file: status %+v, stdout %q", r.status, r.stdout)
	}
}

func TestRunBadRequests(t *testing.T) {
	t.Parallel()
	good := codeStdin("echo hi", nil)
	short := codeStdin("echo hi", nil)
	short = short[:len(short)-3]
	cases := []struct {
		name  string
		stdin []byte
		args  []string
	}{
		{"no timeout", good, []string{"run", "--interp", "sh", "--max-output", "10", "--"}},
		{"zero timeout", good, []string{"run", "--interp", "sh", "--timeout", "0s", "--max-output", "10", "--"}},
		{"no max-output", good, []string{"run", "--interp", "sh", "--timeout", "1s", "--"}},
		{"no interp", good, []string{"run", "--timeout", "1s", "--max-output", "10", "--"}},
		{"relative workdir", good, []string{"run", "--interp", "sh", "--timeout", "1s", "--max-output", "10", "--workdir", "rel", "--"}},
		{"unknown flag", good, []string{"run", "--frob", "--interp", "sh", "--timeout", "1s", "--max-output", "10", "--"}},
		{"slash in code-ext", good, []string{"run", "--interp", "sh", "--code-ext", "/../x", "--timeout", "1s", "--max-output", "10", "--"}},
		{"no code header", nil, shArgs("1s", "10", nil)},
		{"short code", short, shArgs("1s", "10", nil)},
	}
	for _, tc := range cases {
		r := runHelper(t, tc.stdin, nil, tc.args...)
		if r.status.ExitCode != 125 || r.status.ErrorCode != wire.ErrBadRequest || r.status.Error == "" || r.exitCode != 125 {
			t.Errorf("%s: status %+v, helper exit %d, want 125 %s", tc.name, r.status, r.exitCode, wire.ErrBadRequest)
		}
		if len(r.stdout)+len(r.stderr) != 0 {
			t.Errorf("%s: unexpected output %q %q", tc.name, r.stdout, r.stderr)
		}
	}
}

func TestRunInterpreterErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("noexec", "#!/bin/sh\necho hi\n", 0o644)
	write("garbage", "\x00\x01\x02 not a program\n", 0o755)
	write("badshebang", "#!/nonexistent/interpreter\n", 0o755)
	pathEnv := []string{"PATH=" + dir}
	cases := []struct {
		name     string
		interp   string
		env      []string
		exit     int
		code     string
		contains string
	}{
		{"missing", "no-such-python3,no-such-python", nil, 127, wire.ErrInterpreterNotFound,
			"no-such-python3 (or no-such-python): interpreter not found in the image (PATH="},
		{"not executable", "noexec", pathEnv, 126, wire.ErrInterpreterNoExec, "noexec"},
		{"absolute, not executable", filepath.Join(dir, "noexec"), nil, 126, wire.ErrInterpreterNoExec, "not executable"},
		{"not a program", "garbage", pathEnv, 126, wire.ErrInterpreterNoExec, "exec format error"},
		{"missing #! interpreter", "badshebang", pathEnv, 127, wire.ErrInterpreterNotFound, "badshebang"},
	}
	for _, tc := range cases {
		r := runHelper(t, codeStdin("echo hi", nil), tc.env,
			"run", "--interp", tc.interp, "--timeout", "10s", "--max-output", "100", "--")
		if r.status.ExitCode != tc.exit || r.status.ErrorCode != tc.code || r.exitCode != tc.exit {
			t.Errorf("%s: status %+v, helper exit %d, want %d %s", tc.name, r.status, r.exitCode, tc.exit, tc.code)
		}
		if !strings.Contains(r.status.Error, tc.contains) {
			t.Errorf("%s: error %q, want it to contain %q", tc.name, r.status.Error, tc.contains)
		}
		if len(r.frames) != 1 || len(r.helperStderr) != 0 {
			t.Errorf("%s: %d frames and stderr %q, want the Status frame only", tc.name, len(r.frames), r.helperStderr)
		}
	}
}

func TestRunSpec(t *testing.T) {
	t.Parallel()
	cmdline := filepath.Join(t.TempDir(), "cmdline")
	if err := os.WriteFile(cmdline, []byte("/opt/sandbox/sandbox-helper\x00init\x00--idle-ttl\x0030m\x00--spec\x00abc123\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{envProc1Cmdline + "=" + cmdline}

	// Mismatch: the Status comes without the helper reading stdin, which
	// the test keeps open.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := helperCommand(t, ctx, env, shArgs("10s", "100", []string{"--spec", "def456"})...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatal("the helper waited for stdin on a spec mismatch")
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 {
		t.Fatalf("helper: %v, want exit status 125", err)
	}
	var r result
	decode(t, &r, stdout.Bytes())
	if r.status.ExitCode != 125 || r.status.ErrorCode != wire.ErrSpecMismatch || !strings.Contains(r.status.Error, "abc123") {
		t.Errorf("mismatch: status %+v", r.status)
	}

	// Match, and no --spec asked: the program runs.
	for _, extra := range [][]string{{"--spec", "abc123"}, nil} {
		r := runHelper(t, codeStdin("echo ran", nil), env, shArgs("10s", "100", extra)...)
		if r.status.ExitCode != 0 || string(r.stdout) != "ran\n" {
			t.Errorf("spec %v: status %+v stdout %q", extra, r.status, r.stdout)
		}
	}
}

func TestRunOOM(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	v1 := filepath.Join(dir, "memory.oom_control")
	v2 := filepath.Join(dir, "memory.events")
	missing := filepath.Join(dir, "missing")
	cases := []struct {
		name     string
		file     string // the counter file the program bumps
		v1, v2   string // where the helper reads
		code     string
		timeout  string
		wantOOM  bool
		wantExit int
		wantSig  int
	}{
		{"v1 oom kill", v1, v1, missing, `kill -9 $$`, "10s", true, 137, 9},
		{"v2 oom kill", v2, missing, v2, `kill -9 $$`, "10s", true, 137, 9},
		{"v2 preferred over v1", v2, v1, v2, `kill -9 $$`, "10s", true, 137, 9},
		{"counter up, clean exit", v1, v1, missing, `exit 0`, "10s", false, 0, 0},
		{"counter up, other signal", v1, v1, missing, `kill -TERM $$`, "10s", false, 143, 15},
		{"counter up, timed out", v1, v1, missing, `exec sleep 100`, "500ms", false, 124, 0},
		{"no counter", "", missing, missing, `kill -9 $$`, "10s", false, 137, 9},
	}
	for _, tc := range cases {
		_ = os.WriteFile(v1, []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 4\n"), 0o600)
		_ = os.WriteFile(v2, []byte("low 0\nhigh 0\nmax 2\noom 1\noom_kill 1\n"), 0o600)
		code := tc.code
		if tc.file != "" {
			code = fmt.Sprintf("printf 'oom 9\\noom_kill 9\\n' > %q\n%s", tc.file, tc.code)
		}
		r := runHelper(t, codeStdin(code, nil), []string{envCgroupV1 + "=" + tc.v1, envCgroupV2 + "=" + tc.v2},
			shArgs(tc.timeout, "100", nil)...)
		if r.status.OOMKilled != tc.wantOOM || r.status.ExitCode != tc.wantExit || r.status.Signal != tc.wantSig || r.exitCode != tc.wantExit {
			t.Errorf("%s: status %+v, want oom %v exit %d signal %d", tc.name, r.status, tc.wantOOM, tc.wantExit, tc.wantSig)
		}
	}
}

func TestParseRunFlags(t *testing.T) {
	o, err := parseRunFlags([]string{"--interp", " python3, ,python ", "--code-ext", ".py", "--timeout", "1m", "--max-output", "42",
		"--workdir", "/opt/workspace", "--spec", "h", "--", "--timeout", "x"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.interps, "|") != "python3|python" || o.codeExt != ".py" || o.timeout != time.Minute || o.maxOutput != 42 ||
		o.workdir != "/opt/workspace" || o.spec != "h" || o.noCode || strings.Join(o.args, "|") != "--timeout|x" {
		t.Errorf("parsed %+v", o)
	}
	o, err = parseRunFlags([]string{"--interp", "node", "--code-ext", "mjs", "--timeout", "1s", "--max-output", "1"})
	if err != nil || o.codeExt != ".mjs" || len(o.args) != 0 {
		t.Errorf("--code-ext without a dot: %+v, %v", o, err)
	}
	o, err = parseRunFlags([]string{"--interp", "sh", "--no-code", "--timeout", "1s", "--max-output", "1", "-c", "x"})
	if err == nil {
		t.Errorf("an unknown flag before -- was accepted: %+v", o)
	}
	o, err = parseRunFlags([]string{"--interp", "sh", "--no-code", "--timeout", "1s", "--max-output", "1", "script", "-c"})
	if err != nil || !o.noCode || strings.Join(o.args, "|") != "script|-c" {
		t.Errorf("args without --: %+v, %v", o, err)
	}
}

func TestSpecMismatch(t *testing.T) {
	cl := func(args ...string) []byte { return []byte(strings.Join(args, "\x00") + "\x00") }
	cases := []struct {
		name     string
		cmdline  []byte
		want     string
		have     string
		mismatch bool
	}{
		{"equal", cl("/opt/sandbox/sandbox-helper", "init", "--idle-ttl", "30m", "--spec", "abc"), "abc", "abc", false},
		{"differs", cl("/opt/sandbox/sandbox-helper", "init", "--spec", "abc", "--idle-ttl", "30m"), "def", "abc", true},
		{"equals form", cl("sandbox-helper", "init", "--spec=abc"), "def", "abc", true},
		{"single dash", cl("sandbox-helper", "init", "-spec", "abc"), "abc", "abc", false},
		{"last wins", cl("sandbox-helper", "init", "--spec", "old", "--spec", "abc"), "abc", "abc", false},
		{"empty spec in pid 1", cl("sandbox-helper", "init", "--spec", ""), "abc", "", true},
		{"pid 1 carries none", cl("/sbin/tini", "--", "sleep", "infinity"), "abc", "", false},
		{"dangling --spec", cl("sandbox-helper", "init", "--spec"), "abc", "", false},
		{"no trailing NUL", []byte("sandbox-helper\x00init\x00--spec\x00abc"), "abc", "abc", false},
		{"empty cmdline", nil, "abc", "", false},
		{"nothing wanted", cl("sandbox-helper", "init", "--spec", "abc"), "", "", false},
	}
	for _, tc := range cases {
		have, mismatch := specMismatch(tc.cmdline, tc.want)
		if have != tc.have || mismatch != tc.mismatch {
			t.Errorf("%s: specMismatch = %q, %v, want %q, %v", tc.name, have, mismatch, tc.have, tc.mismatch)
		}
	}
}

func TestExitStatus(t *testing.T) {
	exited := func(c int) syscall.WaitStatus { return syscall.WaitStatus(c << 8) }
	signaled := func(s syscall.Signal) syscall.WaitStatus { return syscall.WaitStatus(s) }
	cases := []struct {
		name      string
		ws        syscall.WaitStatus
		timedOut  bool
		oomUp     bool
		exit, sig int
		oom, to   bool
	}{
		{"exit 0", exited(0), false, false, 0, 0, false, false},
		{"exit 3", exited(3), false, false, 3, 0, false, false},
		{"sigkill", signaled(syscall.SIGKILL), false, false, 137, 9, false, false},
		{"sigkill with oom", signaled(syscall.SIGKILL), false, true, 137, 9, true, false},
		{"sigsegv with oom counter up", signaled(syscall.SIGSEGV), false, true, 139, 11, false, false},
		{"exit with oom counter up", exited(1), false, true, 1, 0, false, false},
		{"timed out", signaled(syscall.SIGKILL), true, true, 124, 0, false, true},
	}
	for _, tc := range cases {
		st := exitStatus(tc.ws, tc.timedOut, tc.oomUp)
		if st.ExitCode != tc.exit || st.Signal != tc.sig || st.OOMKilled != tc.oom || st.TimedOut != tc.to {
			t.Errorf("%s: %+v", tc.name, st)
		}
	}
}

func TestParseOOMKill(t *testing.T) {
	cases := []struct {
		in string
		n  uint64
		ok bool
	}{
		{"oom_kill_disable 0\nunder_oom 0\noom_kill 7\n", 7, true},
		{"low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n", 0, true},
		{"oom 3\n", 0, false},
		{"oom_kill x\n", 0, false},
		{"", 0, false},
	}
	for _, tc := range cases {
		n, ok := parseOOMKill([]byte(tc.in))
		if n != tc.n || ok != tc.ok {
			t.Errorf("parseOOMKill(%q) = %d, %v, want %d, %v", tc.in, n, ok, tc.n, tc.ok)
		}
	}
}

func TestDescribeCandidates(t *testing.T) {
	for in, want := range map[string]string{
		"bash":             "bash",
		"python3,python":   "python3 (or python)",
		"node,nodejs,deno": "node (or nodejs or deno)",
	} {
		if got := describeCandidates(strings.Split(in, ",")); got != want {
			t.Errorf("describeCandidates(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOutputSealed checks that nothing is framed after the Status.
func TestOutputSealed(t *testing.T) {
	var b bytes.Buffer
	o := newOutput(&b)
	if !o.frame(wire.Stdout, []byte("a")) {
		t.Fatal("frame before status not written")
	}
	o.status(wire.RunStatus{ExitCode: 3})
	if o.frame(wire.Stderr, []byte("late")) {
		t.Error("frame after status written")
	}
	o.status(wire.RunStatus{ExitCode: 4})
	var r result
	decode(t, &r, b.Bytes())
	if string(r.stdout) != "a" || len(r.stderr) != 0 || r.status.ExitCode != 3 {
		t.Errorf("got %+v", r)
	}
}

// TestTargetMismatch: a run or fs for sandbox X refuses a container whose
// PID 1 is not the helper's init for X (another sandbox renamed to X's
// name, a user's look-alike, the egress sidecar).
func TestTargetMismatch(t *testing.T) {
	cl := func(args ...string) []byte { return []byte(strings.Join(args, "\x00") + "\x00") }
	cases := []struct {
		name     string
		cmdline  []byte
		want     string
		mismatch bool
	}{
		{"same", cl("/opt/sandbox/sandbox-helper", "init", "--idle-ttl", "1m", "--target", "u1/s", "--spec", "x"), "u1/s", false},
		{"another session", cl("/opt/sandbox/sandbox-helper", "init", "--target", "u1/t"), "u1/s", true},
		{"the scope, not the session", cl("/opt/sandbox/sandbox-helper", "init", "--target", "u1"), "u1/s", true},
		{"no target", cl("/opt/sandbox/sandbox-helper", "init", "--idle-ttl", "1m"), "u1", true},
		{"the egress sidecar", cl("/opt/sandbox/sandbox-helper", "proxy", "--target", "u1"), "u1", true},
		{"a user's program", cl("sleep", "infinity"), "u1", true},
		{"a target in the program's arguments", cl("/bin/sh", "-c", "x", "--", "init", "--target", "u1"), "u1", true},
		{"nothing asked", cl("sleep", "1"), "", false},
		{"empty", nil, "u1", true},
	}
	for _, c := range cases {
		if _, got := targetMismatch(c.cmdline, c.want); got != c.mismatch {
			t.Errorf("%s: mismatch %v, want %v", c.name, got, c.mismatch)
		}
	}
}

// TestRunInterpArgs: --interp-arg values come after the interpreter and
// before the code file, then the program's arguments (a configured
// language's interpreter = ["awk", "-f"]).
func TestRunInterpArgs(t *testing.T) {
	t.Parallel()
	args := []string{"run", "--interp", "sh", "--interp-arg", "-c", "--interp-arg", `printf '%s|' "$0" "$@"`,
		"--code-ext", ".x", "--timeout", "10s", "--max-output", "1048576", "--", "a", "-b"}
	r := runHelper(t, codeStdin("ignored", nil), nil, args...)
	if r.status.ExitCode != 0 {
		t.Fatalf("status %+v\n%s", r.status, r.helperStderr)
	}
	if !regexp.MustCompile(`^/\S+/main\.x\|a\|-b\|$`).Match(r.stdout) {
		t.Errorf("stdout %q: want CODEFILE|a|-b|", r.stdout)
	}
}

// Right after a start PID 1 can still be the runtime's init (`runc init`):
// checkPID1 looks again until it is the helper's init, and refuses only a
// PID 1 that stays something else.
func TestCheckPID1Settles(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "cmdline")
	if err := os.WriteFile(f, []byte("runc\x00init\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer func(p string, d time.Duration) { proc1Cmdline, pid1Settle = p, d }(proc1Cmdline, pid1Settle)
	proc1Cmdline, pid1Settle = f, 2*time.Second
	go func() {
		time.Sleep(150 * time.Millisecond)
		tmp := f + ".new"
		_ = os.WriteFile(tmp, []byte("/opt/sandbox/sandbox-helper\x00init\x00--target\x00u1\x00"), 0o644)
		_ = os.Rename(tmp, f)
	}()
	if st := checkPID1("u1", ""); st != nil {
		t.Fatalf("PID 1 became the helper's init after 150 ms: %+v", st)
	}
	// One that stays another program: refused, after the settle time.
	_ = os.WriteFile(f, []byte("sleep\x00infinity\x00"), 0o644)
	pid1Settle = 300 * time.Millisecond
	start := time.Now()
	st := checkPID1("u1", "")
	if st == nil || st.ErrorCode != wire.ErrNotSandbox || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("a PID 1 that is not the helper: %+v after %v", st, time.Since(start))
	}
	// Another target: refused at once (it is the helper's init).
	_ = os.WriteFile(f, []byte("/opt/sandbox/sandbox-helper\x00init\x00--target\x00u2\x00"), 0o644)
	pid1Settle = 5 * time.Second
	start = time.Now()
	if st := checkPID1("u1", ""); st == nil || time.Since(start) > 4*time.Second {
		t.Fatalf("another sandbox's init: %+v after %v", st, time.Since(start))
	}
}
