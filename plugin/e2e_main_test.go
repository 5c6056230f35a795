package plugin_test

// End-to-end tests: they run the built plugin (through the installed docker
// CLI, or standalone) against the real engine. scripts/test.sh sets them up:
//
//	DOCKER_SANDBOX_E2E=1               turn them on
//	DOCKER_SANDBOX_BIN=path            the built plugin binary
//	DOCKER_CONFIG=dir                  a private config with the plugin in cli-plugins/
//	DOCKER_SANDBOX_RUNTIME_BASE=ref    the offline base image
//	DOCKER_SANDBOX_TEST_BUSYBOX=ref    a shell-only image
//	DOCKER_SANDBOX_TEST_RUN=id         label put on everything the run creates

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/docker-sandbox/docker-sandbox/internal/testenv"
)

var (
	e2eOn      = os.Getenv("DOCKER_SANDBOX_E2E") == "1"
	pluginBin  = os.Getenv("DOCKER_SANDBOX_BIN")
	busybox    = os.Getenv("DOCKER_SANDBOX_TEST_BUSYBOX")
	repoRoot   string
	engineOnce sync.Once
	engineCli  *client.Client
)

func init() {
	_, f, _, _ := runtime.Caller(0)
	repoRoot = filepath.Dir(filepath.Dir(f))
}

// The runsc pass: with DOCKER_SANDBOX_TEST_PASS=runsc (scripts/test.sh's
// second pass over the suites whose behaviour depends on the runtime), the
// gVisor runtime is registered with the engine for the whole run and every
// sandbox the tests make uses it (DOCKER_SANDBOX_RUNTIME, the configuration
// key `runtime`); the engine's runtimes and daemon.json are put back after.
const envTestPass = "DOCKER_SANDBOX_TEST_PASS"

// underRunsc reports whether this run is the runsc pass.
func underRunsc() bool { return os.Getenv(envTestPass) == "runsc" }

