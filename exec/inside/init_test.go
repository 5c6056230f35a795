package inside

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker-sandbox/docker-sandbox/internal/testenv"
	"github.com/google/go-cmp/cmp"
)

// TestDecide: PID 1's rules on hand-written process tables (self is 1,
// exec roots have PPID 0, as in a container).
func TestDecide(t *testing.T) {
	ages := map[uint64]time.Duration{100: time.Second, 200: 20 * time.Second, 300: 200 * time.Second}
	age := func(start uint64) time.Duration { return ages[start] }
	run := func(pid int, state byte, start uint64, timeout time.Duration) (procStat, rootInfo) {
		p := procStat{PID: pid, PPID: 0, State: state, Start: start}
		return p, rootInfo{procStat: p, kind: "run", timeout: timeout}
	}
	type tc struct {
		name      string
		procs     []procStat
		roots     []rootInfo
		subreaper bool
		want      decision
	}
	r10, ri10 := run(10, 'S', 100, 10*time.Second)             // a live run
	r11, ri11 := run(11, 'T', 100, 10*time.Second)             // stopped by code
	r12, ri12 := run(12, 't', 100, 10*time.Second)             // traced
	r13, ri13 := run(13, 'S', 300, 10*time.Second)             // 200 s old, timeout 10 s: hung
	r14, ri14 := run(14, 'S', 200, 15*time.Second)             // 20 s old, 15 s + grace: still allowed
	r15, ri15 := run(15, 'S', 300, 10*time.Second+runGrace*30) // long timeout: fine
	fsRoot := procStat{PID: 20, PPID: 0, State: 'T'}
	shell := procStat{PID: 30, PPID: 0, State: 'S'}
	shellStopped := procStat{PID: 31, PPID: 0, State: 'T'}
	wrapper := procStat{PID: 32, PPID: 0, State: 'S'}
	wrapperStopped := procStat{PID: 33, PPID: 0, State: 'T'}
	orphan := procStat{PID: 40, PPID: 1, State: 'S'}
	orphanZombie := procStat{PID: 41, PPID: 1, State: 'Z'}
	child := procStat{PID: 50, PPID: 10, State: 'R'}
	self := procStat{PID: 1, PPID: 0, State: 'S'}
	chanRoot := procStat{PID: 60, PPID: 0, State: 'S'}
	chanStopped := procStat{PID: 61, PPID: 0, State: 'T'}
	chanRun := procStat{PID: 62, PPID: 60, State: 'S', Start: 100}
	chanRunStopped := procStat{PID: 63, PPID: 60, State: 'T', Start: 100}
	chanRunHung := procStat{PID: 64, PPID: 60, State: 'S', Start: 300}
	chanOther := procStat{PID: 65, PPID: 60, State: 'S'}
	cases := []tc{
		{"nothing but init", []procStat{self}, nil, true, decision{}},
		{"a live run keeps it busy; its child is left alone", []procStat{self, r10, child}, []rootInfo{ri10}, true,
			decision{busy: true, liveRuns: true}},
		{"stopped and traced wrappers are killed, and are not activity", []procStat{self, r11, r12}, []rootInfo{ri11, ri12}, true,
			decision{kill: []int{11, 12}}},
		{"a run past its timeout and grace is killed", []procStat{self, r13, r14, r15}, []rootInfo{ri13, ri14, ri15}, true,
			decision{kill: []int{13}, busy: true, liveRuns: true}},
		{"a stopped fs wrapper is killed", []procStat{self, fsRoot}, []rootInfo{{procStat: fsRoot, kind: "fs"}}, true,
			decision{kill: []int{20}}},
		{"a shell keeps it busy; a stopped one neither counts nor dies", []procStat{self, shell, shellStopped},
			[]rootInfo{{procStat: shell}, {procStat: shellStopped}}, true, decision{busy: true}},
		{"orphans die where wrappers are subreapers, even with a live run", []procStat{self, r10, orphan, orphanZombie}, []rootInfo{ri10}, true,
			decision{kill: []int{40}, busy: true, liveRuns: true}},
		{"without subreapers, orphans live while a run does", []procStat{self, r10, orphan}, []rootInfo{ri10}, false,
			decision{busy: true, liveRuns: true}},
		{"without subreapers, orphans die once no run lives", []procStat{self, shell, orphan}, []rootInfo{{procStat: shell}}, false,
			decision{kill: []int{40}, busy: true}},
		{"an orphan alone is not activity", []procStat{self, orphan}, nil, true, decision{kill: []int{40}}},
		{"an idle exec channel is not activity", []procStat{self, chanRoot}, []rootInfo{{procStat: chanRoot, kind: "channel"}}, true, decision{}},
		{"a stopped exec channel is killed", []procStat{self, chanStopped}, []rootInfo{{procStat: chanStopped, kind: "channel"}}, true,
			decision{kill: []int{61}}},
		{"a channel's run is a run: busy, and killed when stopped or hung", []procStat{self, chanRoot, chanRun, chanRunStopped, chanRunHung},
			[]rootInfo{{procStat: chanRoot, kind: "channel"}, {procStat: chanRun, kind: "run", timeout: 10 * time.Second},
				{procStat: chanRunStopped, kind: "run", timeout: 10 * time.Second}, {procStat: chanRunHung, kind: "run", timeout: 10 * time.Second}}, true,
			decision{kill: []int{63, 64}, busy: true, liveRuns: true}},
		{"a process under a channel that readRoots did not take as a run is not a root", []procStat{self, chanRoot, chanOther},
			[]rootInfo{{procStat: chanRoot, kind: "channel"}}, true, decision{}},
	}
	for _, c := range cases {
		roots := map[int]rootInfo{}
		for _, r := range c.roots {
			roots[r.PID] = r
		}
		got := decide(c.procs, roots, 1, c.subreaper, true, age)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: decide = %+v, want %+v", c.name, got, c.want)
		}
	}
	// Shell wrappers (kind shell) count while their client leases them.
	for _, c := range []struct {
		name   string
		p      procStat
		kind   string
		leased bool
		want   decision
	}{
		{"a shell wrapper keeps it busy while leased", wrapper, "shell", true, decision{busy: true}},
		{"a shell wrapper nobody leases is not activity, and lives", wrapper, "shell", false, decision{}},
		{"a stopped shell wrapper is killed", wrapperStopped, "shell", false, decision{kill: []int{33}}},
		{"an exec root that is not the helper is busy, lease or not", shell, "", false, decision{busy: true}},
	} {
		got := decide([]procStat{self, c.p}, map[int]rootInfo{c.p.PID: {procStat: c.p, kind: c.kind}}, 1, true, c.leased, age)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: decide = %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestSupervisorIdle: the idle clock counts from the later of init's start
// and the last scan that saw a live exec root or a registered run.
func TestSupervisorIdle(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newSupervisor(initOptions{ttl: 5 * time.Second}, 1, t0)
	at := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	// No listing (procRoot missing): treated as busy, never expires.
	old := procRoot
	procRoot = filepath.Join(t.TempDir(), "missing")
	defer func() { procRoot = old }()
	s.loggedErr = true
	if s.tick(at(100)) {
		t.Fatal("expired without a process listing")
	}
	procRoot = fakeProc(t, nil)
	if s.tick(at(104)) {
		t.Fatal("expired 4 s after the last busy scan")
	}
	if !s.tick(at(105.5)) {
		t.Fatal("did not expire 5.5 s after the last busy scan")
	}
	// ttl 0 never expires.
	s3 := newSupervisor(initOptions{}, 1, t0)
	if s3.tick(at(1e6)) {
		t.Fatal("ttl 0 expired")
	}
}

// TestSupervisorShellLease: a shell wrapper counts as activity while its
// lease holds (a touch, from the wrapper or `sandbox-helper touch`, lasts
// the idle TTL); after that the sandbox idles out around it. Only a shell
// wrapper or `touch` may touch.
func TestSupervisorShellLease(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	old := procRoot
	defer func() { procRoot = old }()
	procRoot = fakeProc(t, map[string]string{"32": "32 (sandbox-helper) S 0 32 32\n"})
	writeProcFile(t, procRoot, "32", "cmdline", "/opt/sandbox/sandbox-helper\x00shell\x00--\x00bash\x00")
	s := newSupervisor(initOptions{ttl: 5 * time.Second}, 1, t0)
	touch := func(kind string, now time.Time) ctlReply {
		reply := make(chan ctlReply, 1)
		s.handle(ctlEvent{pid: 40, kind: kind, req: ctlRequest{Op: opTouch}, reply: reply}, now)
		return <-reply
	}
	for _, kind := range []string{"run", "drain", ""} {
		if rep := touch(kind, at(0)); rep.OK || rep.Refused != reasonNotServed {
			t.Errorf("a touch from %q: %+v", kind, rep)
		}
	}
	if rep := touch("shell", at(0)); !rep.OK {
		t.Fatalf("the shell's own touch: %+v", rep)
	}
	if s.tick(at(4)) || s.tick(at(8)) {
		t.Fatal("expired within the lease, or within the idle TTL of the last leased scan (4 s)")
	}
	if !s.tick(at(9.5)) {
		t.Fatal("a shell nobody touched kept the sandbox 5.5 s past its lease")
	}
	if rep := touch("touch", at(10)); !rep.OK {
		t.Fatalf("sandbox-helper touch: %+v", rep)
	}
	if s.tick(at(14.5)) {
		t.Fatal("expired within a renewed lease")
	}
}

func TestParseStat(t *testing.T) {
	cases := []struct {
		in   string
		want procStat
		ok   bool
	}{
		{"1234 (sh) S 1 1234 1234 0 -1 4194304 ...\n", procStat{PID: 1234, State: 'S', PPID: 1, PGRP: 1234}, true},
		{"42 (a) b (c)) Z 7 8 9\n", procStat{PID: 42, State: 'Z', PPID: 7, PGRP: 8}, true},
		{"5 (x y) R 0 0 0", procStat{PID: 5, State: 'R', PPID: 0, PGRP: 0}, true},
		{"5 x R 0 0 0", procStat{}, false},
		{"5 (x) R 0", procStat{}, false},
		{"five (x) R 0 0 0", procStat{}, false},
		{"5 (x) RR 0 0 0", procStat{}, false},
		{"", procStat{}, false},
	}
	for _, tc := range cases {
		got, err := parseStat([]byte(tc.in))
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// fakeProc writes a fake proc listing: pid -> stat line.
func fakeProc(t *testing.T, entries map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, stat := range entries {
		if err := os.MkdirAll(filepath.Join(root, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if stat != "" {
			if err := os.WriteFile(filepath.Join(root, name, "stat"), []byte(stat), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func TestReadProcs(t *testing.T) {
	root := fakeProc(t, map[string]string{
		"1":    "1 (sandbox-helper) S 0 1 1\n",
		"20":   "20 (python3) R 0 20 20\n",
		"21":   "21 (sh) Z 20 20 20\n",
		"22":   "", // vanished
		"23":   "garbage",
		"self": "1 (sandbox-helper) S 0 1 1\n",
		"sys":  "",
		"-4":   "-4 (x) S 0 0 0\n",
		"0":    "0 (x) S 0 0 0\n",
	})
	procs, err := readProcs(root)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(procs, func(i, j int) bool { return procs[i].PID < procs[j].PID })
	want := []procStat{{PID: 1, State: 'S', PGRP: 1}, {PID: 20, State: 'R', PGRP: 20}, {PID: 21, State: 'Z', PPID: 20, PGRP: 20}}
	if !reflect.DeepEqual(procs, want) {
		t.Errorf("readProcs = %+v, want %+v", procs, want)
	}
	if _, err := readProcs(filepath.Join(root, "missing")); err == nil {
		t.Error("readProcs of a missing root: no error")
	}

	// The real /proc lists this process.
	procs, err = readProcs("/proc")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range procs {
		if p.PID == os.Getpid() {
			found = p.PPID == os.Getppid() && p.PGRP == syscall.Getpgrp()
		}
	}
	if !found {
		t.Error("readProcs(/proc) does not list this process with its ppid and pgrp")
	}
}

func TestDescendants(t *testing.T) {
	procs := []procStat{
		{PID: 1, PPID: 0}, {PID: 10, PPID: 1}, // wrapper 10
		{PID: 11, PPID: 10}, {PID: 12, PPID: 11}, {PID: 13, PPID: 12}, // chain
		{PID: 14, PPID: 10},
		{PID: 20, PPID: 1}, {PID: 21, PPID: 20}, // someone else's
		{PID: 30, PPID: 30}, // self-parented: no loop
	}
	var got []int
	for _, p := range descendants(procs, 10) {
		got = append(got, p.PID)
	}
	sort.Ints(got)
	if want := []int{11, 12, 13, 14}; !reflect.DeepEqual(got, want) {
		t.Errorf("descendants = %v, want %v", got, want)
	}
	if d := descendants(procs, 13); len(d) != 0 {
		t.Errorf("descendants of a leaf = %v", d)
	}
}

// TestReapZombies runs in-process and must not be parallel: it reaps every
// child of the test process.
func TestReapZombies(t *testing.T) {
	sh, err := exec.LookPath("true")
	if err != nil {
		testenv.Skip(t, "no `true` on PATH")
	}
	p, err := os.StartProcess(sh, []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	stat := filepath.Join("/proc", strconv.Itoa(p.Pid), "stat")
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(stat)
		if err != nil {
			t.Fatalf("child vanished before reaping: %v", err)
		}
		if ps, err := parseStat(b); err == nil && ps.State == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("child did not become a zombie")
		}
		time.Sleep(time.Millisecond)
	}
	reapZombies()
	if _, err := os.Stat(stat); !os.IsNotExist(err) {
		t.Errorf("zombie %d not reaped: %v", p.Pid, err)
	}
	reapZombies() // no children: returns at once (ECHILD)
}

func startInit(t *testing.T, ctx context.Context, procDir string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := helperCommand(t, ctx, []string{envProcRoot + "=" + procDir, envAllowNonPID1 + "=1", envInitReadyFile + "=" + ready,
		envControl + "=" + testSocketName(t)},
		append([]string{"init"}, args...)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, ready
}

func waitFile(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never appeared", path)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestInitIdleExpiry(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Nothing but init: it exits once the TTL has passed, not before.
	start := time.Now()
	cmd, _ := startInit(t, ctx, fakeProc(t, nil), "--idle-ttl", "1s", "--spec", "abc")
	err := cmd.Wait()
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("init: %v, want exit 0", err)
	}
	if elapsed < time.Second || elapsed > 5*time.Second {
		t.Errorf("init exited after %v with --idle-ttl 1s", elapsed)
	}
}

func TestInitSIGTERMKillsEverything(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The fake listing holds one real process (a sleep of the test's) that
	// ignores SIGTERM; init must SIGKILL it. A busy listing also keeps init
	// from expiring on its own.
	victim := exec.Command("sh", "-c", "trap '' TERM; exec sleep 100")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer victim.Process.Kill()
	pid := strconv.Itoa(victim.Process.Pid)
	procDir := fakeProc(t, map[string]string{pid: pid + " (sleep) S 0 " + pid + " " + pid + "\n"})
	cmd, ready := startInit(t, ctx, procDir, "--idle-ttl", "1s")
	waitFile(t, ctx, ready)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := cmd.Wait()
	if err != nil {
		t.Fatalf("init: %v, want exit 0", err)
	}
	// Not a deadline of the product (its shutdown grace is 0.5 s): a bound
	// far beyond it, that -race on two loaded cores still meets.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("init took %v to exit on SIGTERM", d)
	}
	victimDone := make(chan error, 1)
	go func() { victimDone <- victim.Wait() }()
	select {
	case err = <-victimDone:
	case <-ctx.Done():
		t.Fatal("init did not kill the victim")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("victim: %v, want killed by SIGKILL", err)
	}
}

// drainEvents sends s drain requests (op, holder) at t0 and returns the
// replies.
func drainEvents(s *supervisor, t0 time.Time) func(op, holder string) ctlReply {
	return func(op, holder string) ctlReply {
		r := make(chan ctlReply, 1)
		s.handle(ctlEvent{kind: "drain", req: ctlRequest{Op: op, Token: holder}, reply: r}, t0)
		return <-r
	}
}

// TestSupervisorDrains: each stop/rm holds its own drain; undoing one
// leaves the other; a drain lapses after drainHold (a call that died cannot
// leave the sandbox refusing every run); the max lifetime drains for good.
func TestSupervisorDrains(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newSupervisor(initOptions{}, 1, t0)
	ev := drainEvents(s, t0)
	if !ev(opDrain, "h1").OK || !ev(opDrain, "h2").OK || !s.draining(t0) {
		t.Fatal("two drains")
	}
	ev(opUndrain, "h1")
	if !s.draining(t0) {
		t.Fatal("undoing h1 lifted h2's drain")
	}
	ev(opUndrain, "h2")
	if s.draining(t0) {
		t.Fatal("still draining after both undid")
	}
	ev(opDrain, "h3")
	if !s.draining(t0.Add(drainHold-time.Second)) || s.draining(t0.Add(drainHold+time.Second)) {
		t.Fatal("a drain must hold for drainHold, then lapse")
	}
	s.ending = t0
	if !s.draining(t0.Add(time.Hour)) {
		t.Fatal("the max lifetime must drain for good")
	}
}

// Under qemu-user (an image of another architecture, through binfmt_misc)
// a process's cmdline starts with the interpreter: the helper is still
// recognised by its own argv, and PID 1's flags read as they were given.
func TestDeEmulated(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"/usr/libexec/qemu-binfmt/aarch64-binfmt-P", "/opt/sandbox/sandbox-helper", "/opt/sandbox/sandbox-helper", "init", "--target", "s"},
			[]string{"/opt/sandbox/sandbox-helper", "init", "--target", "s"}},
		{[]string{"/usr/bin/qemu-aarch64-static", "/opt/sandbox/sandbox-helper", "run", "--token", "t"},
			[]string{"/opt/sandbox/sandbox-helper", "run", "--token", "t"}},
		{[]string{"/opt/sandbox/sandbox-helper", "init"}, []string{"/opt/sandbox/sandbox-helper", "init"}},
		{[]string{"qemu-like-name", "relative", "x"}, []string{"qemu-like-name", "relative", "x"}},
		{[]string{"python3", "/usr/bin/qemu-aarch64-static"}, []string{"python3", "/usr/bin/qemu-aarch64-static"}},
	} {
		got := splitCmdline([]byte(strings.Join(tc.in, "\x00") + "\x00"))
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%q (-want +got):\n%s", tc.in, d)
		}
	}
	if sub := helperSubcommand(splitCmdline([]byte("/usr/libexec/qemu-binfmt/aarch64-binfmt-P\x00/opt/sandbox/sandbox-helper\x00/opt/sandbox/sandbox-helper\x00run\x00"))); sub != "run" {
		t.Errorf("emulated helper's subcommand: %q", sub)
	}
}

// A `run` whose parent is a channel exec root is served as an exec root;
// a `run` under any other parent, or anything else under a channel, is not;
// readRoots takes the channel's runs in.
func TestRootKindChannel(t *testing.T) {
	root := fakeProc(t, map[string]string{
		"60": "60 (sandbox-helper) S 0 60 60\n",  // the channel server
		"62": "62 (sandbox-helper) S 60 62 62\n", // its run
		"65": "65 (sh) S 60 65 65\n",             // not a run
		"70": "70 (sh) S 0 70 70\n",              // a shell exec
		"71": "71 (sandbox-helper) S 70 71 71\n", // a run under the shell: code's
		"80": "80 (sandbox-helper) S 0 80 80\n",  // fake channel? its argv says run
		"81": "81 (sandbox-helper) S 80 81 81\n", // under a root that is not a channel
	})
	for pid, argv := range map[string]string{"60": "/opt/sandbox/sandbox-helper\x00channel\x00", "62": "/opt/sandbox/sandbox-helper\x00run\x00--token\x00t1\x00",
		"65": "sh\x00", "70": "sh\x00", "71": "/opt/sandbox/sandbox-helper\x00run\x00", "80": "/opt/sandbox/sandbox-helper\x00run\x00",
		"81": "/opt/sandbox/sandbox-helper\x00run\x00"} {
		writeProcFile(t, root, pid, "cmdline", argv)
	}
	checkRootKinds(t, root, []rootKindCase{{60, "channel", true}, {62, "run", true}, {65, "", false}, {70, "", true}, {71, "", false}, {80, "run", true}, {81, "", false}})
	procs, err := readProcs(root)
	if err != nil {
		t.Fatal(err)
	}
	roots := readRoots(root, procs, 1)
	if r, ok := roots[62]; !ok || r.kind != "run" {
		t.Errorf("readRoots left out the channel's run: %+v", roots)
	}
	for _, pid := range []int{65, 71, 81} {
		if _, ok := roots[pid]; ok {
			t.Errorf("readRoots took %d as a root", pid)
		}
	}
}

// The stdin server PID 1 started (stdin_server.go) is a channel root, and
// its runs are runs; a process of the same shape that PID 1 did not start
// (sandboxed code's orphan, re-parented to PID 1, running `channel`) is
// not, nor are its `run` children, and it is killed as an orphan; once
// PID 1 has reaped its server, a process with its pid is not the server.
func TestRootKindStdinServer(t *testing.T) {
	root := fakeProc(t, map[string]string{
		"1":  "1 (sandbox-helper) S 0 1 1\n",
		"40": "40 (sandbox-helper) S 1 40 40\n",  // the stdin server
		"41": "41 (sandbox-helper) S 40 41 41\n", // its run
		"50": "50 (sandbox-helper) S 1 50 50\n",  // code's orphan running `channel`
		"51": "51 (sandbox-helper) S 50 51 51\n", // its "run"
		"52": "52 (sandbox-helper) S 1 52 52\n",  // code's orphan running `run`
	})
	for pid, argv := range map[string]string{"1": "/opt/sandbox/sandbox-helper\x00init\x00",
		"40": "/opt/sandbox/sandbox-helper\x00channel\x00", "41": "/opt/sandbox/sandbox-helper\x00run\x00--token\x00t1\x00",
		"50": "/opt/sandbox/sandbox-helper\x00channel\x00", "51": "/opt/sandbox/sandbox-helper\x00run\x00--token\x00t2\x00",
		"52": "/opt/sandbox/sandbox-helper\x00run\x00"} {
		writeProcFile(t, root, pid, "cmdline", argv)
	}
	stdinServer.mu.Lock()
	stdinServer.pid, stdinServer.parent = 40, 1
	stdinServer.mu.Unlock()
	t.Cleanup(func() { stdinServerReaped(40, 0) })
	checkRootKinds(t, root, []rootKindCase{{40, "", false}, {41, "run", true}, {50, "", false}, {51, "", false}, {52, "", false}})
	procs, err := readProcs(root)
	if err != nil {
		t.Fatal(err)
	}
	roots := readRoots(root, procs, 1)
	if r, ok := roots[40]; !ok || r.kind != "channel" {
		t.Errorf("readRoots left out the stdin server: %+v", roots)
	}
	if r, ok := roots[41]; !ok || r.kind != "run" {
		t.Errorf("readRoots left out the stdin server's run: %+v", roots)
	}
	for _, pid := range []int{50, 51, 52} {
		if _, ok := roots[pid]; ok {
			t.Errorf("readRoots took %d as a root", pid)
		}
	}
	d := decide(procs, roots, 1, true, false, func(uint64) time.Duration { return 0 })
	if d.busy != true || !d.liveRuns {
		t.Errorf("decide: busy %v liveRuns %v, want the server's run as a live run", d.busy, d.liveRuns)
	}
	killed := map[int]bool{}
	for _, pid := range d.kill {
		killed[pid] = true
	}
	if killed[40] || killed[41] || !killed[50] || !killed[52] {
		t.Errorf("decide killed %v: want the orphans 50 and 52, not the server or its run", d.kill)
	}
	// Reaped: the pid is nobody's server any more.
	stdinServerReaped(40, 0)
	if isChannelRoot(root, 40) {
		t.Error("the reaped server's pid is still a channel root")
	}
	if _, _, ok := rootKind(root, 41); ok {
		t.Error("a run under the reaped server's pid is still a root")
	}
}

// A drain is refused while a registered run's wrapper lives, and granted
// once that process is gone, even before PID 1 has handled the end of its
// connection (a stop right after a call that returned as soon as the
// wrapper had exited).
func TestSupervisorDrainSeesEndedRun(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newSupervisor(initOptions{}, 1, t0)
	ev := drainEvents(s, t0)
	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer live.Process.Kill()
	uc, _ := unixPairConn(t)
	s.runs[live.Process.Pid] = &regRun{conn: uc}
	if r := ev(opDrain, "h1"); r.OK || r.Refused != "busy" {
		t.Fatalf("a live run: %+v, want busy", r)
	}
	_ = live.Process.Kill()
	_ = live.Wait() // reaped: the process is gone
	if r := ev(opDrain, "h1"); !r.OK {
		t.Fatalf("a run whose wrapper is gone: %+v, want drained", r)
	}
	if len(s.runs) != 0 {
		t.Errorf("the ended run is still registered: %v", s.runs)
	}
}

// unixPairConn is one end of a connected pair of unix sockets (the other
// is closed at the test's end).
func unixPairConn(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "s")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	a, b := conn(fds[0]), conn(fds[1])
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// rootKindCase is what rootKind must answer for a pid.
type rootKindCase struct {
	pid  int
	kind string
	ok   bool
}

func checkRootKinds(t *testing.T, root string, cases []rootKindCase) {
	t.Helper()
	for _, tc := range cases {
		kind, _, ok := rootKind(root, tc.pid)
		if kind != tc.kind || ok != tc.ok {
			t.Errorf("rootKind(%d) = %q %v, want %q %v", tc.pid, kind, ok, tc.kind, tc.ok)
		}
	}
}
