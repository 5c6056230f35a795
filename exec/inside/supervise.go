package inside

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

const (
	// pumpBuffer is the read size of the output pumps; each read becomes one
	// frame at once.
	pumpBuffer = 32 << 10
	// killDeadline bounds the kill-and-reap sweep.
	killDeadline = 3 * time.Second
	// killPoll is the pause between two rounds of the sweep.
	killPoll = 2 * time.Millisecond
	// drainTimeout bounds the wait for the output pipes to reach EOF once
	// every process is dead (an escaped process could hold a pipe open).
	drainTimeout = 2 * time.Second
)

// childExit is the wait status of the main child and when it was reaped.
type childExit struct {
	ws syscall.WaitStatus
	at time.Time
}

// supervise runs argv to completion: it streams its output, enforces the
// timeout and output caps, kills everything it left behind, and returns the
// Status to report. The caller must have made this process a child
// subreaper.
func supervise(opts runOptions, argv []string, out *output, reg *registration) wire.RunStatus {
	// With SIGPIPE handled, a write to a broken stdout returns EPIPE instead
	// of killing the wrapper. Handlers (unlike SIG_IGN) are reset by execve,
	// so the program still gets the default SIGPIPE.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	// The program runs as the same user and can signal the wrapper: the
	// signals that would end it quietly are caught and ignored (a client's
	// Ctrl-C arrives from PID 1 instead, as an "interrupted" notice;
	// SIGKILL and SIGSTOP cannot be caught: PID 1 deals with those).
	signal.Notify(make(chan os.Signal, 8), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGVTALRM, syscall.SIGPROF, syscall.SIGTSTP,
		syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGIO, syscall.SIGPWR,
		syscall.SIGSTKFLT, syscall.SIGTRAP)

	var pipes [6]*os.File // stdin r,w; stdout r,w; stderr r,w
	for i := 0; i < 6; i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			for _, f := range pipes[:i] {
				f.Close()
			}
			return internalError("pipe: %v", err)
		}
		pipes[i], pipes[i+1] = r, w
	}
	stdinR, stdinW := pipes[0], pipes[1]
	stdoutR, stdoutW := pipes[2], pipes[3]
	stderrR, stderrW := pipes[4], pipes[5]

	oomBefore, oomOK := readOOMKills()
	start := time.Now()
	proc, err := os.StartProcess(argv[0], argv, &os.ProcAttr{
		Dir:   opts.workdir,
		Env:   os.Environ(),
		Files: []*os.File{stdinR, stdoutW, stderrW},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	// The child holds its own copies now; ours would keep the pipes open.
	stdinR.Close()
	stdoutW.Close()
	stderrW.Close()
	if err != nil {
		stdinW.Close()
		stdoutR.Close()
		stderrR.Close()
		return startFailure(argv[0], err)
	}
	pid := proc.Pid
	defer proc.Release()
	writeOOMScoreAdj(pid)

	mainDone := make(chan childExit, 1)
	allReaped := make(chan struct{})
	go reapChildren(pid, mainDone, allReaped)

	outR := &onceFile{f: stdoutR}
	errR := &onceFile{f: stderrR}
	inW := &onceFile{f: stdinW}
	var truncOut, truncErr atomic.Bool
	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { defer pumps.Done(); pumpOutput(out, wire.Stdout, outR, opts.maxOutput, &truncOut) }()
	go func() { defer pumps.Done(); pumpOutput(out, wire.Stderr, errR, opts.maxOutput, &truncErr) }()
	go pumpStdin(os.Stdin, inW)

	timer := time.NewTimer(opts.timeout)
	defer timer.Stop()
	var ex childExit
	var stopped *ctlNotice
	gotExit, timedOut := false, false
	select {
	case n := <-reg.notices: // PID 1: the disk limit, the max lifetime, or Ctrl-C
		if n.Stop != reasonInterrupted {
			stopped = &n
		}
	case ex = <-mainDone:
		gotExit = true
	case <-timer.C:
		select {
		case ex = <-mainDone: // exited just as the timer fired
			gotExit = true
		default:
			timedOut = true
		}
	case <-out.broken: // nobody reads the output any more: stop the program
	}

	// Nothing started by the program outlives the exec.
	k := killer{self: os.Getpid(), ownPgid: syscall.Getpgrp(), pgid: pid}
	k.sweep(allReaped, time.Now().Add(killDeadline))
	inW.close()
	// The sweep ends once every child is reaped, the main one included:
	// its status is then waiting. Take it before any timer is in the race
	// (a select picks at random among ready cases, and a wrapper descheduled
	// for a moment finds a 2 ms timer ready too).
	ex, gotExit = takeExit(mainDone, ex, gotExit, killPoll)
	oomAfter, oomAfterOK := readOOMKills()

	// The pipes reach EOF once every writer is dead.
	drained := make(chan struct{})
	go func() { pumps.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainTimeout):
		outR.close()
		errR.close()
		select {
		case <-drained:
		case <-time.After(time.Second):
		}
	}

	ex, gotExit = takeExit(mainDone, ex, gotExit, 0)
	if !gotExit {
		st := internalError("the program (pid %d) could not be killed", pid)
		st.TimedOut = timedOut
		return st
	}
	oomIncreased := oomOK && oomAfterOK && oomAfter > oomBefore
	st := exitStatus(ex.ws, timedOut, oomIncreased)
	if stopped != nil {
		code := wire.ErrDiskLimit
		if stopped.Stop == reasonLifetime {
			code = wire.ErrLifetime
		}
		st.ExitCode, st.ErrorCode, st.Error = 125, code, stopped.Message
	}
	st.StdoutTruncated = truncOut.Load()
	st.StderrTruncated = truncErr.Load()
	st.DurationMS = ex.at.Sub(start).Milliseconds()
	return st
}