func TestMain(m *testing.M) {
	if os.Getenv(envTestPass) == "runsc-bench" {
		os.Exit(runscBench())
	}
	if !underRunsc() {
		os.Exit(m.Run())
	}
	name, restore, err := registerRunscRuntime()
	if err != nil {
		fmt.Fprintf(os.Stderr, "the runsc pass: %v\n", err)
		os.Exit(1)
	}
	os.Setenv("DOCKER_SANDBOX_RUNTIME", name)
	code := m.Run()
	if err := restore(); err != nil {
		fmt.Fprintf(os.Stderr, "the runsc pass: restoring the engine: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

// needE2E skips outside the end-to-end setup, saying why; inside CI a
// missing setup is a failure, never a skip.
func needE2E(t *testing.T) {
	t.Helper()
	if e2eOn && pluginBin != "" {
		return
	}
	testenv.Skip(t, "end-to-end test: needs a Docker Engine and the built plugin (DOCKER_SANDBOX_E2E=1, DOCKER_SANDBOX_BIN): run scripts/test.sh")
}

// needFixture returns the values of vars, which scripts/test.sh sets when
// it starts a test's fixture (what: "TEST test", fixture: what it is; run:
// the -run pattern that starts it). When one is unset the test skips
// outside scripts/test.sh, saying what it needs; under CI it fails.
func needFixture(t *testing.T, what, fixture, run string, vars ...string) []string {
	t.Helper()
	needE2E(t)
	vals := make([]string, len(vars))
	missing := false
	for i, v := range vars {
		vals[i] = os.Getenv(v)
		missing = missing || vals[i] == ""
	}
	if missing {
		testenv.Skip(t, "%s: needs the %s of scripts/test.sh (%s): run scripts/test.sh -run %s ./plugin/", what, fixture, strings.Join(vars, ", "), run)
	}
	return vals
}

// logTail logs the last 30 lines of a fixture's log file when t failed.
func logTail(t *testing.T, name, file string) {
	t.Helper()
	if !t.Failed() {
		return
	}
	b, _ := os.ReadFile(file)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	t.Logf("the end of %s's log:\n%s", name, strings.Join(lines, "\n"))
}

func engine(t *testing.T) *client.Client {
	t.Helper()
	engineOnce.Do(func() {
		c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			panic(err)
		}
		engineCli = c
	})
	return engineCli
}

func randID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newScope returns a fresh scope name and removes everything of that scope
// when the test ends, also when it fails.
func newScope(t *testing.T) string {
	t.Helper()
	s := "t" + randID(5)
	t.Cleanup(func() { removeScope(t, s) })
	return s
}

func removeScope(t *testing.T, s string) {
	ctx := context.Background()
	cli := engine(t)
	f := filters.NewArgs(filters.Arg("label", "com.docker.sandbox.scope="+s))
	cs, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	for _, c := range cs {
		_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	}
	for _, c := range cs {
		waitContainerGone(cli, c.ID)
	}
	vs, _ := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	for _, v := range vs.Volumes {
		if err := cli.VolumeRemove(ctx, v.Name, true); err != nil {
			t.Logf("cleanup: volume %s: %v", v.Name, err)
		}
	}
}

func waitContainerGone(cli *client.Client, id string) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := cli.ContainerInspect(context.Background(), id); err != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// result of one plugin invocation.
type result struct {
	Stdout, Stderr string
	Code           int
	Elapsed        time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s\n--- stderr\n%s", r.Code, trunc(r.Stdout), trunc(r.Stderr))
}

func trunc(s string) string {
	if len(s) > 4000 {
		return s[:4000] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}

// run describes one invocation.
type run struct {
	args       []string
	stdin      io.Reader
	env        []string
	dir        string
	standalone bool // run the binary directly instead of `docker sandbox`
	global     []string
	timeout    time.Duration
}

// sb runs `docker [global] sandbox ARGS` (or the standalone binary).
func sb(t *testing.T, args ...string) result {
	t.Helper()
	return sbRun(t, run{args: args})
}

// sbIn runs with stdin.
func sbIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return sbRun(t, run{args: args, stdin: strings.NewReader(stdin)})
}

func sbRun(t *testing.T, r run) result {
	t.Helper()
	timeout := r.timeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var cmd *osexec.Cmd
	if r.standalone {
		cmd = osexec.CommandContext(ctx, pluginBin, append(append([]string{}, r.global...), r.args...)...)
	} else {
		cmd = osexec.CommandContext(ctx, "docker", append(append(append([]string{}, r.global...), "sandbox"), r.args...)...)
	}
	cmd.Env = append(os.Environ(), r.env...)
	cmd.Dir = r.dir
	if cmd.Dir == "" {
		cmd.Dir = t.TempDir() // no project file of the repository's own
	}
	if r.stdin != nil {
		cmd.Stdin = r.stdin
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := result{Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(start)}
	if ee, ok := err.(*osexec.ExitError); ok {
		res.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %v: %v", cmd.Args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%v did not finish within %s:\n%s", cmd.Args, timeout, res)
	}
	return res
}

// execJSON mirrors the documented exec --format json schema.
type execJSON struct {
	Scope            string  `json:"scope"`
	Session          string  `json:"session"`
	Container        string  `json:"container"`
	Image            string  `json:"image"`
	Runtime          string  `json:"runtime"`
	Lang             string  `json:"lang"`
	ExitCode         int     `json:"exit_code"`
	Signal           *string `json:"signal"`
	TimedOut         bool    `json:"timed_out"`
	OOMKilled        bool    `json:"oom_killed"`
	SandboxRestarted bool    `json:"sandbox_restarted"`
	Stdout           string  `json:"stdout"`
	Stderr           string  `json:"stderr"`
	StdoutTruncated  bool    `json:"stdout_truncated"`
	StderrTruncated  bool    `json:"stderr_truncated"`
	DurationMS       int64   `json:"duration_ms"`
	Created          bool    `json:"created"`
	Result           *string `json:"result"`
	KernelRestarted  bool    `json:"kernel_restarted"`
	StateLost        bool    `json:"state_lost"`
	Error            *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type errJSON struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeExec(t *testing.T, r result) execJSON {
	t.Helper()
	var j execJSON
	dec := json.NewDecoder(strings.NewReader(r.Stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		t.Fatalf("exec --format json printed no valid object: %v\n%s", err, r)
	}
	return j
}

func decodeErr(t *testing.T, r result) errJSON {
	t.Helper()
	var j errJSON
	if err := json.Unmarshal([]byte(r.Stdout), &j); err != nil || j.Error.Code == "" {
		t.Fatalf("expected a JSON error object on stdout: %v\n%s", err, r)
	}
	return j
}

func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("want exit %d, got:\n%s", code, r)
	}
}

// objects counts what carries the plugin's labels for a scope (or all, "").
func objects(t *testing.T, scope string) (containers, volumes int) {
	t.Helper()
	ctx := context.Background()
	f := filters.NewArgs(filters.Arg("label", "com.docker.sandbox.managed=true"))
	if scope != "" {
		f.Add("label", "com.docker.sandbox.scope="+scope)
	}
	cs, err := engine(t).ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := engine(t).VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return len(cs), len(vs.Volumes)
}

// poll retries f until it returns nil or the deadline passes.
func poll(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not true after %s: %v", d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func lookupEnv(k string) string { return os.Getenv(k) }

// wantRuntime is the runtime the run's sandboxes run under: the runsc
// pass's, else the engine's default.
func wantRuntime(t *testing.T) string {
	t.Helper()
	if rt := os.Getenv("DOCKER_SANDBOX_RUNTIME"); rt != "" {
		return rt
	}
	info, err := engine(t).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.DefaultRuntime
}

// runscBench (DOCKER_SANDBOX_TEST_PASS=runsc-bench) registers the gVisor
// runtime as the runsc pass does, runs the command in
// DOCKER_SANDBOX_RUNSC_BENCH_CMD (bash -c, from the repository's root, e.g.
// "bash scripts/bench.sh --n 10") with DOCKER_SANDBOX_BENCH_RUNSC set to
// the runtime's name, and puts the engine back: the benchmarks' runsc rows
// on an engine that has no gVisor runtime of its own. No test runs:
//
//	DOCKER_SANDBOX_TEST_PASS=runsc-bench DOCKER_SANDBOX_RUNSC_BENCH_CMD='bash scripts/bench.sh' go test -v -count=1 -timeout 60m -run '^$' ./plugin/
//
// (-v: without it go test prints a passing package's output not at all.)
func runscBench() int {
	cmdline := os.Getenv("DOCKER_SANDBOX_RUNSC_BENCH_CMD")
	if cmdline == "" {
		fmt.Fprintln(os.Stderr, "runsc-bench: set DOCKER_SANDBOX_RUNSC_BENCH_CMD to the benchmark's command line")
		return 2
	}
	name, restore, err := registerRunscRuntime()
	if err != nil {
		fmt.Fprintf(os.Stderr, "runsc-bench: %v\n", err)
		return 1
	}
	cmd := osexec.Command("bash", "-c", cmdline)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "DOCKER_SANDBOX_BENCH_RUNSC="+name)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	code := 0
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "runsc-bench: %v\n", err)
		code = 1
	}
	if err := restore(); err != nil {
		fmt.Fprintf(os.Stderr, "runsc-bench: restoring the engine: %v\n", err)
		code = 1
	}
	return code
}
