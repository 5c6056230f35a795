package plugin_test

// The frozen route of a copy out (copy_frozen; README, Files: cp and
// files): a copy from a running runc sandbox to the host reads the engine's
// archive endpoint while the sandbox is paused, where nothing can change
// the tree under it. The tests turn it on (cpFrozen); it is off by default.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
)

// cpEventLog counts the engine's pause, unpause and archive-path (a GET
// of the archive endpoint) events of one container, from a live
// subscription (the engine keeps only its last 256 events for a later
// query).
type cpEventLog struct {
	t      *testing.T
	id     string
	mu     sync.Mutex
	n      map[string]int
	cancel context.CancelFunc
	done   chan struct{}
}

func cpWatch(t *testing.T, id string) *cpEventLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &cpEventLog{t: t, id: id, n: map[string]int{}, cancel: cancel, done: make(chan struct{})}
	// Since now: the engine replays what came after it from its buffer, so
	// the first mark is seen even when it lands before the subscription.
	since := time.Now()
	msgs, errs := engine(t).Events(ctx, events.ListOptions{Since: fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond()), Filters: filters.NewArgs(filters.Arg("type", "container"),
		filters.Arg("container", id), filters.Arg("event", "pause"), filters.Arg("event", "unpause"),
		filters.Arg("event", "archive-path"), filters.Arg("event", "attach"), filters.Arg("event", "exec_create"))})
	go func() {
		defer close(l.done)
		var paused int64
		for {
			select {
			case m := <-msgs:
				l.mu.Lock()
				action, _, _ := strings.Cut(string(m.Action), ":") // "exec_create: CMD"
				l.n[action]++
				switch m.Action {
				case "pause":
					paused = m.TimeNano
				case "unpause":
					// A pause that lasted until FrozenBudget (20 s) ended
					// it: the unpause waited for something.
					if paused != 0 && time.Duration(m.TimeNano-paused) > 10*time.Second {
						l.n["unpause after 10 s"]++
					}
				}
				l.mu.Unlock()
			case <-errs:
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-l.done })
	l.take() // the subscription is live once its first marker arrived
	return l
}

// take returns the counts since the last take and starts again: it marks
// the end with an attach to the container that streams nothing (an
// "attach" event; the engine alone answers it, under any runtime) and
// waits for it.
func (l *cpEventLog) take() map[string]int {
	l.t.Helper()
	hj, err := engine(l.t).ContainerAttach(context.Background(), l.id, container.AttachOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	hj.Close()
	var got map[string]int
	poll(l.t, 30*time.Second, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.n["attach"] == 0 {
			return fmt.Errorf("the engine's events: no mark yet (%v)", l.n)
		}
		got, l.n = l.n, map[string]int{}
		delete(got, "attach")
		return nil
	})
	return got
}

