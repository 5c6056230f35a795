package inside

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The control channel: how the helper's short-lived processes talk to PID 1,
// the only process in a sandbox that its code can neither kill, stop nor
// ptrace (signals from inside the PID namespace cannot kill or stop its
// init, and the helper is non-dumpable). PID 1 listens on an abstract unix
// socket, in the container's own network namespace, bound before any exec
// can run; it names every client by the socket's peer credentials
// (SO_PEERCRED) and serves only exec roots: processes whose parent is outside
// the container (PPID 0 inside it), which only the engine's exec can start,
// never sandboxed code. A client checks that the socket's owner is PID 1.
//
// One JSON object per line. A `run` (or `fs`) wrapper registers and keeps its
// connection open for its life: PID 1 counts it as a live run, refuses it
// while the sandbox is draining or over its disk limit, and may send it one
// notice (stop: lifetime_reached or disk_limit). `drain` asks PID 1 to refuse
// new runs once none is registered. `status` asks for PID 1's state.
var (
	// controlSocket is the abstract socket name ('@' = abstract in Go).
	controlSocket = "@docker-sandbox-helper/init"
	// initPID is the pid the control socket's owner must have.
	initPID = 1
	// rootPPID is the parent pid, as seen in the container, of processes
	// the engine's exec started.
	rootPPID = 0
)

// Control operations.
const (
	opRegister = "register"
	opDrain    = "drain"
	opUndrain  = "undrain"
	opStatus   = "status"
	opSignal   = "signal"
	// opTouch renews the lease of the sandbox's shells (shell.go): from a
	// shell wrapper as it starts, and from `sandbox-helper touch`, which
	// the plugin runs while a shell's terminal is attached.
	opTouch = "touch"
)

// Refusals and stop reasons (also RunStatus error codes).
const (
	reasonDraining  = "draining"
	reasonDisk      = "disk_limit"
	reasonLifetime  = "lifetime_reached"
	reasonNotServed = "not_served"
	// reasonInterrupted: the client was interrupted (Ctrl-C): stop the
	// program and report how it ended.
	reasonInterrupted = "interrupted"
)

// ctlRequest is a client's request.
type ctlRequest struct {
	Op string `json:"op"`
	// Token is opSignal's run to stop, and opDrain's/opUndrain's holder.
	Token string `json:"token,omitempty"`
	// opKernel: the kernel (wire.KernelPython, ...), and, to start it,
	// the run's interpreter, working directory and environment; Reset
	// restarts it first.
	Kernel  string   `json:"kernel,omitempty"`
	Interp  string   `json:"interp,omitempty"`
	Workdir string   `json:"workdir,omitempty"`
	Env     []string `json:"env,omitempty"`
	Reset   bool     `json:"reset,omitempty"`
}

// ctlReply is PID 1's answer to a request.
type ctlReply struct {
	OK bool `json:"ok"`
	// Refused names why a register or drain was refused (reason* or
	// "busy" for a drain while runs are registered).
	Refused string `json:"refused,omitempty"`
	Message string `json:"message,omitempty"`
	// Status, for opStatus.
	Status *initStatus `json:"status,omitempty"`
	// opKernel: the kernel's pid; Restarted: a kernel had run before and
	// this one is fresh (Why says what became of the previous one).
	KernelPID int    `json:"kernel_pid,omitempty"`
	Restarted bool   `json:"restarted,omitempty"`
	Why       string `json:"why,omitempty"`
	// opKernelExit: the ended kernel's wait status.
	WaitStatus *uint32 `json:"wait_status,omitempty"`
	// files go with the reply (SCM_RIGHTS): a kernel's stdout, stderr and
	// socket, for opKernel. The writer closes them.
	files []*os.File
}

// ctlNotice is a message PID 1 sends a registered run.
type ctlNotice struct {
	Stop    string `json:"stop"`
	Message string `json:"message,omitempty"`
}

// initStatus is what PID 1 tells `sandbox-helper status`.
type initStatus struct {
	Target      string       `json:"target"`
	Runs        int          `json:"runs"`
	Draining    bool         `json:"draining"`
	IdleSince   *time.Time   `json:"idle_since"`
	DiskLimit   int64        `json:"disk_limit"`
	DiskUsed    int64        `json:"disk_used"`
	DiskScanned *time.Time   `json:"disk_scanned"`
	OverLimit   bool         `json:"over_limit"`
	Expires     *time.Time   `json:"expires,omitempty"` // max-lifetime
	Killed      int          `json:"killed"`            // processes killed by PID 1's rules
	Kernels     []kernelInfo `json:"kernels,omitempty"` // live kernels (exec --kernel)
}

