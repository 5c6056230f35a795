package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestIdleState(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	const self = 1
	idle := []procStat{{PID: 1, State: 'S'}}
	zombie := []procStat{{PID: 1, State: 'S'}, {PID: 7, State: 'Z'}}
	running := []procStat{{PID: 1, State: 'S'}, {PID: 7, State: 'R'}}
	sleeping := []procStat{{PID: 7, State: 'S'}, {PID: 9, State: 'Z'}}
	type step struct {
		at      float64
		procs   []procStat
		expired bool
	}
	cases := []struct {
		name  string
		ttl   time.Duration
		steps []step
	}{
		{"idle from the start", 10 * time.Second, []step{
			{1, idle, false}, {10, idle, false}, {10.5, idle, true},
		}},
		{"exactly the ttl is not over it", 10 * time.Second, []step{{10, idle, false}, {11, idle, true}}},
		{"zombies do not count", 5 * time.Second, []step{{1, zombie, false}, {6, zombie, true}}},
		{"busy resets the clock", 5 * time.Second, []step{
			{1, idle, false}, {4, running, false}, {8, idle, false}, {9, idle, false}, {9.5, idle, true},
		}},
		{"busy the whole time", time.Second, []step{
			{1, running, false}, {5, sleeping, false}, {100, running, false}, {100.5, idle, false}, {101.5, idle, true},
		}},
		{"ttl 0 never expires", 0, []step{{1, idle, false}, {1e6, idle, false}, {1e7, zombie, false}}},
	}
	for _, tc := range cases {
		st := idleState{start: t0, ttl: tc.ttl}
		for i, s := range tc.steps {
			if got := st.observe(s.procs, self, at(s.at)); got != s.expired {
				t.Errorf("%s: step %d (t=%vs): expired = %v, want %v", tc.name, i, s.at, got, s.expired)
			}
		}
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
	want := []procStat{{1, 'S', 0, 1}, {20, 'R', 0, 20}, {21, 'Z', 20, 20}}
	if !reflect.DeepEqual(procs, want) {
		t.Errorf("readProcs = %+v, want %+v", procs, want)
	}
	if busy(procs, 1) != true || busy(procs[:1], 1) != false || busy(append(procs[:1:1], procs[2]), 1) != false {
		t.Error("busy")
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
		t.Skip("no true")
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
	cmd := helperCommand(t, ctx, []string{envProcRoot + "=" + procDir, envAllowNonPID1 + "=1", envInitReadyFile + "=" + ready},
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
	procDir := fakeProc(t, map[string]string{pid: pid + " (sleep) S 1 " + pid + " " + pid + "\n"})
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
	if d := time.Since(start); d > time.Second {
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
