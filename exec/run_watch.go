package exec

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// watchGrace is how long a run's stream may stay open after its container
// died before the watch ends it. Under runc the engine ends an exec's
// stream when its container dies; gVisor's runsc (Debian's 2022-12 build)
// leaves it open until the exec's own process would have ended, which never
// comes: a removed container's run would wait for the backstop.
const watchGrace = 2 * time.Second

// runWatch follows the engine's events of one sandbox container while a
// run streams from it: whether the container ran out of memory or died.
type runWatch struct {
	mu     sync.Mutex
	oom    bool
	died   bool
	killed bool // the engine was asked to kill it (kill, stop, rm -f)
	stop   context.CancelFunc
}

// watchRun starts watching the container ctrName; gone is called (once)
// watchGrace after the container died, while the watch is on. Stop it with
// end. A nil *runWatch (not watched: the default runtime) reports nothing.
func (m *Manager) watchRun(ctx context.Context, ctrName string, gone func()) *runWatch {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &runWatch{stop: cancel}
	f := filters.NewArgs(filters.Arg("type", string(events.ContainerEventType)), filters.Arg("container", ctrName),
		filters.Arg("event", string(events.ActionOOM)), filters.Arg("event", string(events.ActionDie)),
		filters.Arg("event", string(events.ActionDestroy)), filters.Arg("event", string(events.ActionKill)))
	msgs, errs := m.Engine.Events(wctx, events.ListOptions{Filters: f})
	go func() {
		var timer *time.Timer
		defer func() {
			if timer != nil {
				timer.Stop()
			}
		}()
		for {
			select {
			case <-wctx.Done():
				return
			case <-errs:
				return
			case msg := <-msgs:
				w.mu.Lock()
				switch msg.Action {
				case events.ActionOOM:
					w.oom = true
				case events.ActionKill:
					w.killed = true
				case events.ActionDie, events.ActionDestroy:
					w.died = true
				}
				died := w.died
				w.mu.Unlock()
				if died && timer == nil {
					core.Debugf("watch: container %s %s", ctrName, msg.Action)
					timer = time.AfterFunc(watchGrace, gone)
				}
			}
		}
	}()
	return w
}

// end stops the watch.
func (w *runWatch) end() {
	if w != nil {
		w.stop()
	}
}

// outOfMemory reports whether the engine said the container ran out of
// memory while the run was watched.
func (w *runWatch) outOfMemory() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.oom
}

// oomStatus is the run's status when the program's memory use killed its
// whole container (gVisor: the sandbox's kernel and every process in it go
// together, and the wrapper cannot report): the same exit code, signal and
// oom_killed as when the kernel's OOM killer stops only the program (runc).
func oomStatus(start time.Time) wire.RunStatus {
	return wire.RunStatus{ExitCode: 128 + 9, Signal: 9, OOMKilled: true, DurationMS: time.Since(start).Milliseconds()}
}

// timeoutStatus is the run's status when its container died once the run
// was past its timeout (gVisor: killing a fork bomb's thousands of
// processes at the timeout can take the sandbox down): the program was
// killed at the timeout, as under runc (exit 124, timed_out).
func timeoutStatus(start time.Time) wire.RunStatus {
	return wire.RunStatus{ExitCode: 124, TimedOut: true, DurationMS: time.Since(start).Milliseconds()}
}

// crashStatus is the run's status when its container died during the run
// with no one asking the engine to kill it and no out-of-memory: the
// program was killed with its sandbox (exit 137, SIGKILL).
func crashStatus(start time.Time) wire.RunStatus {
	return wire.RunStatus{ExitCode: 128 + 9, Signal: 9, DurationMS: time.Since(start).Milliseconds()}
}

// diedUnasked reports whether the container died with no kill event before.
func (w *runWatch) diedUnasked() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.died && !w.killed
}

// errSandboxLost: the run's whole container died with the program (the
// run's status is oomStatus or timeoutStatus).
var errSandboxLost = errors.New("the sandbox's container died with the program")

// sandboxLost tells, for a run whose stream ended without a status,
// whether the program took its whole container with it, and how it ended:
// the sandbox's init is gone, and the engine says the container ran out of
// memory (its oom event, or its state), or the run was past its timeout.
// The stream can end before the engine has seen the container die, so it
// waits (a few seconds at most) for the container's die event.
func (m *Manager) sandboxLost(ctrName string, w *runWatch, start time.Time, timeout time.Duration) (wire.RunStatus, bool) {
	if w == nil {
		return wire.RunStatus{}, false // not watched (the default runtime): lostRun says
	}
	bg, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m.initAnswers(bg, ctrName) {
		return wire.RunStatus{}, false // only the wrapper was lost
	}
	oom := func() bool {
		if w.outOfMemory() {
			return true
		}
		c, err := m.Engine.ContainerInspect(bg, ctrName)
		return err == nil && c.State != nil && c.State.OOMKilled
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if oom() {
			return oomStatus(start), true
		}
		if w == nil || w.hasDied() || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if w.outOfMemory() {
		return oomStatus(start), true
	}
	if timeout > 0 && time.Since(start) >= timeout {
		return timeoutStatus(start), true
	}
	if w.diedUnasked() {
		// Nobody killed, stopped or removed it, its init did not exit on
		// its own during a run: the program took it down (gVisor, ptrace
		// platform: a fork bomb at the pids limit, which also counts
		// gVisor's own threads).
		return crashStatus(start), true
	}
	return wire.RunStatus{}, false
}

// hasDied reports whether the engine said the container died.
func (w *runWatch) hasDied() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.died
}