// ctlConn is a client's connection to PID 1.
type ctlConn struct {
	c *net.UnixConn
	r *bufio.Reader
}

// dialControl connects to PID 1 and checks that it is PID 1 listening.
func dialControl() (*ctlConn, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: controlSocket, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// With SO_PASSCRED on the sending side, the kernel attaches this
	// process's credentials to everything it sends, whenever init reads it.
	if err := setPassCred(c); err != nil {
		c.Close()
		return nil, err
	}
	pid, err := peerPID(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	// gVisor's kernel answers a client's SO_PEERCRED with the client's own
	// credentials: there, the name itself vouches for PID 1 (init binds it
	// before any exec can run, and exits, ending the sandbox, if anything
	// holds it: so while init lives, the name is init's).
	if pid != initPID && pid != os.Getpid() {
		c.Close()
		return nil, fmt.Errorf("the control socket belongs to pid %d, not to the sandbox's init", pid)
	}
	return &ctlConn{c: c, r: bufio.NewReader(c)}, nil
}

// call sends one request and reads the reply.
func (cc *ctlConn) call(req ctlRequest, timeout time.Duration) (ctlReply, error) {
	var rep ctlReply
	_ = cc.c.SetDeadline(time.Now().Add(timeout))
	defer func() { _ = cc.c.SetDeadline(time.Time{}) }()
	if err := writeLine(cc.c, req); err != nil {
		return rep, err
	}
	line, err := cc.r.ReadBytes('\n')
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(line, &rep); err != nil {
		return rep, fmt.Errorf("bad reply from init: %v", err)
	}
	return rep, nil
}

func (cc *ctlConn) Close() error { return cc.c.Close() }

// controlCall is one request on a fresh connection.
func controlCall(req ctlRequest) (ctlReply, error) {
	cc, err := dialControl()
	if err != nil {
		return ctlReply{}, err
	}
	defer cc.Close()
	return cc.call(req, 10*time.Second)
}

func writeLine(w interface{ Write([]byte) (int, error) }, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// setPassCred turns SO_PASSCRED on for c.
func setPassCred(c *net.UnixConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_PASSCRED, 1)
	}); err != nil {
		return err
	}
	return serr
}

// peerPID is the pid of the process at the other end of a unix socket (the
// one that connected, or the one that listened).
func peerPID(c *net.UnixConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Pid), nil
}

// rootKind reports what exec root pid is: its helper subcommand ("run",
// "fs", "drain", "status", ...), "" for an exec root that is not the helper,
// and ok=false when pid is not an exec root at all (sandboxed code, or gone).
// A `run` whose parent is a live channel exec root (`sandbox-helper
// channel`, which starts nothing but `run`) counts as an exec root of kind
// "run": sandboxed code cannot make a process whose parent is the channel.
func rootKind(root string, pid int) (kind string, argv []string, ok bool) {
	ps, argv, ok := readProc(root, pid)
	if !ok {
		return "", nil, false
	}
	kind = helperSubcommand(argv)
	if ps.PPID == rootPPID {
		return kind, argv, true
	}
	if kind == "run" && isChannelRoot(root, ps.PPID) {
		return kind, argv, true
	}
	return "", nil, false
}

// isChannelRoot reports whether pid is a live exec root running `channel`,
// or the stdin server PID 1 started (stdin_server.go).
func isChannelRoot(root string, pid int) bool {
	if pid <= 1 {
		return false
	}
	ps, argv, ok := readProc(root, pid)
	if !ok || helperSubcommand(argv) != "channel" {
		return false
	}
	return ps.PPID == rootPPID || isStdinServer(pid, ps.PPID)
}

// readProc reads a live process's stat and command line.
func readProc(root string, pid int) (procStat, []string, bool) {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, nil, false
	}
	ps, err := parseStat(b)
	if err != nil || ps.State == 'Z' {
		return procStat{}, nil, false
	}
	cmd, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return procStat{}, nil, false
	}
	return ps, splitCmdline(cmd), true
}

// threadGroup returns the process (thread group) of a thread id: gVisor's
// SCM_CREDENTIALS name the writing thread, where Linux names its process
// (a Go program writes from any of its threads).
func threadGroup(root string, tid int) int {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(tid), "status"))
	if err != nil {
		return tid
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Tgid:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
				return n
			}
		}
	}
	return tid
}

// errNoInit: the sandbox's init does not answer (it is exiting).
var errNoInit = errors.New("the sandbox's init does not answer")
