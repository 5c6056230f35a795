package plugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"

	"github.com/docker-sandbox/docker-sandbox/internal/testenv"
)

// The runtime the tests register for gVisor, with the arguments this
// Debian build needs (ptrace platform; no network of its own, as a
// --network none sandbox has none).
const runscRuntimeName = "docker-sandbox-test-runsc"

// runscHostRuntimeName is its sibling with --network=host, which the plugin
// picks by itself for a sandbox with a network (proxy mode): gVisor then
// uses the container's own network namespace.
const runscHostRuntimeName = runscRuntimeName + "-host"

// daemonJSON and its backup, which scripts/test.sh restores if a run dies
// before the test's own cleanup (the owner file names the test process:
// while it lives, no other run's cleanup touches the engine). A reload
// replaces the engine's runtimes only when the file has a "runtimes" key,
// so undoing takes two steps: the original with its runtimes written out
// ("runtimes": {} when it had none) and a reload, then the original bytes.
// (The names differ from the first version's .docker-sandbox-test-backup,
// which any run's cleanup restored, also while another run used it.)
var (
	daemonJSON       = envOr("DOCKER_SANDBOX_TEST_DAEMON_JSON", "/etc/docker/daemon.json")
	daemonJSONBackup = daemonJSON + ".docker-sandbox-runsc-backup"
	daemonJSONUndo   = daemonJSON + ".docker-sandbox-runsc-undo"
	daemonJSONOwner  = daemonJSON + ".docker-sandbox-runsc-owner"
)

// absentMarker in the backup means there was no daemon.json.
const absentMarker = "docker-sandbox-test: no daemon.json before\n"

// registerRunsc adds the gVisor runtime to the local engine's daemon.json
// and reloads the engine (SIGHUP); the cleanup puts the file back as it was
// and reloads again. Returns the runtime's name.
func registerRunsc(t *testing.T) string {
	t.Helper()
	name, restore, err := registerRunscRuntime()
	var un *runscUnavailable
	if errors.As(err, &un) {
		testenv.Skip(t, "%s", un.msg)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := restore(); err != nil {
			t.Error(err)
		}
	})
	return name
}

// runscUnavailable: this machine cannot run the gVisor tests (no runsc, no
// local dockerd to reload): a skip outside CI, a failure in it.
type runscUnavailable struct{ msg string }

func (e *runscUnavailable) Error() string { return e.msg }

