package plugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/docker-sandbox/docker-sandbox/exec/channel"
)

// The persistent exec channel (exec/channel, exec/inside/channel.go): a
// warm call goes through the sandbox's one long-lived channel exec instead
// of an engine exec of its own; any failure of the channel falls back to a
// plain exec within the same call, with the same result.

// chanSock is the socket of the exec channel of a scope's sandbox.
func chanSock(t *testing.T, scope string) string {
	t.Helper()
	dir, err := channel.Dir("")
	if err != nil {
		t.Fatal(err)
	}
	return channel.SocketPath(dir, engine(t).DaemonHost(), "docker-sandbox-"+scope)
}

// chanPIDs lists the channel processes serving sock.
func chanPIDs(sock string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(string(b), "\x00")
		if len(argv) > 1 && argv[1] == channel.Verb && strings.Contains(string(b), "\x00"+sock+"\x00") {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !bytes.Contains(st, []byte(") Z ")) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// waitChannel waits until the scope's channel serves calls.
func waitChannel(t *testing.T, scope string) {
	t.Helper()
	sock := chanSock(t, scope)
	poll(t, 30*time.Second, func() error {
		if _, err := os.Stat(sock); err != nil {
			return fmt.Errorf("no channel socket %s", sock)
		}
		return nil
	})
}

// settleChannel waits, after a scope's first call, until the channel
// process that call started serves the scope: it starts after the call's
// program and makes its engine exec after the call returned, so a count
// of the sandbox's execs that begins before it sees that exec too (the
// main pass caught TestCpLocalRoute counting it for a copy). Nothing to
// wait for with exec_channel off, or under gVisor's runtime (a runtime
// other than the engine's native one takes no channel).
func settleChannel(t *testing.T, scope string) {
	t.Helper()
	if os.Getenv("DOCKER_SANDBOX_EXEC_CHANNEL") == "false" || underRunsc() {
		return
	}
	waitChannel(t, scope)
}

// waitNoChannel waits until no channel process serves the scope and its
// socket is gone.
func waitNoChannel(t *testing.T, scope string, d time.Duration) {
	t.Helper()
	sock := chanSock(t, scope)
	poll(t, d, func() error {
		if p := chanPIDs(sock); len(p) > 0 {
			return fmt.Errorf("channel processes %v still run", p)
		}
		if _, err := os.Stat(sock); err == nil {
			return fmt.Errorf("channel socket %s still there", sock)
		}
		return nil
	})
}

// execCreates counts the engine's exec_create events of the scope's
// container between since and until (the engine lists only running execs).
func execCreates(t *testing.T, scope string, since, until time.Time) int {
	t.Helper()
	return execCreatesOf(t, scope, "", since, until)
}

// execCreatesOf counts those whose command line holds cmd ("": any).
func execCreatesOf(t *testing.T, scope, cmd string, since, until time.Time) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := filters.NewArgs(filters.Arg("type", "container"), filters.Arg("container", "docker-sandbox-"+scope))
	msgs, errs := engine(t).Events(ctx, events.ListOptions{Filters: f,
		Since: strconv.FormatInt(since.Add(-time.Second).Unix(), 10), Until: strconv.FormatInt(until.Add(time.Second).Unix()+1, 10)})
	n := 0
	for {
		select {
		case m := <-msgs:
			if strings.HasPrefix(string(m.Action), "exec_create") && strings.Contains(string(m.Action), cmd) {
				if ts := time.Unix(0, m.TimeNano); !ts.Before(since) && !ts.After(until) {
					n++
				}
			}
		case err := <-errs:
			if err != nil && err != io.EOF {
				t.Fatalf("engine events: %v", err)
			}
			return n
		}
	}
}

// warmChannel makes the scope's sandbox and its channel.
func warmChannel(t *testing.T, scope string, extra ...string) {
	t.Helper()
	wantCode(t, sb(t, append(append([]string{"exec", "-s", scope}, extra...), "-c", "true")...), 0)
	waitChannel(t, scope)
}

// A warm call goes through the channel: the engine gets no exec for it.
// Results are those of a plain exec: stdout, stderr, exit code, stdin byte
// for byte, --format json; ls and inspect say the sandbox has a channel.
func TestExecChannelWarmCalls(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	warmChannel(t, scope)
	since := time.Now()

	r := sb(t, "exec", "-s", scope, "-c", "echo out; echo err >&2; exit 7")
	if r.Code != 7 || r.Stdout != "out\n" || r.Stderr != "err\n" {
		t.Fatalf("through the channel: %s", r)
	}
	in := make([]byte, 300<<10)
	for i := range in {
		in[i] = byte(i * 7)
	}
	r = sbRun(t, run{args: []string{"exec", "-s", scope, "-c", "cat"}, stdin: bytes.NewReader(in)})
	if r.Code != 0 || r.Stdout != string(in) {
		t.Fatalf("stdin through the channel: exit %d, %d bytes back of %d", r.Code, len(r.Stdout), len(in))
	}
	j := decodeExec(t, sb(t, "exec", "-s", scope, "--format", "json", "--max-output", "5", "--lang", "python", "-c", "print('abcdefgh')"))
	if j.ExitCode != 0 || j.Stdout != "abcde" || !j.StdoutTruncated {
		t.Fatalf("json through the channel: %+v", j)
	}
	r = sbRun(t, run{args: []string{"exec", "-s", scope, "-c", "echo standalone"}, standalone: true})
	if r.Code != 0 || r.Stdout != "standalone\n" {
		t.Fatalf("standalone through the channel: %s", r)
	}
	if n := execCreates(t, scope, since, time.Now()); n != 0 {
		t.Fatalf("warm calls made %d engine execs: they did not go through the channel", n)
	}

	var rows []struct {
		Scope   string `json:"scope"`
		Channel bool   `json:"channel"`
	}
	ls := sb(t, "ls", "--format", "json", "--filter", "scope="+scope)
	for _, l := range strings.Split(strings.TrimSpace(ls.Stdout), "\n") {
		var row struct {
			Scope   string `json:"scope"`
			Channel bool   `json:"channel"`
		}
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("ls: %v\n%s", err, ls)
		}
		rows = append(rows, row)
	}
	if len(rows) != 1 || !rows[0].Channel {
		t.Fatalf("ls does not show the channel: %s", ls)
	}
	if d := inspectChannel(t, scope); !d.Channel {
		t.Fatalf("inspect does not show the channel")
	}
}

