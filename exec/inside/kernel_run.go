package inside

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

const (
	// kernelGrace is how long a kernel has to return after its interrupt
	// (timeout, Ctrl-C) before it is killed and its state lost.
	kernelGrace = 2 * time.Second
	// kernelReplyMax bounds the kernel's reply line.
	kernelReplyMax = 4 << 20
)

// kernelReply is what a kernel answers a call on its socket.
type kernelReply struct {
	Marker   string  `json:"marker"` // the call's, echoed
	ExitCode int     `json:"exit_code"`
	Result   *string `json:"result"`
}

// kernelLease is a run's lease of a kernel (PID 1's reply to opKernel).
type kernelLease struct {
	conn      *net.UnixConn
	r         *bufio.Reader
	pid       int
	restarted bool
	why       string
	stdout    *os.File
	stderr    *os.File
	sock      *os.File
}

func (l *kernelLease) close() {
	for _, f := range []*os.File{l.stdout, l.stderr, l.sock} {
		if f != nil {
			f.Close()
		}
	}
	l.conn.Close()
}

// leaseKernel asks PID 1 for the kernel, waiting at most until deadline.
func leaseKernel(req ctlRequest, deadline time.Time) (*kernelLease, *wire.RunStatus) {
	cc, err := dialControl()
	if err != nil {
		st := failure(125, wire.ErrDraining, "the sandbox's init does not answer (it is ending): "+err.Error())
		return nil, &st
	}
	_ = cc.c.SetDeadline(deadline)
	if err := writeLine(cc.c, req); err != nil {
		cc.Close()
		st := internalError("asking for the kernel: %v", err)
		return nil, &st
	}
	// The reply line, with the kernel's fds on its first bytes.
	var line []byte
	var files []*os.File
	buf := make([]byte, 4096)
	// Room for the credentials too (the client has SO_PASSCRED).
	oob := make([]byte, syscall.CmsgSpace(3*4)+syscall.CmsgSpace(syscall.SizeofUcred)+64)
	for !bytes.Contains(line, []byte{'\n'}) {
		n, oobn, _, _, err := cc.c.ReadMsgUnix(buf, oob)
		if oobn > 0 {
			files = append(files, parseRights(oob[:oobn])...)
		}
		if err != nil || n == 0 {
			for _, f := range files {
				f.Close()
			}
			cc.Close()
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				st := failure(124, "", "the call waited for the kernel longer than its timeout (another call was running in it); nothing ran")
				st.TimedOut = true
				return nil, &st
			}
			st := failure(125, wire.ErrDraining, fmt.Sprintf("the sandbox's init did not lend the kernel (it is ending): %v", err))
			return nil, &st
		}
		line = append(line, buf[:n]...)
	}
	_ = cc.c.SetDeadline(time.Time{})
	var rep ctlReply
	i := bytes.IndexByte(line, '\n')
	if err := json.Unmarshal(line[:i], &rep); err != nil || !rep.OK || len(files) != 3 || rep.KernelPID <= 1 {
		for _, f := range files {
			f.Close()
		}
		cc.Close()
		switch {
		case err != nil:
			st := internalError("bad reply from init: %v", err)
			return nil, &st
		case rep.Refused == reasonDraining:
			st := failure(125, wire.ErrDraining, rep.Message)
			return nil, &st
		case !rep.OK:
			st := internalError("init did not start the kernel: %s", rep.Message)
			return nil, &st
		}
		st := internalError("init sent %d files for the kernel, want 3", len(files))
		return nil, &st
	}
	l := &kernelLease{conn: cc.c, r: bufio.NewReader(cc.c), pid: rep.KernelPID, restarted: rep.Restarted, why: rep.Why,
		stdout: files[0], stderr: files[1], sock: files[2]}
	return l, nil
}

// parseRights returns the files of the SCM_RIGHTS messages in oob.
func parseRights(oob []byte) []*os.File {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var out []*os.File
	for _, m := range msgs {
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			syscall.CloseOnExec(fd)
			// Pollable: a Close ends a blocked Read.
			_ = syscall.SetNonblock(fd, true)
			out = append(out, os.NewFile(uintptr(fd), "kernel-fd"))
		}
	}
	return out
}

