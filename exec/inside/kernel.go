package inside

import (
	_ "embed"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// Kernels (`exec --kernel`): a long-lived interpreter per language whose
// state persists between calls. PID 1 owns them: it starts a kernel as its
// own child on a run's request (a kernel started by a run would be swept
// with the run), spares it from the orphan rule, records how it ended when
// it reaps it, and kills it on a drain. A kernel is not an exec root: an
// idle one never keeps the sandbox busy; the run that calls it is, while it
// calls.
//
// A kernel's fd 1 and 2 are pipes and its fd 3 a socket, whose other ends
// only PID 1 holds (no name other code could bind or connect to). PID 1
// lends them, with SCM_RIGHTS, to one registered run at a time, in the
// order the requests arrived: the lease is the run's kernel connection, and
// ends when it closes. The run sends the code on fd 3, streams fd 1 and 2,
// and reads the result on fd 3 (runKernel).

//go:embed kernels/kernel.py
var kernelPython string

//go:embed kernels/kernel.js
var kernelNode string

// Control operations of kernels.
const (
	// opKernel asks for the lease of a language's kernel (started if
	// none lives); the reply carries its fds.
	opKernel = "kernel"
	// opKernelExit, on a leased connection, asks how the leased kernel
	// ended (not OK while it has not been reaped).
	opKernelExit = "kernel-exit"
	// opKernelDone, on a leased connection: the kernel finished the call
	// (no reply). A lease that ends without it ends mid-call: PID 1 kills
	// the kernel.
	opKernelDone = "kernel-done"
)

// kernelArgv is how a kernel is started with interpreter interp.
func kernelArgv(lang, interp string) ([]string, bool) {
	switch lang {
	case wire.KernelPython:
		return []string{interp, "-u", "-c", kernelPython}, true
	case wire.KernelNode:
		return []string{interp, "-e", kernelNode}, true
	}
	return nil, false
}

// kernelProc is a kernel PID 1 started.
type kernelProc struct {
	pid     int
	started time.Time
	calls   int
	files   [3]*os.File // PID 1's ends: stdout, stderr (read), socket
	exited  *syscall.WaitStatus
	killed  string // why PID 1 killed it, if it did
}

func (k *kernelProc) closeFiles() {
	for _, f := range k.files {
		if f != nil {
			f.Close()
		}
	}
}

// kill SIGKILLs the kernel and its process group.
func (k *kernelProc) kill(why string) {
	if k.exited != nil {
		return
	}
	if k.killed == "" {
		k.killed = why
	}
	_ = syscall.Kill(-k.pid, syscall.SIGKILL)
	_ = syscall.Kill(k.pid, syscall.SIGKILL)
}

// kernelSlot is one language's kernel and its lease.
type kernelSlot struct {
	cur       *kernelProc // nil before the first start
	holder    *net.UnixConn
	holderPID int
	clean     bool       // the holder said opKernelDone
	queue     []ctlEvent // requests waiting for the lease, oldest first
}

// kernelInfo is a live kernel, for `status`.
type kernelInfo struct {
	Lang     string    `json:"lang"`
	PID      int       `json:"pid"`
	Started  time.Time `json:"started"`
	Calls    int       `json:"calls"`
	RSSBytes int64     `json:"rss_bytes,omitempty"`
	Busy     bool      `json:"busy"`
}

// describeExit says how a kernel ended.
func describeExit(k *kernelProc) string {
	if k.killed != "" {
		return k.killed
	}
	if k.exited == nil {
		return "it was stopped"
	}
	ws := *k.exited
	switch {
	case ws.Exited():
		return fmt.Sprintf("it exited with status %d", ws.ExitStatus())
	case ws.Signaled():
		return fmt.Sprintf("it was killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
	}
	return "it ended"
}

// kernelRequest serves opKernel: it grants the lease now, or queues the
// request (no reply until the lease is free).
func (s *supervisor) kernelRequest(ev ctlEvent) {
	if _, ok := s.runs[ev.pid]; !ok {
		ev.reply <- ctlReply{Refused: reasonNotServed, Message: "a kernel is lent to registered runs only"}
		return
	}
	if _, ok := kernelArgv(ev.req.Kernel, "x"); !ok {
		ev.reply <- ctlReply{Refused: reasonNotServed, Message: fmt.Sprintf("no kernel for %q", ev.req.Kernel)}
		return
	}
	slot := s.kernels[ev.req.Kernel]
	if slot == nil {
		slot = &kernelSlot{}
		s.kernels[ev.req.Kernel] = slot
	}
	if slot.holder != nil {
		slot.queue = append(slot.queue, ev)
		return
	}
	s.grantKernel(ev.req.Kernel, slot, ev)
}

// grantKernel lends slot's kernel to ev's run, starting one first if none
// lives (or on a reset).
func (s *supervisor) grantKernel(lang string, slot *kernelSlot, ev ctlEvent) {
	var rep ctlReply
	if _, ok := s.runs[ev.pid]; !ok || s.draining(time.Now()) {
		// The run has gone while it waited, or the sandbox is stopping.
		rep.Refused, rep.Message = reasonDraining, "the run ended, or the sandbox is being stopped, before the kernel was free"
		ev.reply <- rep
		return
	}
	k := slot.cur
	if k != nil && ev.req.Reset {
		k.kill("it was reset (--kernel-reset)")
		k.closeFiles()
		rep.Restarted, rep.Why = true, "the kernel was reset"
		slot.cur, k = nil, nil
	}
	if k != nil && (k.exited != nil || k.killed != "") {
		// Ended, or killed and not reaped yet: a killed kernel is never
		// lent again (TestKernelCallerKilled).
		rep.Restarted, rep.Why = true, "the previous kernel ended: "+describeExit(k)
		k.closeFiles()
		slot.cur, k = nil, nil
	}
	if k == nil {
		var err error
		k, err = startKernel(lang, ev.req)
		if err != nil {
			rep.Refused, rep.Message = "start_failed", err.Error()
			ev.reply <- rep
			return
		}
		slot.cur = k
	}
	files, err := dupFiles(k.files[:])
	if err != nil {
		rep.Refused, rep.Message = "start_failed", err.Error()
		ev.reply <- rep
		return
	}
	k.calls++
	rep.OK, rep.KernelPID, rep.files = true, k.pid, files
	slot.holder, slot.holderPID, slot.clean = ev.conn, ev.pid, false
	ev.reply <- rep
}

// kernelReleased ends the lease held on conn, and grants the next waiter.
func (s *supervisor) kernelReleased(conn *net.UnixConn) bool {
	for lang, slot := range s.kernels {
		if slot.holder == conn {
			if !slot.clean && slot.cur != nil {
				slot.cur.kill("its call's run ended during the call")
			}
			slot.holder, slot.holderPID = nil, 0
			for len(slot.queue) > 0 && slot.holder == nil {
				next := slot.queue[0]
				slot.queue = slot.queue[1:]
				s.grantKernel(lang, slot, next)
			}
			return true
		}
		// A waiter that gave up.
		for i, w := range slot.queue {
			if w.conn == conn {
				w.reply <- ctlReply{Refused: reasonDraining, Message: "gave up waiting"}
				slot.queue = append(slot.queue[:i], slot.queue[i+1:]...)
				return true
			}
		}
	}
	return false
}

// kernelExit serves opKernelExit on a lease.
func (s *supervisor) kernelExit(ev ctlEvent) {
	for _, slot := range s.kernels {
		if slot.holder == ev.conn && slot.cur != nil && slot.cur.exited != nil {
			ws := uint32(*slot.cur.exited)
			ev.reply <- ctlReply{OK: true, WaitStatus: &ws, Why: describeExit(slot.cur)}
			return
		}
	}
	ev.reply <- ctlReply{}
}

// kernelDone serves opKernelDone on a lease.
func (s *supervisor) kernelDone(ev ctlEvent) {
	for _, slot := range s.kernels {
		if slot.holder == ev.conn {
			slot.clean = true
		}
	}
	ev.reply <- ctlReply{OK: true}
}

// reaped records the end of a child PID 1 reaped: a kernel, or the stdin
// server.
func (s *supervisor) reaped(pid int, ws syscall.WaitStatus) {
	stdinServerReaped(pid, ws)
	s.kernelReaped(pid, ws)
}

// kernelReaped records the end of a kernel PID 1 reaped.
func (s *supervisor) kernelReaped(pid int, ws syscall.WaitStatus) {
	for _, slot := range s.kernels {
		if k := slot.cur; k != nil && k.pid == pid && k.exited == nil {
			k.exited = &ws
		}
	}
}

// killKernels kills every kernel (a drain: the sandbox is being stopped).
func (s *supervisor) killKernels(why string) {
	for _, slot := range s.kernels {
		if slot.cur != nil {
			slot.cur.kill(why)
		}
	}
}

// kernelPIDs are the live kernels' pids: PID 1's children that are not
// orphans.
func (s *supervisor) kernelPIDs() map[int]bool {
	m := map[int]bool{}
	for _, slot := range s.kernels {
		if k := slot.cur; k != nil && k.exited == nil {
			m[k.pid] = true
		}
	}
	return m
}

func (s *supervisor) kernelInfos() []kernelInfo {
	var out []kernelInfo
	for lang, slot := range s.kernels {
		if k := slot.cur; k != nil && k.exited == nil {
			out = append(out, kernelInfo{Lang: lang, PID: k.pid, Started: k.started.UTC(), Calls: k.calls,
				RSSBytes: readRSS(k.pid), Busy: slot.holder != nil})
		}
	}
	return out
}

// readRSS is a process's resident memory (0 if unknown).
func readRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/statm", procRoot, pid))
	if err != nil {
		return 0
	}
	var size, rss int64
	if _, err := fmt.Sscan(string(b), &size, &rss); err != nil {
		return 0
	}
	return rss * int64(os.Getpagesize())
}

// startKernel starts lang's kernel with the requesting run's interpreter,
// working directory and environment.
func startKernel(lang string, req ctlRequest) (*kernelProc, error) {
	argv, _ := kernelArgv(lang, req.Interp)
	if req.Interp == "" {
		return nil, fmt.Errorf("no interpreter for the %s kernel", lang)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return nil, err
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "kernel-socket"), os.NewFile(uintptr(fds[1]), "kernel-socket")
	null, err := os.Open(os.DevNull)
	if err != nil {
		null = nil
	}
	dir := req.Workdir
	if dir == "" {
		dir, _ = os.Getwd()
	}
	proc, err := os.StartProcess(argv[0], argv, &os.ProcAttr{
		Dir:   dir,
		Env:   req.Env,
		Files: []*os.File{null, outW, errW, theirs},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	outW.Close()
	errW.Close()
	theirs.Close()
	if null != nil {
		null.Close()
	}
	if err != nil {
		outR.Close()
		errR.Close()
		ours.Close()
		return nil, fmt.Errorf("starting the %s kernel (%s): %v", lang, argv[0], err)
	}
	writeOOMScoreAdj(proc.Pid)
	k := &kernelProc{pid: proc.Pid, started: time.Now(), files: [3]*os.File{outR, errR, ours}}
	_ = proc.Release()
	return k, nil
}

// dupFiles duplicates files (close-on-exec) for sending: the originals may
// be closed by the main loop before the reply is written.
func dupFiles(files []*os.File) ([]*os.File, error) {
	var out []*os.File
	for _, f := range files {
		fd, _, errno := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_DUPFD_CLOEXEC, 0)
		if errno != 0 {
			for _, o := range out {
				o.Close()
			}
			return nil, errno
		}
		out = append(out, os.NewFile(fd, f.Name()))
	}
	return out, nil
}