// Kernel calls go through the channel too: state across calls, the JSON
// result, an interrupt at the timeout that keeps the state, a kernel that
// dies, --kernel-reset; none of them makes an engine exec. (The kernel
// tests run again with the channel off in scripts/test.sh's
// exec-channel-off pass.)
func TestExecChannelKernel(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	warmChannel(t, scope)
	k := func(extra ...string) (result, execJSON) {
		t.Helper()
		r := sb(t, append([]string{"exec", "-s", scope, "--kernel", "--lang", "python", "--format", "json"}, extra...)...)
		return r, decodeExec(t, r)
	}
	since := time.Now()
	if r, j := k("-c", "x = 41"); r.Code != 0 || j.Result != nil {
		t.Fatalf("an assignment: %+v\n%s", j, r)
	}
	if r, j := k("-c", "print('p')\nx + 1"); r.Code != 0 || j.Result == nil || *j.Result != "42" || j.Stdout != "p\n" || j.KernelRestarted {
		t.Fatalf("state across calls: %+v\n%s", j, r)
	}
	if r, j := k("--timeout", "1s", "-c", "import time\ntime.sleep(60)"); r.Code != 124 || !j.TimedOut || j.StateLost || !strings.Contains(j.Stderr, "KeyboardInterrupt") {
		t.Fatalf("interrupted at the timeout: %+v\n%s", j, r)
	}
	if r, j := k("-c", "x"); j.Result == nil || *j.Result != "41" {
		t.Fatalf("state after the interrupt: %+v\n%s", j, r)
	}
	if r, j := k("-c", "print('bye')\nimport os\nos._exit(3)"); r.Code != 3 || j.Error == nil || j.Error.Code != "kernel_died" || !j.StateLost || j.Stdout != "bye\n" {
		t.Fatalf("os._exit in the kernel: %+v\n%s", j, r)
	}
	if r, j := k("-c", "'x' in globals()"); j.Result == nil || *j.Result != "False" || !j.KernelRestarted {
		t.Fatalf("the call after the kernel's death: %+v\n%s", j, r)
	}
	k("-c", "z = 1")
	if r, j := k("--kernel-reset", "-c", "'z' in globals()"); r.Code != 0 || j.Result == nil || *j.Result != "False" {
		t.Fatalf("--kernel-reset: %+v\n%s", j, r)
	}
	if n := execCreates(t, scope, since, time.Now()); n != 0 {
		t.Fatalf("kernel calls made %d engine execs: they did not go through the channel", n)
	}
}