// exitStatus maps the main child's wait status to a RunStatus.
func exitStatus(ws syscall.WaitStatus, timedOut, oomIncreased bool) wire.RunStatus {
	var st wire.RunStatus
	switch {
	case timedOut:
		st.ExitCode, st.TimedOut = 124, true
	case ws.Exited():
		st.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		sig := int(ws.Signal())
		st.ExitCode, st.Signal = 128+sig, sig
		st.OOMKilled = ws.Signal() == syscall.SIGKILL && oomIncreased
	default:
		st = internalError("unexpected wait status %#x", uint32(ws))
	}
	return st
}

// startFailure maps an os.StartProcess error to a Status.
func startFailure(path string, err error) wire.RunStatus {
	switch {
	case errors.Is(err, syscall.ENOENT):
		// The file was there a moment ago: a #! line names a missing
		// interpreter, or a dynamic loader is missing.
		return failure(127, wire.ErrInterpreterNotFound, "cannot run "+path+": "+err.Error())
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.ENOEXEC):
		return failure(126, wire.ErrInterpreterNoExec, "cannot run "+path+": "+err.Error())
	default:
		return internalError("starting %s: %v", path, err)
	}
}

// writeOOMScoreAdj makes the program the OOM killer's first choice, rather
// than the wrapper or PID 1. Errors are ignored.
func writeOOMScoreAdj(pid int) {
	f, err := os.OpenFile(filepath.Join(procRoot, strconv.Itoa(pid), "oom_score_adj"), os.O_WRONLY, 0)
	if err != nil {
		return
	}
	_, _ = f.WriteString("1000")
	_ = f.Close()
}

// takeExit returns the main child's exit: ex when got, else one waiting on
// mainDone, else one that arrives within wait.
func takeExit(mainDone <-chan childExit, ex childExit, got bool, wait time.Duration) (childExit, bool) {
	if got {
		return ex, true
	}
	select {
	case ex = <-mainDone:
		return ex, true
	default:
	}
	if wait <= 0 {
		return ex, false
	}
	select {
	case ex = <-mainDone:
		return ex, true
	case <-time.After(wait):
		return ex, false
	}
}

// reapChildren reaps every child of the wrapper (the main child and the
// orphans re-parented to it) until none is left. It sends the main child's
// status on mainDone, then closes allReaped at ECHILD.
func reapChildren(mainPID int, mainDone chan<- childExit, allReaped chan<- struct{}) {
	defer close(allReaped)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return // ECHILD: no child left
		}
		if pid == mainPID {
			mainDone <- childExit{ws: ws, at: time.Now()}
		}
	}
}

// killer SIGKILLs the program's process group and every descendant of the
// wrapper.
type killer struct {
	self    int // the wrapper's pid
	ownPgid int // the wrapper's process group, never signalled
	pgid    int // the program's process group
}

// sweep kills in rounds until every child is reaped (done is closed) or the
// deadline passes. A fork bomb forks while it is being killed, hence the
// rounds.
func (k killer) sweep(done <-chan struct{}, deadline time.Time) bool {
	for {
		k.killOnce()
		select {
		case <-done:
			return true
		default:
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-done:
			return true
		case <-time.After(killPoll):
		}
	}
}

func (k killer) groupOK(pgid int) bool { return pgid > 1 && pgid != k.ownPgid }

// killOnce SIGKILLs the program's process group, every descendant of the
// wrapper found in /proc, and the process groups those descendants lead.
// Groups not led by a descendant are left alone: a process may have joined a
// group it does not own, and only the process itself is ours to kill.
func (k killer) killOnce() {
	if k.groupOK(k.pgid) {
		_ = syscall.Kill(-k.pgid, syscall.SIGKILL)
	}
	procs, err := readProcs(procRoot)
	if err != nil {
		return
	}
	desc := descendants(procs, k.self)
	ours := make(map[int]bool, len(desc))
	for _, p := range desc {
		ours[p.PID] = true
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	killed := map[int]bool{k.pgid: true}
	for _, p := range desc {
		if ours[p.PGRP] && !killed[p.PGRP] && k.groupOK(p.PGRP) {
			killed[p.PGRP] = true
			_ = syscall.Kill(-p.PGRP, syscall.SIGKILL)
		}
	}
}

// onceFile closes a file once, whoever asks first.
type onceFile struct {
	f    *os.File
	once sync.Once
}

func (o *onceFile) close() { o.once.Do(func() { _ = o.f.Close() }) }

// pumpOutput frames everything read from r onto out, at most limit bytes.
// At the cap it sets truncated and closes r, so the program's further writes
// fail with EPIPE/SIGPIPE, as with `| head -c N`.
func pumpOutput(out *output, typ byte, r *onceFile, limit int64, truncated *atomic.Bool) {
	defer r.close()
	buf := make([]byte, pumpBuffer)
	var total int64
	for {
		n, err := r.f.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			over := false
			if rem := limit - total; int64(n) > rem {
				chunk, over = chunk[:rem], true
			}
			if len(chunk) > 0 {
				if !out.frame(typ, chunk) {
					return
				}
				total += int64(len(chunk))
			}
			if over {
				truncated.Store(true)
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pumpStdin copies the rest of stdin to the program, then closes the pipe so
// that the program sees EOF. A program that exits without reading makes the
// copy fail with EPIPE, which is fine.
func pumpStdin(stdin io.Reader, w *onceFile) {
	_, _ = io.Copy(w.f, stdin)
	w.close()
}