// registerRunscRuntime registers runscRuntimeName with the local engine and
// returns how to undo it (the engine's runtimes and daemon.json exactly as
// they were). It is used by TestRuntimeRunsc and by the runsc pass
// (TestMain, DOCKER_SANDBOX_TEST_PASS=runsc).
func registerRunscRuntime() (string, func() error, error) {
	unavailable := func(format string, args ...any) (string, func() error, error) {
		return "", nil, &runscUnavailable{msg: fmt.Sprintf(format, args...)}
	}
	runsc, err := osexec.LookPath("runsc")
	if err != nil {
		return unavailable("runsc is not installed (scripts/test.sh installs Debian's runsc package)")
	}
	pid, err := dockerdPID()
	if err != nil {
		return unavailable("the engine is not a local dockerd this test can reload: %v", err)
	}
	if _, err := os.Stat(daemonJSONBackup); err == nil {
		owner, _ := os.ReadFile(daemonJSONOwner)
		return "", nil, fmt.Errorf("%s exists: another run (pid %s) has gVisor registered, or one died before restoring %s (scripts/test.sh puts it back at its cleanup)", daemonJSONBackup, strings.TrimSpace(string(owner)), daemonJSON)
	}
	orig, err := os.ReadFile(daemonJSON)
	existed := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return unavailable("cannot read %s: %v", daemonJSON, err)
	}
	cfg := map[string]any{}
	if existed && len(bytes.TrimSpace(orig)) > 0 {
		if err := json.Unmarshal(orig, &cfg); err != nil {
			return "", nil, fmt.Errorf("%s is not JSON: %v", daemonJSON, err)
		}
	}
	// The runtimes the engine knows now, which the undo step names: a
	// reload with a "runtimes" key drops the ones it does not name (also
	// the io.containerd.* aliases dockerd 20.10 adds at start).
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return "", nil, err
	}
	defer cli.Close()
	info, err := cli.Info(context.Background())
	if err != nil {
		return "", nil, err
	}
	before := runtimeNames(info.Runtimes)
	runtimes, _ := cfg["runtimes"].(map[string]any)
	if runtimes == nil {
		runtimes = map[string]any{}
	}
	for name, rt := range info.Runtimes {
		if _, ok := runtimes[name]; ok || name == "runc" || name == info.DefaultRuntime {
			continue // runc and the default are built in, and cannot be named
		}
		runtimes[name] = rt.Runtime
	}
	cfg["runtimes"] = runtimes
	undo, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", nil, err
	}
	runtimes[runscRuntimeName] = map[string]any{"path": runsc, "runtimeArgs": []string{"--platform=ptrace", "--network=none"}}
	runtimes[runscHostRuntimeName] = map[string]any{"path": runsc, "runtimeArgs": []string{"--platform=ptrace", "--network=host"}}
	cfg["runtimes"] = runtimes
	updated, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", nil, err
	}
	backup := []byte(absentMarker)
	if existed {
		backup = orig
	}
	if err := os.WriteFile(daemonJSONUndo, append(undo, '\n'), 0o600); err != nil {
		return unavailable("cannot write %s: %v", daemonJSONUndo, err)
	}
	if err := os.WriteFile(daemonJSONOwner, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		_ = os.Remove(daemonJSONUndo)
		return unavailable("cannot write %s: %v", daemonJSONOwner, err)
	}
	if err := os.WriteFile(daemonJSONBackup, backup, 0o600); err != nil {
		_ = os.Remove(daemonJSONUndo)
		_ = os.Remove(daemonJSONOwner)
		return unavailable("cannot write %s: %v", daemonJSONBackup, err)
	}
	restore := func() error {
		var errs []error
		if err := writeFileAtomic(daemonJSON, append(undo, '\n')); err != nil {
			errs = append(errs, err)
		}
		_ = syscall.Kill(pid, syscall.SIGHUP)
		if err := waitRuntime(cli2(), runscHostRuntimeName, false); err != nil {
			errs = append(errs, err)
		}
		if info, err := cli2().Info(context.Background()); err != nil || runtimeNames(info.Runtimes) != before {
			errs = append(errs, fmt.Errorf("the engine's runtimes after the test: %v (%v), before: %s", runtimeNames(info.Runtimes), err, before))
		}
		if existed {
			if err := writeFileAtomic(daemonJSON, orig); err != nil {
				errs = append(errs, err)
			}
		} else {
			_ = os.Remove(daemonJSON)
		}
		_ = os.Remove(daemonJSONUndo)
		_ = os.Remove(daemonJSONBackup)
		_ = os.Remove(daemonJSONOwner)
		return errors.Join(errs...)
	}
	if err := os.MkdirAll(filepath.Dir(daemonJSON), 0o755); err != nil {
		return "", nil, errors.Join(err, restore())
	}
	if err := writeFileAtomic(daemonJSON, append(updated, '\n')); err != nil {
		return "", nil, errors.Join(err, restore())
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		return "", nil, errors.Join(fmt.Errorf("reloading dockerd (pid %d): %v", pid, err), restore())
	}
	if err := waitRuntime(cli2(), runscHostRuntimeName, true); err != nil {
		return "", nil, errors.Join(err, restore())
	}
	return runscRuntimeName, restore, nil
}

// cli2 is an engine client for use outside a test (TestMain).
func cli2() *client.Client {
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		panic(err)
	}
	return c
}

