package plugin_test

// The exec channel over remote endpoints (issue 11): a plain tcp://
// context here, ssh:// in e2e_ssh_test.go. scripts/test.sh starts, when
// the TestTCP* tests run, a loopback TCP proxy to the engine's socket
// (socat TCP-LISTEN on 127.0.0.1, stopped after go test) and sets:
//
//	DOCKER_SANDBOX_TEST_TCP=tcp://127.0.0.1:PORT
//
// Every call here goes docker CLI -> plugin -> the test's counting proxy
// (tcp://127.0.0.1:FRONT) -> socat -> the engine, and so does the channel
// process's own connection: the test checks that it holds a TCP
// connection to FRONT, and counts the connections that calls make.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/exec/channel"
)

const tcpContextName = "sbx-tcp-test"

// remoteCtx is a docker context whose calls reach the test engine another
// way than its local socket.
type remoteCtx struct {
	host   string   // the endpoint, as the context has it (the channel's socket key)
	name   string   // the context
	env    []string // a private DOCKER_CONFIG holding the context, ...
	global []string // --context NAME
}

// sb runs `docker --context NAME sandbox ARGS`.
func (c remoteCtx) sb(t *testing.T, r run) result {
	t.Helper()
	r.env = append(append([]string{}, c.env...), r.env...)
	if r.global == nil {
		r.global = c.global
	}
	return sbRun(t, r)
}

func (c remoteCtx) sbArgs(t *testing.T, args ...string) result {
	t.Helper()
	return c.sb(t, run{args: args})
}

// makeContext creates the context name with host in a private
// DOCKER_CONFIG, removed when the test ends.
func makeContext(t *testing.T, name, host string, env []string) remoteCtx {
	t.Helper()
	c := remoteCtx{host: host, name: name, global: []string{"--context", name},
		// DOCKER_HOST and DOCKER_CONTEXT empty: only the flags of each
		// call choose the endpoint.
		env: append([]string{"DOCKER_CONFIG=" + privateConfig(t), "DOCKER_HOST=", "DOCKER_CONTEXT="}, env...)}
	cmd := osexec.Command("docker", "context", "create", name, "--docker", "host="+host)
	cmd.Env = append(os.Environ(), c.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker context create: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		cmd := osexec.Command("docker", "context", "rm", "-f", name)
		cmd.Env = append(os.Environ(), c.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("docker context rm: %v\n%s", err, out)
		}
	})
	return c
}

// needTCP returns the context sbx-tcp-test on a counting proxy
// (countingProxy) in front of the proxy of scripts/test.sh, that proxy's
// port and the count of connections made to the context's endpoint.
// Outside scripts/test.sh the test skips; under CI a missing proxy fails it.
func needTCP(t *testing.T) (remoteCtx, int, *atomic.Int32) {
	t.Helper()
	uri := needFixture(t, "tcp test", "loopback TCP proxy", "TestTCP", "DOCKER_SANDBOX_TEST_TCP")[0]
	m := regexp.MustCompile(`^tcp://127\.0\.0\.1:([0-9]+)$`).FindStringSubmatch(uri)
	if m == nil {
		t.Fatalf("DOCKER_SANDBOX_TEST_TCP=%q: want tcp://127.0.0.1:PORT (a loopback proxy)", uri)
	}
	port, _ := strconv.Atoi(m[1])
	front, conns := countingProxy(t, port)
	return makeContext(t, tcpContextName, fmt.Sprintf("tcp://127.0.0.1:%d", front), nil), front, conns
}

// countingProxy forwards the connections it accepts on a loopback port to
// the loopback port to, and counts them; it stops when the test ends.
func countingProxy(t *testing.T, to int) (int, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := new(atomic.Int32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	closed := false
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			up, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", to))
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				c.Close()
				up.Close()
				return
			}
			open = append(open, c, up)
			mu.Unlock()
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}
			go pipe(up, c)
			go pipe(c, up)
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, conns
}

// proc is a process, told from a later one of the same pid by its start
// time.
type proc struct {
	pid   int
	start string
	comm  string
	args  string
}