// channelDetails is what the channel tests read of inspect.
type channelDetails struct {
	Channel bool `json:"channel"`
	Helper  struct {
		Init struct {
			Runs int `json:"runs"`
		} `json:"init"`
	} `json:"helper"`
}

func inspectChannel(t *testing.T, scope string) channelDetails {
	t.Helper()
	r := sb(t, "inspect", scope)
	var ds []channelDetails
	if err := json.Unmarshal([]byte(r.Stdout), &ds); err != nil || len(ds) != 1 {
		t.Fatalf("inspect (%v): %s", err, r)
	}
	return ds[0]
}

// Every failure of the channel falls back to a plain exec within the call:
// its process killed (a stale socket stays), its server inside killed by
// sandboxed code (the same user), and the next channel serves again.
func TestExecChannelFallback(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	warmChannel(t, scope)
	sock := chanSock(t, scope)

	// The channel process killed: its socket stays, stale.
	pids := chanPIDs(sock)
	if len(pids) != 1 {
		t.Fatalf("want one channel process, got %v", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	poll(t, 10*time.Second, func() error {
		if len(chanPIDs(sock)) > 0 {
			return fmt.Errorf("channel process %d still runs", pids[0])
		}
		return nil
	})
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("the killed channel left no stale socket to test: %v", err)
	}
	since := time.Now()
	r := sb(t, "exec", "-s", scope, "-c", "echo after-kill; exit 3")
	if r.Code != 3 || r.Stdout != "after-kill\n" {
		t.Fatalf("after the channel process was killed: %s", r)
	}
	if execCreates(t, scope, since, time.Now()) == 0 {
		t.Fatalf("the call after the kill made no exec: it cannot have fallen back")
	}

	// A new channel; sandboxed code kills its server inside (the call that
	// does it loses its wrapper, as when code kills a plain exec's).
	poll(t, 30*time.Second, func() error {
		if len(chanPIDs(sock)) != 1 {
			return fmt.Errorf("no new channel process")
		}
		if _, err := os.Stat(sock); err != nil {
			return err
		}
		return nil
	})
	killer := `for p in /proc/[0-9]*; do c=$(tr '\0' ' ' < $p/cmdline 2>/dev/null); case "$c" in "/opt/sandbox/sandbox-helper channel "*) kill -9 ${p#/proc/} && echo killed;; esac; done; sleep 1; echo alive`
	r = sb(t, "exec", "-s", scope, "--format", "json", "-c", killer)
	// The call's own output went with the server: it reports its wrapper
	// lost, as when code kills the wrapper of a plain exec.
	if j := decodeExec(t, r); j.Error == nil || j.Error.Code != "wrapper_lost" {
		t.Fatalf("the call that killed the channel's server: %s", r)
	}
	// Whatever that call reported, the next one works (a plain exec)...
	r = sb(t, "exec", "-s", scope, "-c", "echo after-server-kill")
	if r.Code != 0 || r.Stdout != "after-server-kill\n" {
		t.Fatalf("after the server was killed: %s", r)
	}
	// ... and nothing of the killing call lives on.
	r = sb(t, "exec", "-s", scope, "-c", `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^slee[p] 1' || true`)
	if strings.TrimSpace(r.Stdout) != "0" {
		t.Fatalf("a process of the killing call lives on: %s", r)
	}
}

// exec_channel = false: every call is its own engine exec, and no channel
// process starts.
func TestExecChannelOff(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	off := []string{"DOCKER_SANDBOX_EXEC_CHANNEL=false"}
	for i := 0; i < 3; i++ {
		since := time.Now()
		r := sbRun(t, run{args: []string{"exec", "-s", scope, "-c", "echo off"}, env: off})
		if r.Code != 0 || r.Stdout != "off\n" {
			t.Fatalf("call %d: %s", i, r)
		}
		if i > 0 && execCreates(t, scope, since, time.Now()) == 0 {
			t.Fatalf("call %d made no engine exec with exec_channel=false", i)
		}
	}
	if p := chanPIDs(chanSock(t, scope)); len(p) > 0 {
		t.Fatalf("exec_channel=false started channel processes %v", p)
	}
}

// The channel process exits by itself after its idle time; the sandbox
// stays.
func TestExecChannelIdleExit(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	warmChannel(t, scope)
	wantCode(t, sb(t, "exec", "-s", scope, "-c", "true"), 0)
	waitNoChannel(t, scope, channel.Idle+15*time.Second)
	if _, err := engine(t).ContainerInspect(context.Background(), "docker-sandbox-"+scope); err != nil {
		t.Fatalf("the sandbox went with its channel: %v", err)
	}
}

// A sandbox's idle TTL runs while its channel is open and idle: the
// channel never holds it alive, and goes with it.
func TestExecChannelIdleTTL(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	warmChannel(t, scope, "--idle-ttl", "2s")
	wantCode(t, sb(t, "exec", "-s", scope, "--idle-ttl", "2s", "-c", "true"), 0)
	start := time.Now()
	poll(t, 30*time.Second, func() error {
		if _, err := engine(t).ContainerInspect(context.Background(), "docker-sandbox-"+scope); err == nil {
			return fmt.Errorf("the sandbox is still there")
		}
		return nil
	})
	if el := time.Since(start); el > channel.Idle {
		t.Fatalf("the sandbox expired only after %s: the channel held it", el)
	}
	waitNoChannel(t, scope, 15*time.Second)
}

// stop and rm with a channel open: the channel is not busy work (they
// succeed at once and the channel goes), a call running through it is.
func TestExecChannelStopRm(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	warmChannel(t, scope)
	// A call through the channel runs: stop is refused, as for an exec.
	done := make(chan result, 1)
	go func() { done <- sbRun(t, run{args: []string{"exec", "-s", scope, "-c", "sleep 4; echo slept"}}) }()
	poll(t, 20*time.Second, func() error {
		if inspectChannel(t, scope).Helper.Init.Runs == 0 {
			return fmt.Errorf("the slow call does not run yet")
		}
		return nil
	})
	r := sb(t, "stop", scope)
	if r.Code == 0 {
		t.Fatalf("stop succeeded while a call ran through the channel: %s", r)
	}
	if !strings.Contains(r.Stderr, "busy") {
		t.Fatalf("stop while a call runs: %s", r)
	}
	if r := <-done; r.Code != 0 || r.Stdout != "slept\n" {
		t.Fatalf("the call that ran during the refused stop: %s", r)
	}
	// Idle channel: stop works, and the channel goes with the container.
	r = sb(t, "stop", scope)
	if r.Code != 0 {
		t.Fatalf("stop with an idle channel open: %s", r)
	}
	waitNoChannel(t, scope, 15*time.Second)
	// rm likewise.
	warmChannel(t, scope)
	wantCode(t, sb(t, "exec", "-s", scope, "-c", "true"), 0)
	r = sb(t, "rm", scope)
	if r.Code != 0 {
		t.Fatalf("rm with an idle channel open: %s", r)
	}
	waitNoChannel(t, scope, 15*time.Second)
	if c, v := objects(t, scope); c+v != 0 {
		t.Fatalf("rm left %d containers and %d volumes", c, v)
	}
}
