package inside

import (
	"bytes"
	"os"
	"sync"
	"syscall"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// The stdin server (init --serve-stdin): the call that creates a sandbox
// attaches to the container before it starts it, as `docker run` does, and
// PID 1 starts a channel server (`sandbox-helper channel`, channel.go) as
// its own child on the container's stdin and stdout. The call's run goes
// through it as through an exec channel: the first program of a sandbox
// runs without an engine exec, whose per-exec setup is most of what a first
// call costs over `docker run`. The call ends its attach once its run is
// over; the engine then closes the container's stdin (StdinOnce), and the
// server, reading its end, exits.
//
// The server's parent is PID 1, not the engine (an exec root's PPID is 0),
// and sandboxed code can make processes whose parent is PID 1 (orphans):
// so PID 1 records the one pid it started, and only that process counts as
// a channel root (isChannelRoot, readRoots) whose `run` children are runs.
// The record is cleared when PID 1 reaps it: its pid is not reused before
// (a zombie holds it), and the pids of a namespace are handed out in turn,
// so not in the moment between the reap and the clearing either.
var stdinServer struct {
	mu     sync.Mutex
	pid    int // 0: none
	parent int // PID 1 (the process that started it)
	// out is PID 1's own copy of the container's stdout (dropStdio
	// points fd 1 elsewhere): the engine does not end an attach when
	// the container's stdout has no writer left, so when sandboxed code
	// kills the server during its call, PID 1 ends the call's stream
	// with frames no reader takes (stdinServerReaped).
	out *os.File
}

// startStdinServer starts the stdin server, with PID 1's stdin, stdout
// and stderr. The record is written before any run of it can register:
// registrations read it under the same lock (stdinServerPID), and the
// server starts runs only after the plugin has its hello.
func startStdinServer() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	stdinServer.mu.Lock()
	defer stdinServer.mu.Unlock()
	p, err := os.StartProcess(self, []string{os.Args[0], wire.VerbChannel, "--first"}, &os.ProcAttr{
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return err
	}
	stdinServer.pid, stdinServer.parent = p.Pid, os.Getpid()
	_ = p.Release() // PID 1's reaper collects it (stdinServerReaped)
	if fd, _, errno := syscall.Syscall(syscall.SYS_FCNTL, 1, syscall.F_DUPFD_CLOEXEC, 3); errno == 0 {
		stdinServer.out = os.NewFile(fd, "stdout")
	}
	return nil
}

// isStdinServer reports whether pid, whose parent is ppid, is the live
// stdin server.
func isStdinServer(pid, ppid int) bool {
	stdinServer.mu.Lock()
	defer stdinServer.mu.Unlock()
	return pid > 0 && pid == stdinServer.pid && ppid == stdinServer.parent
}

// dropStdio points PID 1's own stdin, stdout and stderr at /dev/null once
// the server has them: the container's streams then end with the server
// (its death ends the attach, as a killed channel exec ends its stream),
// and nothing PID 1 writes reaches the call.
func dropStdio() {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer null.Close()
	for fd := 0; fd <= 2; fd++ {
		_ = syscall.Dup3(int(null.Fd()), fd, 0)
	}
}

// stdinServerReaped clears the record once PID 1 has reaped pid, the
// server. A server that did not exit by itself (killed, or stopped and so
// killed by PID 1) may have been in a call: PID 1 then writes MaxFrame+5
// bytes of 0xff after whatever it wrote, so that the plugin's frame reader,
// wherever the server left off (even mid-frame), reads a header no frame
// has and ends the call (its run lost, as when a channel's exec ends).
func stdinServerReaped(pid int, ws syscall.WaitStatus) {
	stdinServer.mu.Lock()
	defer stdinServer.mu.Unlock()
	if pid == 0 || pid != stdinServer.pid {
		return
	}
	stdinServer.pid = 0
	out := stdinServer.out
	stdinServer.out = nil
	if out == nil {
		return
	}
	if ws.Exited() && ws.ExitStatus() == 0 {
		_ = out.Close()
		return
	}
	go func() {
		defer out.Close()
		_, _ = out.Write(bytes.Repeat([]byte{0xff}, wire.MaxFrame+5))
	}()
}
