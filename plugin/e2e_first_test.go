package plugin_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
)

// The first call of a sandbox runs its program through the container's own
// attach (exec/channel.First, exec/inside/stdin_server.go): the call
// attaches before it starts the container, and PID 1 starts a channel
// server on the container's stdin and stdout for that one call.

// runExecCreates counts the engine's exec_create events of the scope's
// container for `sandbox-helper run` (a run's own exec) between since and
// until; the exec channel's own exec (`sandbox-helper channel`) is not one.
func runExecCreates(t *testing.T, scope string, since, until time.Time) int {
	t.Helper()
	return execCreatesOf(t, scope, "sandbox-helper run ", since, until)
}

// A first call goes through the attach: no engine exec runs it, and its
// results are a plain exec's (stdout, stderr, exit code, stdin byte for
// byte; --format json with an output cap). The engine keeps nothing of its
// output (no log), the container's stdin closes after the call (StdinOnce:
// the server is gone, PID 1 holds /dev/null), and the calls that follow
// are ordinary. With exec_channel = false the first call is a plain exec.
func TestExecFirstThroughAttach(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	in := make([]byte, 300<<10)
	for i := range in {
		in[i] = byte(i * 13)
	}
	since := time.Now()
	r := sbRun(t, run{args: []string{"exec", "-s", scope, "-c", "cat; echo err >&2; exit 7"}, stdin: bytes.NewReader(in)})
	if r.Code != 7 || r.Stdout != string(in) || r.Stderr != "err\n" {
		t.Fatalf("first call: exit %d, %d bytes back of %d, stderr %q", r.Code, len(r.Stdout), len(in), r.Stderr)
	}
	if n := runExecCreates(t, scope, since, time.Now()); n != 0 {
		t.Fatalf("the first call made %d engine execs of a run: it did not go through the attach", n)
	}
	c, err := engine(t).ContainerInspect(context.Background(), "docker-sandbox-"+scope)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Config.OpenStdin || !c.Config.StdinOnce || c.HostConfig.LogConfig.Type != "none" {
		t.Fatalf("the attached sandbox: OpenStdin %v StdinOnce %v log %q", c.Config.OpenStdin, c.Config.StdinOnce, c.HostConfig.LogConfig.Type)
	}
	if rc, err := engine(t).ContainerLogs(context.Background(), c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true}); err == nil {
		b, _ := io.ReadAll(rc)
		rc.Close()
		if bytes.Contains(b, []byte("err")) || len(b) > 0 {
			t.Fatalf("the engine kept the first call's output: %q", b)
		}
	}
	// The server served its call and is gone; PID 1 holds none of the
	// container's streams.
	poll(t, 30*time.Second, func() error {
		r := sb(t, "exec", "-s", scope, "-c", `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c 'channel --firs[t]' || true`)
		if strings.TrimSpace(r.Stdout) != "0" {
			return fmt.Errorf("the first call's server still runs: %s", r)
		}
		return nil
	})
	// (Read from this machine: sandboxed code cannot read PID 1's fds.)
	for fd := 0; fd <= 2; fd++ {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", c.State.Pid, fd))
		if err != nil || l != "/dev/null" {
			t.Errorf("PID 1's fd %d: %q %v, want /dev/null", fd, l, err)
		}
	}

	// --format json and an output cap on a first call.
	j := decodeExec(t, sb(t, "exec", "-s", newScope(t), "--format", "json", "--max-output", "5", "--lang", "python", "-c", "print('abcdefgh'); import sys; sys.exit(3)"))
	if j.ExitCode != 3 || j.Stdout != "abcde" || !j.StdoutTruncated || !j.Created {
		t.Fatalf("json on a first call: %+v", j)
	}

	// exec_channel = false: a plain exec, and a plain container.
	off := newScope(t)
	since = time.Now()
	r = sbRun(t, run{args: []string{"exec", "-s", off, "-c", "echo off"}, env: []string{"DOCKER_SANDBOX_EXEC_CHANNEL=false"}})
	if r.Code != 0 || r.Stdout != "off\n" {
		t.Fatalf("first call with the channel off: %s", r)
	}
	if n := runExecCreates(t, off, since, time.Now()); n != 1 {
		t.Fatalf("the first call with the channel off made %d execs of a run, want 1", n)
	}
	if c, err := engine(t).ContainerInspect(context.Background(), "docker-sandbox-"+off); err != nil || c.Config.OpenStdin {
		t.Fatalf("with the channel off the sandbox has stdin open (%v)", err)
	}
}