// cpSandboxID is the ID of the target's container, which must be running
// and not paused.
func cpSandboxID(t *testing.T, target string) string {
	t.Helper()
	name := "docker-sandbox-" + strings.Replace(target, "/", ".", 1)
	c, err := engine(t).ContainerInspect(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if !c.State.Running || c.State.Paused {
		t.Fatalf("sandbox %s: running %v, paused %v; want running, not paused", target, c.State.Running, c.State.Paused)
	}
	return c.ID
}

// cpFrozen runs the plugin with copy_frozen on.
func cpFrozen(t *testing.T, args ...string) result {
	t.Helper()
	return sbRun(t, run{args: args, env: []string{"DOCKER_SANDBOX_COPY_FROZEN=true", "DOCKER_SANDBOX_COPY_LOCAL=false"}})
}

func cpWantEvents(t *testing.T, what string, got map[string]int, pauses int) {
	t.Helper()
	if got["pause"] != pauses || got["unpause"] != pauses {
		t.Errorf("%s: %d pauses and %d unpauses of the sandbox, want %d of each", what, got["pause"], got["unpause"], pauses)
	}
	if n := got["unpause after 10 s"]; n != 0 {
		t.Errorf("%s: %d unpauses came more than 10 s after their pause", what, n)
	}
}

func TestCpFrozenRoute(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	cpSh(t, s, `mkdir -p d/e && echo deep > d/e/f && ln d/e/f d/hard && ln -s /etc d/etc && ln -s e/f d/rel &&
		head -c 4194304 /dev/urandom > big && head -c 67108864 /dev/urandom > big64 && echo top > d2`)
	id := cpSandboxID(t, s)
	frozen := 1
	if underRunsc() {
		frozen = 0 // gVisor: no cgroup freezer to trust, the copy streams
	}
	host := t.TempDir()
	ev := cpWatch(t, id)

	// A tree: read frozen (not under gVisor), the sandbox running after.
	r := cpFrozen(t, "cp", "--format", "json", s+":d", filepath.Join(host, "d"))
	wantCode(t, r, 0)
	cpWantEvents(t, "cp of a folder", ev.take(), frozen)
	cpSandboxID(t, s)
	got := cpHostTree(t, filepath.Join(host, "d"))
	want := []string{"e/ 0755", "e/f=deep\n 0644", "hard=deep\n 0644", "rel -> e/f"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("copied tree %q, want %q", got, want)
	}
	if res := cpDecode(t, r); len(res.Skipped) != 1 || res.Skipped[0].Name != "d/etc" {
		t.Errorf("skipped %+v, want d/etc (its link to /etc)", res.Skipped)
	}

	// A file, byte for byte.
	wantCode(t, cpFrozen(t, "cp", s+":big", filepath.Join(host, "big")), 0)
	cpWantEvents(t, "cp of a file", ev.take(), frozen)
	sum := cpSh(t, s, "sha256sum < big")
	b, err := os.ReadFile(filepath.Join(host, "big"))
	if err != nil || len(b) != 4<<20 {
		t.Fatalf("big: %d bytes, %v", len(b), err)
	}
	hostSum := fmt.Sprintf("%x", sha256.Sum256(b))
	if !strings.HasPrefix(sum, hostSum) {
		t.Errorf("big: sha256 %s on the host, %s in the sandbox", hostSum, sum)
	}

	// A copy over its limit fails, writes nothing and unpauses at once
	// (the engine, still sending, holds the container until the archive
	// is closed).
	r = cpFrozen(t, "cp", "--format", "json", "--max-size", "1MiB", s+":big64", filepath.Join(host, "big2"))
	cpWantErr(t, r, "too_large")
	cpMissing(t, filepath.Join(host, "big2"))
	cpWantEvents(t, "cp over --max-size", ev.take(), frozen)
	cpSandboxID(t, s)

	// A link on the way (d/etc -> /etc): paused, seen, unpaused, and the
	// helper's stream refuses it, also under gVisor (where os.Root alone
	// follows it: the helper checks the way itself).
	r = cpFrozen(t, "cp", "--format", "json", s+":d/etc/hostname", filepath.Join(host, "hostname"))
	cpWantErr(t, r, "path_escape")
	cpMissing(t, filepath.Join(host, "hostname"))
	r = sb(t, "files", "cat", s+":d/etc/hostname")
	if r.Code == 0 || strings.Contains(r.Stdout, strings.TrimSpace(cpSh(t, s, "cat /etc/hostname"))) {
		t.Fatalf("files cat through the link to /etc:\n%s", r)
	}
	n := ev.take()
	cpWantEvents(t, "cp through a link", n, frozen)
	if n["archive-path"] != 0 {
		t.Errorf("cp through a link read the archive endpoint %d times", n["archive-path"])
	}
	cpSandboxID(t, s)

	// copy_frozen off (the default): the stream, no pause.
	wantCode(t, sb(t, "cp", s+":d2", filepath.Join(host, "d2")), 0)
	cpWantEvents(t, "cp with copy_frozen off", ev.take(), 0)
	if b, _ := os.ReadFile(filepath.Join(host, "d2")); string(b) != "top\n" {
		t.Errorf("d2 = %q", b)
	}

	// A warm exec (through the exec channel: no engine exec) after frozen
	// copies runs as before.
	for i := range 3 {
		if r := cpFrozen(t, "cp", s+":big", filepath.Join(host, fmt.Sprintf("big-%d", i))); r.Code != 0 {
			t.Fatalf("cp:\n%s", r)
		}
		r := sb(t, "exec", "-s", s, "--lang", "python", "-c", fmt.Sprintf("print(%d*7)", i+2))
		if r.Code != 0 || strings.TrimSpace(r.Stdout) != fmt.Sprint((i+2)*7) {
			t.Fatalf("exec after a frozen copy: %s", r)
		}
	}
	cpSandboxID(t, s)

	if underRunsc() {
		return
	}
	// A session shares the scope's long-term volume: a copy out of the
	// scope's sandbox can no longer freeze every writer, so it streams; the
	// session's own workspace is its alone, and is read frozen.
	wantCode(t, sb(t, "exec", "-s", s, "--session", "x", "--lang", "sh", "-c", "echo mine > m && echo u > /opt/user/uf"), 0)
	sid := cpSandboxID(t, s+"/x")
	evs := cpWatch(t, sid)
	ev.take()
	wantCode(t, cpFrozen(t, "cp", s+":d2", filepath.Join(host, "d2-shared")), 0)
	wantCode(t, cpFrozen(t, "cp", s+"/x:m", filepath.Join(host, "m")), 0)
	cpWantEvents(t, "cp from the scope with a session", ev.take(), 0)
	cpWantEvents(t, "cp from the session's workspace", evs.take(), 1)
	// The session's long-term volume is the scope's: streamed.
	wantCode(t, cpFrozen(t, "cp", s+"/x:/opt/user/uf", filepath.Join(host, "uf")), 0)
	cpWantEvents(t, "cp from the session's /opt/user", evs.take(), 0)
}

// A new sandbox of a scope whose sandbox is paused (as a frozen read
// pauses it, having found it alone on the scope's volume) is created but
// not started until the pause ends: code in it could otherwise change the
// tree the read walks.
func TestCpFrozenNewSessionWaits(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	cpSh(t, s, "true")
	id := cpSandboxID(t, s)
	cli := engine(t)
	if err := cli.ContainerPause(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	unpaused := false
	unpause := func() {
		if !unpaused {
			unpaused = true
			if err := cli.ContainerUnpause(context.Background(), id); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(unpause)
	done := make(chan result, 1)
	go func() {
		done <- sbRun(t, run{args: []string{"exec", "-s", s, "--session", "y", "--lang", "sh", "-c", "echo started"}})
	}()
	name := "docker-sandbox-" + s + ".y"
	poll(t, 60*time.Second, func() error {
		_, err := cli.ContainerInspect(context.Background(), name)
		return err
	})
	// It would start within a few hundred ms; it stays created while the
	// scope's sandbox is paused.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		c, err := cli.ContainerInspect(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if c.State.Status != "created" {
			t.Fatalf("the new session's sandbox is %s while its scope's sandbox is paused, want created", c.State.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	unpause()
	select {
	case r := <-done:
		wantCode(t, r, 0)
		if strings.TrimSpace(r.Stdout) != "started" {
			t.Fatalf("exec: %s", r)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the session's exec did not end after the unpause")
	}
}

// A folder on the path is swapped with a link to /etc in a tight loop while
// copies run: a frozen read never follows it, so no byte of the
// container's /etc (its root-only /etc/shadow, its /etc/hostname) reaches
// the host. The test proves it hit the race: some copies found the link
// while the sandbox was paused (a pause with no archive read).
func TestCpFrozenSwapRace(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	cpSh(t, s, `mkdir -p top/sw && echo SAFE > top/sw/shadow && echo SAFE > top/sw/hostname && ln -s /etc top/swl`)
	id := cpSandboxID(t, s)
	hostname := strings.TrimSpace(cpSh(t, s, "cat /etc/hostname"))
	stop, out := cpSwapper(t, s, `[(b'top/sw', b'top/swl')]`)
	host := t.TempDir()
	ev := cpWatch(t, id)
	ok := 0
	for i := range 20 {
		for j, src := range []string{"top/sw/shadow", "top/sw/hostname", "top/sw", "top/sw/."} {
			dst := filepath.Join(host, fmt.Sprintf("r%d-%d", i, j))
			if r := cpFrozen(t, "cp", "--format", "json", s+":"+src, dst); r.Code == 0 {
				ok++
			} else if c := decodeErr(t, r).Error.Code; c != "path_escape" && c != "file_not_found" && c != "not_directory" {
				t.Fatalf("cp %s: unexpected error:\n%s", src, r)
			}
		}
	}
	stop()
	n := ev.take()
	cpSandboxID(t, s)
	t.Logf("80 copies, %d complete; %d pauses, %d archive reads; swapper: %s", ok, n["pause"], n["archive-path"], strings.TrimSpace(out.String()))
	filepath.Walk(host, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "root:") || (hostname != "" && strings.Contains(string(b), hostname)) || string(b) != "SAFE\n" {
			t.Errorf("%s holds %q, not the workspace's file", p, b)
		}
		return nil
	})
	if n["archive-path"] == 0 {
		t.Fatal("no copy read the archive endpoint: the frozen route was not tried")
	}
	if n["pause"] <= n["archive-path"] {
		t.Fatalf("no copy found the link while the sandbox was paused (%d pauses, %d archive reads): the race was never hit", n["pause"], n["archive-path"])
	}
	if n["pause"] != n["unpause"] {
		t.Fatalf("%d pauses, %d unpauses", n["pause"], n["unpause"])
	}
	if ok == 0 {
		t.Fatal("no copy completed")
	}
}