// procStat reads pid's parent, start time, name and state.
func procStat(pid int) (ppid int, start, comm, state string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", "", "", false
	}
	s := string(b)
	i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if i < 0 || j < i {
		return 0, "", "", "", false
	}
	f := strings.Fields(s[j+1:])
	if len(f) < 20 {
		return 0, "", "", "", false
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[19], s[i+1 : j], f[0], true
}

// procTree is pid and its descendants, as they are now.
func procTree(t *testing.T, pid int) []proc {
	t.Helper()
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, _, _, ok := procStat(p); ok {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []proc
	todo := []int{pid}
	for len(todo) > 0 {
		p := todo[0]
		todo = todo[1:]
		_, start, comm, _, ok := procStat(p)
		if !ok {
			continue
		}
		args, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		out = append(out, proc{pid: p, start: start, comm: comm, args: strings.ReplaceAll(string(args), "\x00", " ")})
		todo = append(todo, children[p]...)
	}
	return out
}

// alive reports whether p still runs (a zombie does not).
func (p proc) alive() bool {
	_, start, _, state, ok := procStat(p.pid)
	return ok && start == p.start && state != "Z"
}

// waitProcsGone waits until none of ps runs.
func waitProcsGone(t *testing.T, ps []proc, d time.Duration) {
	t.Helper()
	poll(t, d, func() error {
		for _, p := range ps {
			if p.alive() {
				return fmt.Errorf("process %d (%s: %s) of the channel still runs", p.pid, p.comm, p.args)
			}
		}
		return nil
	})
}

// remoteChannel is the channel of one scope's sandbox on a remote context.
type remoteChannel struct {
	sock string
}

func newRemoteChannel(t *testing.T, c remoteCtx, scope string) remoteChannel {
	t.Helper()
	dir, err := channel.Dir("")
	if err != nil {
		t.Fatal(err)
	}
	return remoteChannel{sock: channel.SocketPath(dir, c.host, "docker-sandbox-"+scope)}
}

// wait waits for the channel to serve calls and returns its process and
// that process's descendants.
func (rc remoteChannel) wait(t *testing.T) []proc {
	t.Helper()
	var pid int
	poll(t, 30*time.Second, func() error {
		pids := chanPIDs(rc.sock)
		if len(pids) != 1 {
			return fmt.Errorf("channel processes for %s: %v, want one", rc.sock, pids)
		}
		if _, err := os.Stat(rc.sock); err != nil {
			return fmt.Errorf("no channel socket: %v", err)
		}
		pid = pids[0]
		return nil
	})
	return procTree(t, pid)
}

// waitGone waits until the channel's processes are gone and its socket
// with them.
func (rc remoteChannel) waitGone(t *testing.T, ps []proc, d time.Duration) {
	t.Helper()
	waitProcsGone(t, ps, d)
	poll(t, 5*time.Second, func() error {
		if p := chanPIDs(rc.sock); len(p) > 0 {
			return fmt.Errorf("channel processes %v still serve %s", p, rc.sock)
		}
		if _, err := os.Stat(rc.sock); err == nil {
			return fmt.Errorf("channel socket %s still there", rc.sock)
		}
		return nil
	})
}

// sameResults runs the same calls through the channel and as plain execs
// (exec_channel=false) and wants the same results: exit code, stdout,
// stderr, stdin byte for byte, --format json. The calls through the
// channel make no engine exec. afterVia runs between the two series (the
// channel may go idle during the second).
func sameResults(t *testing.T, c remoteCtx, scope string, afterVia func()) {
	t.Helper()
	in := make([]byte, 300<<10)
	for i := range in {
		in[i] = byte(i*7 + i>>9)
	}
	calls := []run{
		{args: []string{"exec", "-s", scope, "-c", "echo out; echo err >&2; exit 7"}},
		{args: []string{"exec", "-s", scope, "-c", "cat; echo; echo tail >&2"}, stdin: bytes.NewReader(in)},
		{args: []string{"exec", "-s", scope, "--lang", "python"}, stdin: strings.NewReader("import sys; print(6*7); sys.exit(3)")},
		{args: []string{"exec", "-s", scope, "--format", "json", "-c", "echo out; echo err >&2; exit 5"}},
		{args: []string{"exec", "-s", scope, "--format", "json", "--max-output", "5", "--lang", "python", "-c", "print('abcdefgh')"}},
		{args: []string{"exec", "-s", scope, "--format", "json", "--timeout", "1s", "-c", "echo started; sleep 30"}},
	}
	do := func(env []string) []result {
		var rs []result
		for _, r := range calls {
			if in, ok := r.stdin.(*bytes.Reader); ok {
				_, _ = in.Seek(0, 0)
			}
			if s, ok := r.stdin.(*strings.Reader); ok {
				_, _ = s.Seek(0, 0)
			}
			r.env = env
			rs = append(rs, c.sb(t, r))
		}
		return rs
	}
	since := time.Now()
	via := do(nil)
	until := time.Now()
	afterVia()
	plain := do([]string{"DOCKER_SANDBOX_EXEC_CHANNEL=false"})
	if n := execCreates(t, scope, since, until); n != 0 {
		t.Errorf("the warm calls on %s made %d engine execs: they did not go through the channel", c.host, n)
	}
	for i := range calls {
		a, b := via[i], plain[i]
		if a.Code != b.Code {
			t.Errorf("%v: exit %d through the channel, %d as a plain exec", calls[i].args, a.Code, b.Code)
		}
		if strings.Contains(strings.Join(calls[i].args, " "), "--format json") {
			ja, jb := decodeExec(t, a), decodeExec(t, b)
			ja.DurationMS, jb.DurationMS = 0, 0
			if d := cmp.Diff(jb, ja); d != "" {
				t.Errorf("%v: JSON through the channel differs from a plain exec's (-plain +channel):\n%s", calls[i].args, d)
			}
			continue
		}
		if a.Stdout != b.Stdout || a.Stderr != b.Stderr {
			t.Errorf("%v: through the channel:\n%s\nas a plain exec:\n%s", calls[i].args, a, b)
		}
	}
	// And they are what they should be.
	if via[0].Code != 7 || via[0].Stdout != "out\n" || via[0].Stderr != "err\n" {
		t.Errorf("exit 7: %s", via[0])
	}
	if via[1].Code != 0 || via[1].Stdout != string(in)+"\n" || via[1].Stderr != "tail\n" {
		t.Errorf("stdin: exit %d, %d bytes back of %d", via[1].Code, len(via[1].Stdout), len(in)+1)
	}
	if via[2].Code != 3 || via[2].Stdout != "42\n" {
		t.Errorf("python on stdin: %s", via[2])
	}
	if j := decodeExec(t, via[5]); j.ExitCode != 124 || !j.TimedOut || j.Stdout != "started\n" {
		t.Errorf("timeout: %+v", j)
	}
}

// lsChannel is the "channel" field of the scope's row of `ls --format json`.
func lsChannel(t *testing.T, c remoteCtx, scope string) bool {
	t.Helper()
	r := c.sbArgs(t, "ls", "--format", "json", "--filter", "scope="+scope)
	wantCode(t, r, 0)
	var row struct {
		Channel bool `json:"channel"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.Stdout)), &row); err != nil {
		t.Fatalf("ls: %v\n%s", err, r)
	}
	return row.Channel
}

// testRemoteChannel: on the context c, a warm call goes through the
// sandbox's channel, whose process reaches the engine through c's
// transport (checkTransport), with the results of a plain exec, and
// connects to the engine no more (connects counts the connections made
// to c's endpoint: ssh logins, TCP connections); the
// channel's processes all go after its idle time, after killTransport
// broke its connection (the call then falls back within itself), and
// after `rm`.
func testRemoteChannel(t *testing.T, c remoteCtx, connects func() int, checkTransport func(t *testing.T, ps []proc), killTransport func(t *testing.T, ps []proc)) {
	scope := newScope(t)
	rc := newRemoteChannel(t, c, scope)
	wantCode(t, c.sbArgs(t, "exec", "-s", scope, "-c", "true"), 0)
	ps := rc.wait(t)
	checkTransport(t, ps)

	t.Run("no connection", func(t *testing.T) {
		// The docker CLI's own client pings the engine when the plugin
		// first asks it for its endpoint or client: one connection (an
		// ssh login over ssh://) per call. A warm call makes none.
		before := connects()
		for i := 0; i < 3; i++ {
			wantStdout(t, c.sbArgs(t, "exec", "-s", scope, "-c", "echo warm"), "warm\n")
		}
		if n := connects() - before; n != 0 {
			t.Errorf("3 warm calls through the channel made %d connections to %s, want 0", n, c.host)
		}
	})

	t.Run("same results", func(t *testing.T) {
		sameResults(t, c, scope, func() {
			if p := chanPIDs(rc.sock); len(p) != 1 || p[0] != ps[0].pid {
				t.Errorf("channel processes %v after the calls, want the one that served them (%d)", p, ps[0].pid)
			}
			if !lsChannel(t, c, scope) {
				t.Errorf("ls --format json on %s does not show the channel", c.host)
			}
		})
	})

	t.Run("idle exit", func(t *testing.T) {
		rc.waitGone(t, ps, channel.Idle+20*time.Second)
		if lsChannel(t, c, scope) {
			t.Errorf("ls shows a channel after it exited")
		}
	})

	if killTransport != nil {
		t.Run("transport lost", func(t *testing.T) {
			wantCode(t, c.sbArgs(t, "exec", "-s", scope, "-c", "true"), 0)
			ps := rc.wait(t)
			checkTransport(t, ps)
			killTransport(t, ps)
			since := time.Now()
			r := c.sbArgs(t, "exec", "-s", scope, "-c", "echo after; exit 3")
			if r.Code != 3 || r.Stdout != "after\n" || r.Stderr != "" {
				t.Fatalf("the call after the channel's transport died: %s", r)
			}
			if execCreates(t, scope, since, time.Now()) == 0 {
				t.Errorf("the call after the channel's transport died made no engine exec: it cannot have fallen back")
			}
			// The channel process went by itself (the call above started
			// another one: only the old processes are waited for).
			waitProcsGone(t, ps, 15*time.Second)
		})
	}

	t.Run("rm", func(t *testing.T) {
		wantCode(t, c.sbArgs(t, "exec", "-s", scope, "-c", "true"), 0)
		ps := rc.wait(t)
		checkTransport(t, ps)
		wantCode(t, c.sbArgs(t, "exec", "-s", scope, "-c", "true"), 0)
		wantStdout(t, c.sbArgs(t, "rm", scope), scope+"\n")
		rc.waitGone(t, ps, 15*time.Second)
		if c, v := objects(t, scope); c+v != 0 {
			t.Fatalf("rm left %d containers and %d volumes", c, v)
		}
	})
}

// tcpConns lists the remote ports of pid's established TCP connections.
func tcpConns(t *testing.T, pid int) []int {
	t.Helper()
	inodes := map[string]bool{}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var ports []int
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(l)
			if len(fs) < 10 || fs[3] != "01" || !inodes[fs[9]] {
				continue
			}
			if i := strings.LastIndexByte(fs[2], ':'); i >= 0 {
				if p, err := strconv.ParseInt(fs[2][i+1:], 16, 32); err == nil {
					ports = append(ports, int(p))
				}
			}
		}
	}
	return ports
}

// TestTCPChannel: over a plain tcp:// context a warm exec goes through the
// sandbox's exec channel, whose process is connected to the engine over
// tcp://; results are those of a plain exec; its process goes after its
// idle time and after rm.
func TestTCPChannel(t *testing.T) {
	c, port, conns := needTCP(t)
	testRemoteChannel(t, c, func() int { return int(conns.Load()) }, func(t *testing.T, ps []proc) {
		t.Helper()
		if !strings.Contains(ps[0].args, " --host "+c.host+" ") {
			t.Fatalf("the channel process does not use %s: %s", c.host, ps[0].args)
		}
		ports := tcpConns(t, ps[0].pid)
		if !cmpContains(ports, port) {
			t.Fatalf("the channel process holds no TCP connection to port %d (its connections: %v)", port, ports)
		}
	}, nil)
}

func cmpContains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// killProcs sends SIGKILL to the processes of ps named comm (there must be
// one at least).
func killProcs(t *testing.T, ps []proc, comm string) {
	t.Helper()
	n := 0
	for _, p := range ps {
		if p.comm == comm && p.alive() {
			if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no %s process of the channel to kill: %+v", comm, ps)
	}
}