func writeFileAtomic(path string, data []byte) error {
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp := path + ".docker-sandbox-test-tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// dockerdPID finds the local dockerd: its pid file, else the process list.
func dockerdPID() (int, error) {
	if b, err := os.ReadFile("/var/run/docker.pid"); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && syscall.Kill(pid, 0) == nil {
			return pid, nil
		}
	}
	out, err := osexec.Command("pidof", "dockerd").Output()
	if err != nil {
		return 0, fmt.Errorf("no dockerd process here: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 1 {
		return 0, fmt.Errorf("%d dockerd processes", len(f))
	}
	return strconv.Atoi(f[0])
}

func runtimeNames(rts map[string]system.RuntimeWithStatus) string {
	var names []string
	for n := range rts {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// waitRuntime polls the engine until the runtime is (or is no longer) known.
func waitRuntime(cli *client.Client, name string, present bool) error {
	defer cli.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := cli.Info(context.Background())
		if err == nil {
			if _, ok := info.Runtimes[name]; ok == present {
				return nil
			}
			err = fmt.Errorf("runtime %s known to the engine: %v, want %v", name, !present, present)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRuntimeRunsc runs sandboxes under gVisor: the program runs in
// gVisor's kernel, hardened as with runc, and the helper's timeout and
// exit codes work the same.
func TestRuntimeRunsc(t *testing.T) {
	needE2E(t)
	rt := registerRunsc(t)
	s := newScope(t)
	t.Cleanup(func() { sb(t, "rm", "-f", s) })

	j := decodeExec(t, sb(t, "exec", "-s", s, "--runtime", rt, "--format", "json", "-c",
		"uname -r; id -u; grep -E '^(NoNewPrivs|CapEff)' /proc/self/status; touch /x 2>/dev/null && echo rw || echo ro; echo data > f; exit 3"))
	host, _ := osexec.Command("uname", "-r").Output()
	lines := strings.Split(j.Stdout, "\n")
	if j.ExitCode != 3 || len(lines) < 5 || lines[0] == strings.TrimSpace(string(host)) || lines[1] != "65532" || lines[len(lines)-2] != "ro" {
		t.Fatalf("under %s (host kernel %s): %+v", rt, strings.TrimSpace(string(host)), j)
	}
	if !strings.Contains(j.Stdout, "CapEff:\t0000000000000000") {
		t.Errorf("capabilities under %s:\n%s", rt, j.Stdout)
	}
	t.Logf("under %s: kernel %q (host %q)", rt, lines[0], strings.TrimSpace(string(host)))
	c := inspectSandbox(t, s, "")
	if c.HostConfig.Runtime != rt || !c.HostConfig.ReadonlyRootfs || strings.Join(c.HostConfig.CapDrop, ",") != "ALL" || string(c.HostConfig.NetworkMode) != "none" {
		t.Fatalf("container: runtime %q, read-only %v, cap drop %v, network %q", c.HostConfig.Runtime, c.HostConfig.ReadonlyRootfs, c.HostConfig.CapDrop, c.HostConfig.NetworkMode)
	}

	// The main job, warm, in the same sandbox (its data is there).
	r := sbIn(t, "print(6*7)\n", "exec", "-s", s, "--runtime", rt, "--lang", "python")
	wantStdout(t, r, "42\n")
	wantStdout(t, sb(t, "exec", "-s", s, "--runtime", rt, "-c", "cat f"), "data\n")

	// The timeout kills the program's whole group.
	start := time.Now()
	r = sb(t, "exec", "-s", s, "--runtime", rt, "--timeout", "2s", "-c", "sleep 60 & sleep 60; echo never")
	wantCode(t, r, 124)
	if d := time.Since(start); d > 2*time.Second+10*time.Second {
		t.Errorf("timeout of 2s ended after %s", d)
	}

	// auto picks the registered gVisor runtime (the --network=none one, for
	// a sandbox without a network): the same sandbox, and it says so.
	j = decodeExec(t, sb(t, "exec", "-s", s, "--runtime", "auto", "--format", "json", "-c", "cat f"))
	if j.Runtime != rt || j.Stdout != "data\n" || j.Created {
		t.Fatalf("--runtime auto: %+v", j)
	}
	wantStdout(t, sb(t, "inspect", "--format", "{{.limits.runtime}}", s), rt+"\n")

	// The same sandbox asked for without the runtime is another sandbox.
	r = sb(t, "exec", "-s", s, "--format", "json", "-c", "true")
	wantCode(t, r, 125)
	if e := decodeErr(t, r); e.Error.Code != "sandbox_mismatch" {
		t.Fatalf("runc call on a runsc sandbox: %+v", e)
	}
}

// runscForTest returns the gVisor runtime to test with: the runsc pass's
// (registered for the whole run), else one registered for this test.
func runscForTest(t *testing.T) string {
	t.Helper()
	if underRunsc() {
		return runscRuntimeName
	}
	return registerRunsc(t)
}

// TestRuntimeRunscDifferences pins what differs under gVisor (Debian's
// runsc 2022-12, ptrace platform), as the README's "runc vs runsc" table
// says: each row is either handled by the plugin (the same result as under
// runc) or is gVisor's documented behaviour.
func TestRuntimeRunscDifferences(t *testing.T) {
	needE2E(t)
	rt := runscForTest(t)
	s := newScope(t)
	in := func(t *testing.T, code string) result {
		t.Helper()
		return sb(t, "exec", "-s", s, "--runtime", rt, "--lang", "sh", "-c", code)
	}
	wantStdout(t, in(t, "echo warm"), "warm\n")

	t.Run("no-new-privileges from the config and prctl", func(t *testing.T) {
		// gVisor's /proc/self/status has no NoNewPrivs line; the
		// container's config asks for it, and gVisor's kernel answers
		// PR_GET_NO_NEW_PRIVS (39) with 1.
		c := inspectSandbox(t, s, "")
		if c.HostConfig.Runtime != rt || strings.Join(c.HostConfig.SecurityOpt, ",") != "no-new-privileges" {
			t.Fatalf("runtime %q, SecurityOpt %q", c.HostConfig.Runtime, c.HostConfig.SecurityOpt)
		}
		wantStdout(t, in(t, "grep -c '^NoNewPrivs:' /proc/self/status; true"), "0\n")
		r := sb(t, "exec", "-s", s, "--runtime", rt, "--lang", "python", "-c",
			"import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nprint(libc.prctl(39, 0, 0, 0, 0))")
		wantStdout(t, r, "1\n")
	})
	t.Run("a setuid-root binary does not raise privileges", func(t *testing.T) {
		r := sb(t, "exec", "-s", s, "--runtime", rt, "--lang", "python", "-c", setuidProbe)
		wantStdout(t, r, "setuid bit: yes\neuid after exec: 65532\n")
	})
	t.Run("ls and stat fail with EINVAL", func(t *testing.T) {
		// coreutils 9.1's statx with AT_STATX_DONT_SYNC is refused by
		// this gVisor: ls -l and stat fail; shell tests and python work.
		r := in(t, "ls -l / >/dev/null 2>&1; echo ls $?; stat / >/dev/null 2>&1; echo stat $?; test -d / && echo test ok")
		wantStdout(t, r, "ls 2\nstat 1\ntest ok\n")
	})
}

// setuidProbe runs the image's setuid-root passwd (which exits at once:
// the sandbox's user has no name) and reads the effective uid of its
// exited, not yet reaped process (waitid WNOWAIT): 0 without
// no-new-privileges (checked under runc with no-new-privileges=false),
// 65532 with it.
const setuidProbe = `import os, stat
st = os.stat("/usr/bin/passwd")
print("setuid bit:", "yes" if st.st_mode & stat.S_ISUID and st.st_uid == 0 else "no")
pid = os.fork()
if pid == 0:
    fd = os.open("/dev/null", os.O_RDWR)
    os.dup2(fd, 0); os.dup2(fd, 1); os.dup2(fd, 2)
    os.execv("/usr/bin/passwd", ["passwd"])
os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
euid = None
for line in open("/proc/%d/status" % pid):
    if line.startswith("Uid:"):
        euid = line.split()[2]
print("euid after exec:", euid)
os.waitpid(pid, 0)
`

// TestRuntimeRunscProxy: a proxy-mode sandbox under gVisor. Asked for the
// --network=none gVisor runtime, the plugin picks its NAME-host sibling
// (registered with --network=host) by itself, and so does auto; the
// program reaches an allowed host through the egress sidecar from gVisor's
// kernel. (It uses the egress fixture: run it when no egress test runs.)
func TestRuntimeRunscProxy(t *testing.T) {
	needE2E(t)
	rt := runscForTest(t)
	f := egSetup(t)
	s := newScope(t)
	code := fmt.Sprintf("import os, urllib.request\nprint(os.uname().release)\nprint(urllib.request.urlopen(\"http://%s/hello\", timeout=10).read().decode().strip())", egUpName)
	host, _ := osexec.Command("uname", "-r").Output()
	for _, asked := range []string{rt, "auto"} {
		r := sb(t, append(append([]string{"exec"}, egPolicyArgs(f, s)...), "--runtime", asked, "--lang", "python", "--format", "json", "-c", code)...)
		wantCode(t, r, 0)
		j := decodeExec(t, r)
		lines := strings.Split(j.Stdout, "\n")
		if j.Runtime != runscHostRuntimeName || len(lines) != 3 || lines[0] == strings.TrimSpace(string(host)) || lines[1] != "hello from upstream, host "+egUpName {
			t.Fatalf("--runtime %s in proxy mode (host kernel %s): %+v", asked, strings.TrimSpace(string(host)), j)
		}
		if c := inspectSandbox(t, s, ""); c.HostConfig.Runtime != runscHostRuntimeName {
			t.Fatalf("--runtime %s in proxy mode: the container's runtime is %q", asked, c.HostConfig.Runtime)
		}
	}
	// A host the policy does not grant stays refused under gVisor.
	r := sb(t, append(append([]string{"exec"}, egPolicyArgs(f, s)...), "--runtime", rt, "--lang", "python", "-c",
		"import urllib.request, urllib.error\ntry:\n    urllib.request.urlopen('http://not-allowed.test/', timeout=10)\nexcept urllib.error.HTTPError as e:\n    print(e.code)")...)
	wantStdout(t, r, "403\n")
}