// statusCheck tells the run's wrapper's Status frame from forged ones: the
// wrapper's exit code is the one the engine has for the wrapper's exec (the
// wrapper exits with its status's code right after writing it). gVisor
// (Debian's runsc 2022-12) does not enforce non-dumpability on
// /proc/PID/fd: code of a concurrent run of the same sandbox (same user)
// can open the wrapper's stdout and write frames into its stream, as
// TestContainmentNoForgery does. A status the engine does not confirm is
// kept as a candidate, and the stream is read on: the wrapper's own comes
// later, or the stream ends and the engine's exit code picks among them.
type statusCheck struct {
	m          *Manager
	execID     string
	candidates []wire.RunStatus
	waited     bool // the one grace wait for a running exec was spent
	forged     int  // Status frames that were not JSON, or not confirmed
}

// fromWrapper reports whether the engine confirms st (the exec ended with
// its exit code); st is kept as a candidate otherwise.
func (c *statusCheck) fromWrapper(ctx context.Context, st wire.RunStatus) bool {
	c.candidates = append(c.candidates, st)
	wait := time.Duration(0)
	if !c.waited {
		wait, c.waited = statusGrace, true
	}
	ended, code, ok := c.exitCode(ctx, wait)
	if !ok {
		return true // the engine cannot say: keep the status (as without the check)
	}
	if ended && code != st.ExitCode {
		core.Debugf("a status frame said exit %d, the engine says %d: not the wrapper's", st.ExitCode, code)
	}
	if !ended || code != st.ExitCode {
		c.forged++
	}
	return ended && code == st.ExitCode
}

// tampered is the error for a run whose stream carried bytes that were not
// its wrapper's frames (a frame that does not parse, or a Status the engine
// did not confirm) and ended without a status the engine confirms: other
// code of the sandbox wrote into it (README: runc vs runsc). Nothing from
// that stream is trusted; the engine's exit code of the wrapper is named
// when it has one soon (a stream left unread can hold the wrapper up).
func (c *statusCheck) tampered(ctx context.Context, runtime string) *core.Error {
	ended, code, ok := c.exitCode(ctx, statusGrace)
	exit := ""
	if ok && ended {
		exit = fmt.Sprintf("; the engine says the run's wrapper exited with %d", code)
	}
	return core.Errorf(core.CodeStreamTampered, "the run's output stream carried bytes that were not its wrapper's: under runtime %q other code of this sandbox (the same user) can write into a run's stream, so neither its output nor its status is trusted%s (keep concurrent callers apart with sessions or scopes)", runtime, exit)
}

// atEnd picks, when the stream ended, the last candidate the engine's
// exit code confirms.
func (c *statusCheck) atEnd(ctx context.Context) (wire.RunStatus, bool) {
	if c == nil || len(c.candidates) == 0 {
		return wire.RunStatus{}, false
	}
	ended, code, ok := c.exitCode(ctx, verifyWait)
	for i := len(c.candidates) - 1; i >= 0; i-- {
		if !ok || (ended && c.candidates[i].ExitCode == code) {
			return c.candidates[i], true
		}
	}
	return wire.RunStatus{}, false
}

// processStarted reports whether the engine started the exec's process (it
// has a PID): a stream whose first bytes are not the helper's frames then
// was written to by other code, not by the engine refusing the exec.
func (c *statusCheck) processStarted(ctx context.Context) bool {
	ins, err := c.m.Engine.ContainerExecInspect(ctx, c.execID)
	return err == nil && ins.Pid > 0
}

// exitCode polls the exec until it ended or wait passed.
func (c *statusCheck) exitCode(ctx context.Context, wait time.Duration) (ended bool, code int, ok bool) {
	deadline := time.Now().Add(wait)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		ins, err := c.m.Engine.ContainerExecInspect(ctx, c.execID)
		if err != nil {
			return false, 0, false
		}
		if !ins.Running {
			return true, ins.ExitCode, true
		}
		if time.Now().After(deadline) {
			return false, 0, true
		}
		time.Sleep(delay)
	}
}

// statusGrace is how long the first status waits for its wrapper's exec to
// end (it ends right after the status); verifyWait how long the end of the
// stream does.
const (
	statusGrace = 500 * time.Millisecond
	verifyWait  = 5 * time.Second
)