// done tells PID 1 that the kernel finished the call: a lease that ends
// without it (its run was killed mid-call) makes PID 1 kill the kernel,
// whose late answer must not reach the next call.
func (l *kernelLease) done() {
	_ = l.conn.SetWriteDeadline(time.Now().Add(time.Second))
	_ = writeLine(l.conn, ctlRequest{Op: opKernelDone})
}

// exitOf asks PID 1 how the leased kernel ended, for up to wait.
func (l *kernelLease) exitOf(wait time.Duration) (syscall.WaitStatus, string, bool) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		_ = l.conn.SetDeadline(time.Now().Add(time.Second))
		if writeLine(l.conn, ctlRequest{Op: opKernelExit}) != nil {
			return 0, "", false
		}
		line, err := l.r.ReadBytes('\n')
		if err != nil {
			return 0, "", false
		}
		var rep ctlReply
		if json.Unmarshal(line, &rep) == nil && rep.OK && rep.WaitStatus != nil {
			return syscall.WaitStatus(*rep.WaitStatus), rep.Why, true
		}
		time.Sleep(20 * time.Millisecond) // PID 1 reaps on SIGCHLD, within a tick at worst
	}
	return 0, "", false
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	ps, err := parseStat(b)
	return err == nil && ps.State != 'Z'
}

// runKernel runs code in the run's kernel: doRun's last step for a run with
// --kernel.
func runKernel(opts runOptions, interp string, code []byte, out *output, reg *registration) wire.RunStatus {
	start := time.Now()
	deadline := start.Add(opts.timeout)
	env := os.Environ()
	l, refused := leaseKernel(ctlRequest{Op: opKernel, Kernel: opts.kernel, Interp: interp, Workdir: opts.workdir, Env: env, Reset: opts.kernelReset}, deadline)
	if refused != nil {
		return *refused
	}
	defer l.close()
	if l.restarted && opts.kernelReset {
		l.restarted = false // asked for: not news
	}

	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	marker := "\x1e" + hex.EncodeToString(nonce[:]) + "\x1e"
	req, _ := json.Marshal(map[string]string{"code": string(code), "marker": marker})

	var truncOut, truncErr atomic.Bool
	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { defer pumps.Done(); pumpUntil(out, wire.Stdout, l.stdout, marker, opts.maxOutput, &truncOut) }()
	go func() { defer pumps.Done(); pumpUntil(out, wire.Stderr, l.stderr, marker, opts.maxOutput, &truncErr) }()

	replies := make(chan *kernelReply, 1)
	go func() {
		_, _ = l.sock.Write(append(req, '\n'))
		br := bufio.NewReader(io.LimitReader(l.sock, kernelReplyMax))
		for {
			line, err := br.ReadBytes('\n')
			var rep kernelReply
			if err != nil || json.Unmarshal(line, &rep) != nil {
				replies <- nil
				return
			}
			// A reply to an earlier call (whose caller was killed) is
			// not this call's.
			if rep.Marker == marker {
				replies <- &rep
				return
			}
		}
	}()
	// A kernel that dies with descendants holding its socket gives no EOF.
	died := make(chan struct{})
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopWatch:
				return
			case <-t.C:
				if !alive(l.pid) {
					close(died)
					return
				}
			}
		}
	}()

	oomBefore, oomOK := readOOMKills()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var rep *kernelReply
	gotReply, timedOut, dead := false, false, false
	var stopped *ctlNotice
	interrupt := func() {
		_ = syscall.Kill(l.pid, syscall.SIGINT)
		select {
		case rep = <-replies:
			gotReply = rep != nil
			dead = rep == nil
		case <-time.After(kernelGrace):
		}
	}
	select {
	case rep = <-replies:
		gotReply, dead = rep != nil, rep == nil
	case <-died:
		select { // its reply may have come just before
		case rep = <-replies:
			gotReply = rep != nil
		case <-time.After(100 * time.Millisecond):
		}
		dead = !gotReply
	case <-timer.C:
		timedOut = true
		interrupt()
	case n := <-reg.notices:
		if n.Stop != reasonInterrupted {
			stopped = &n
		}
		interrupt()
	case <-out.broken:
		interrupt()
	}

	var st wire.RunStatus
	killed := false
	if !gotReply && !dead {
		// It did not return in the grace: kill it, its state is lost.
		_ = syscall.Kill(-l.pid, syscall.SIGKILL)
		_ = syscall.Kill(l.pid, syscall.SIGKILL)
		killed = true
	}
	if gotReply {
		// Its output up to the marker, then the status; the kernel is
		// idle: the lease ends cleanly.
		waitPumps(&pumps, l, drainTimeout)
		l.done()
		st.ExitCode, st.Result = rep.ExitCode, rep.Result
		if st.Result != nil && int64(len(*st.Result)) > opts.maxOutput {
			r := (*st.Result)[:opts.maxOutput]
			st.Result, st.StdoutTruncated = &r, true
		}
	} else {
		ws, why, ok := l.exitOf(killDeadline)
		waitPumps(&pumps, l, 200*time.Millisecond)
		oomAfter, oomAfterOK := readOOMKills()
		oom := oomOK && oomAfterOK && oomAfter > oomBefore
		if ok {
			st = exitStatus(ws, false, oom)
		} else {
			st.ExitCode = 137
		}
		st.StateLost = true
		if killed {
			st.KernelRestarted = true
			st.Error = fmt.Sprintf("the %s kernel did not return within %s of its interrupt: it was killed, and its state is lost (the next call starts a fresh kernel)", opts.kernel, kernelGrace)
		} else {
			if why == "" {
				why = "it died"
			}
			st.ErrorCode = wire.ErrKernelDied
			st.Error = fmt.Sprintf("the %s kernel ended during the call (%s): its state is lost; the next call starts a fresh kernel", opts.kernel, why)
			if st.OOMKilled {
				st.Error = fmt.Sprintf("the %s kernel ran out of memory and was killed: its state is lost; the next call starts a fresh kernel", opts.kernel)
			}
		}
	}
	if timedOut {
		st.ExitCode, st.TimedOut = 124, true
	}
	if l.restarted {
		st.KernelRestarted, st.StateLost = true, true
		if st.Error == "" {
			st.Error = "the kernel was restarted, its state is lost: " + l.why
		}
	}
	if stopped != nil {
		code := wire.ErrDiskLimit
		if stopped.Stop == reasonLifetime {
			code = wire.ErrLifetime
		}
		st.ExitCode, st.ErrorCode, st.Error = 125, code, stopped.Message
	}
	st.StdoutTruncated = st.StdoutTruncated || truncOut.Load()
	st.StderrTruncated = truncErr.Load()
	st.DurationMS = time.Since(start).Milliseconds()
	return st
}