// Sandboxed code of the first call kills the server that carries its own
// call (the same user): the call ends at once with its wrapper lost, as when
// code kills a channel's server, not at its timeout (the engine keeps an
// attach open while the container runs: PID 1 ends the stream); nothing of
// it lives on, and the next call works. The same when the code stops the
// server (SIGSTOP) instead.
func TestExecFirstServerKilled(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	killer := `for p in /proc/[0-9]*; do c=$(tr '\0' ' ' < $p/cmdline 2>/dev/null); case "$c" in "/opt/sandbox/sandbox-helper channel --first "*) kill -9 ${p#/proc/} && echo killed;; esac; done; sleep 1; echo alive; sleep 300`
	start := time.Now()
	r := sb(t, "exec", "-s", scope, "--timeout", "120s", "--format", "json", "-c", killer)
	if j := decodeExec(t, r); j.Error == nil || j.Error.Code != "wrapper_lost" {
		t.Fatalf("the first call that killed its server: %s", r)
	}
	if d := time.Since(start); d > 60*time.Second {
		t.Fatalf("the call took %v: it waited for its timeout instead of seeing its server die", d)
	}
	r = sb(t, "exec", "-s", scope, "-c", "echo after")
	if r.Code != 0 || r.Stdout != "after\n" {
		t.Fatalf("after the server was killed: %s", r)
	}
	// Stopped instead of killed: PID 1 kills a stopped channel server, and
	// the call ends the same way.
	stopper := strings.Replace(killer, "kill -9", "kill -STOP", 1)
	start = time.Now()
	r = sb(t, "exec", "-s", newScope(t), "--timeout", "120s", "--format", "json", "-c", stopper)
	if j := decodeExec(t, r); j.Error == nil || j.Error.Code != "wrapper_lost" {
		t.Fatalf("the first call that stopped its server: %s", r)
	}
	if d := time.Since(start); d > 60*time.Second {
		t.Fatalf("the call took %v: it waited for its timeout instead of seeing its server stopped", d)
	}
	poll(t, 30*time.Second, func() error {
		r := sb(t, "exec", "-s", scope, "-c", `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^slee[p] ' || true`)
		if strings.TrimSpace(r.Stdout) != "0" {
			return fmt.Errorf("a process of the killing call lives on: %s", r)
		}
		return nil
	})
}

// TestExecChannelThenStop: a stop right after a call returned never finds the sandbox busy: a call
// through a channel (the first call's, or a warm call's through the
// persistent channel) returns once its run's wrapper has exited, as a plain
// exec's call does (the main pass caught `stop` failing with scope_busy
// right after a first exec under load: the call had returned at the run's
// status, its wrapper still registered with PID 1).
func TestExecChannelThenStop(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	for i := 0; i < 6; i++ {
		wantCode(t, sb(t, "exec", "-s", scope, "-c", "echo first > f"), 0)
		if r := sb(t, "stop", scope); r.Code != 0 {
			t.Fatalf("round %d: stop right after a first exec: %s", i, r)
		}
		wantCode(t, sb(t, "exec", "-s", scope, "-c", "true"), 0)
		waitChannel(t, scope)
		wantCode(t, sb(t, "exec", "-s", scope, "-c", "cat f"), 0)
		if r := sb(t, "stop", scope); r.Code != 0 {
			t.Fatalf("round %d: stop right after a warm exec through the channel: %s", i, r)
		}
	}
}