// waitPumps waits for the pumps to reach the marker, at most d, then stops
// them.
func waitPumps(pumps *sync.WaitGroup, l *kernelLease, d time.Duration) {
	done := make(chan struct{})
	go func() { pumps.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(d):
	}
	l.stdout.Close()
	l.stderr.Close()
	<-done
}

// pumpUntil frames what r gives up to marker (at most limit bytes, the rest
// is read and dropped), and returns at the marker or at EOF.
func pumpUntil(out *output, typ byte, r *os.File, marker string, limit int64, truncated *atomic.Bool) {
	m := []byte(marker)
	buf := make([]byte, pumpBuffer)
	var pend []byte // read, not yet framed: may hold the start of the marker
	var total int64
	emit := func(p []byte) {
		if rem := limit - total; int64(len(p)) > rem {
			p = p[:max(rem, 0)]
			truncated.Store(true)
		}
		if len(p) > 0 {
			out.frame(typ, p)
			total += int64(len(p))
		}
	}
	for {
		n, err := r.Read(buf)
		pend = append(pend, buf[:n]...)
		if i := bytes.Index(pend, m); i >= 0 {
			emit(pend[:i])
			return
		}
		// Keep what could be the marker's start.
		keep := min(len(pend), len(m)-1)
		emit(pend[:len(pend)-keep])
		pend = append(pend[:0], pend[len(pend)-keep:]...)
		if err != nil {
			emit(pend)
			return
		}
	}
}
