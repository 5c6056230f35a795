package inside

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// initAllowNonPID1 lets tests run `init` as an ordinary process. In
// production, init refuses to run unless it is PID 1: on SIGTERM it kills
// every process it can see, which is only sane inside the container's own PID
// namespace.
var initAllowNonPID1 = false

// initReadyHook, when set (by tests), is called once init handles signals.
var initReadyHook func()

// initShutdownGrace bounds how long init waits, after SIGKILLing everything,
// for the processes to disappear before it exits (its own exit kills whatever
// is left in the namespace anyway).
const initShutdownGrace = 500 * time.Millisecond

// Supervision timings.
const (
	// scanEvery is how often PID 1 looks at the processes.
	scanEvery = 250 * time.Millisecond
	// runGrace is how long past its --timeout a `run` wrapper may live (its
	// own kill sweep and output drain take up to killDeadline+drainTimeout)
	// before PID 1 kills it as hung.
	runGrace = killDeadline + drainTimeout + 2*time.Second
	// shellLeaseMin is the shortest lease a shell's touch gives (opTouch).
	shellLeaseMin = 5 * time.Second
	// lifetimeGrace is how long PID 1 waits, at the max lifetime, for the
	// registered runs to report before it ends the sandbox.
	lifetimeGrace = 3 * time.Second
)

// initUsage is init's usage line.
const initUsage = "usage: sandbox-helper init --idle-ttl DURATION [--max-lifetime DURATION] [--disk BYTES] [--target SCOPE[/SESSION]] [--spec HASH]"

// initOptions are the flags of `init`.
type initOptions struct {
	ttl         time.Duration
	maxLifetime time.Duration
	diskLimit   int64
	target      string
}

func Init(args []string) int {
	a, err := wire.ParseInitArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, initUsage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-helper init: %v\n%s\n", err, initUsage)
		return 2
	}
	o := initOptions{ttl: a.IdleTTL, maxLifetime: a.MaxLifetime, diskLimit: a.Disk, target: a.Target}
	self := os.Getpid()
	if self != 1 && !initAllowNonPID1 {
		fmt.Fprintf(os.Stderr, "sandbox-helper init: must run as PID 1 (the container's entrypoint), running as PID %d\n", self)
		return 2
	}
	// The control socket first: no exec can have run before it is bound,
	// and if anything holds the name, the sandbox must not run at all.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: controlSocket, Net: "unix"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-helper init: cannot listen on the control socket: %v\n", err)
		return 1
	}
	defer ln.Close()
	reserveThreads(6)

	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT)
	sv := newSupervisor(o, self, time.Now())
	// An init that can be a subreaper runs on a kernel where each run's
	// wrapper is one: orphans that reach PID 1 then belong to no live run.
	sv.subreaper = setChildSubreaper() == nil
	if o.diskLimit > 0 {
		// The volumes may be over the limit already (a sandbox started
		// anew on its scope's data): known before the first run, if the
		// walk is quick enough, else measured at its registration.
		sv.startDiskScan()
	}
	events := make(chan ctlEvent)
	go acceptControl(ln, events)
	if a.ServeStdin {
		// After the control socket: its runs register there.
		if err := startStdinServer(); err != nil {
			fmt.Fprintf(os.Stderr, "sandbox-helper init: cannot start the stdin server: %v\n", err)
		}
		dropStdio()
	}
	if initReadyHook != nil {
		initReadyHook()
	}
	ticker := time.NewTicker(scanEvery)
	defer ticker.Stop()
	var diskWatch <-chan time.Time
	if o.diskLimit > 0 {
		t := time.NewTicker(diskWatchEvery)
		defer t.Stop()
		diskWatch = t.C
	}
	reapZombiesTo(sv.reaped)
	for {
		select {
		case s := <-sigs:
			if s == syscall.SIGCHLD {
				reapZombiesTo(sv.reaped)
				continue
			}
			shutdown(self, sv.runPIDs())
			return 0
		case ev := <-events:
			sv.handle(ev, time.Now())
			if ev.gone {
				sv.tick(time.Now()) // its orphans die now, not at the next tick
			}
		case now := <-diskWatch:
			sv.watchDisk(now)
		case res := <-sv.diskDone:
			sv.diskResult(res, time.Now())
		case now := <-ticker.C:
			reapZombiesTo(sv.reaped)
			if sv.tick(now) {
				shutdown(self, sv.runPIDs())
				return 0
			}
		}
	}
}

// supervisor is PID 1's state. Only the main loop touches it.
type supervisor struct {
	o         initOptions
	self      int
	start     time.Time
	lastBusy  time.Time
	subreaper bool
	// drains are the stop/rm calls draining the sandbox, by holder, with
	// when each drain lapses; ending (the max lifetime) drains for good.
	drains    map[string]time.Time
	runs      map[int]*regRun // registered wrappers, by pid
	killed    int
	loggedErr bool
	// ending is set once the max lifetime is reached: the sandbox ends at
	// that time (after notifying the runs).
	ending time.Time
	// Disk usage (o.diskLimit > 0).
	disk     diskState
	diskDone chan diskScan
	// kernels, by language (exec --kernel, kernel.go).
	kernels map[string]*kernelSlot
	// shellLease: until when the sandbox's shells count as activity
	// (opTouch; shell.go).
	shellLease time.Time
	// lastLive: the last scan that saw any process besides PID 1 (the
	// disk watch runs while anything lives, activity or not).
	lastLive time.Time
}

func newSupervisor(o initOptions, self int, now time.Time) *supervisor {
	return &supervisor{o: o, self: self, start: now, runs: map[int]*regRun{}, drains: map[string]time.Time{}, diskDone: make(chan diskScan, 1),
		kernels: map[string]*kernelSlot{},
		disk:    diskState{used: -1, free: -1}}
}

// regRun is a registered wrapper: its connection, and the token its command
// line carries (for `signal`).
type regRun struct {
	conn  *net.UnixConn
	token string
}

// rootInfo is an exec root seen by a scan.
type rootInfo struct {
	procStat
	kind    string        // helper subcommand, "" for another program
	timeout time.Duration // `run`'s --timeout
}

// decision is what one scan concluded.
type decision struct {
	kill     []int
	busy     bool // a live exec root exists
	liveRuns bool // a live `run` wrapper exists
}

// decide applies PID 1's rules to one scan:
//   - an exec root (PPID rootPPID) that is the helper and is stopped or
//     traced was stopped by sandboxed code: kill it (its exec ends, its
//     program's processes become orphans);
//   - a `run` wrapper older than its --timeout plus runGrace is hung: kill it;
//   - a shell wrapper keeps the sandbox busy while its client leases it
//     (leased: a touch within the idle TTL), else it is not activity;
//   - any other live exec root keeps the sandbox busy (a stopped one that is
//     not the helper does not);
//   - an orphan (a process re-parented to PID 1) belongs to no live run
//     where the kernel supports subreapers (each wrapper is one): kill it;
//     where it does not (older gVisor), kill orphans once no run lives.
//
// age gives a process's age from its start time in clock ticks.
func decide(procs []procStat, roots map[int]rootInfo, self int, subreaper, leased bool, age func(uint64) time.Duration) decision {
	var d decision
	for _, p := range procs {
		r, ok := roots[p.PID]
		if p.PID == self || (p.PPID != rootPPID && !ok) || p.State == 'Z' {
			continue // a channel's `run` children are in roots (readRoots)
		}
		if !ok {
			r = rootInfo{procStat: p}
		}
		stopped := p.State == 'T' || p.State == 't'
		switch {
		case r.kind != "" && stopped:
			d.kill = append(d.kill, p.PID)
		case r.kind == "run" && r.timeout > 0 && p.Start > 0 && age(p.Start) > r.timeout+runGrace:
			d.kill = append(d.kill, p.PID)
		case r.kind == "channel":
			// An idle channel is not activity: its calls' runs are.
		case r.kind == "shell" && !leased:
			// A shell nobody holds open is not activity.
		case stopped:
		default:
			d.busy = true
			if r.kind == "run" {
				d.liveRuns = true
			}
		}
	}
	for _, p := range procs {
		if p.PID != self && p.PPID == self && p.State != 'Z' && (subreaper || !d.liveRuns) {
			if r, ok := roots[p.PID]; ok && r.kind == "channel" {
				continue // the stdin server: PID 1's own child (readRoots)
			}
			d.kill = append(d.kill, p.PID)
		}
	}
	return d
}

// tick scans the processes, enforces the rules, and reports whether the
// sandbox should end now (idle past its TTL, or past its max lifetime).
func (s *supervisor) tick(now time.Time) (end bool) {
	procs, err := readProcs(procRoot)
	if err != nil {
		// Without a process listing the sandbox cannot be shown idle:
		// stay up (treat it as busy), and say so once.
		if !s.loggedErr {
			fmt.Fprintf(os.Stderr, "sandbox-helper init: cannot list processes, idle expiry disabled: %v\n", err)
			s.loggedErr = true
		}
		s.lastBusy, s.lastLive = now, now
		return s.lifetimeOver(now)
	}
	// Anything but PID 1 alive (a kernel, a process a kernel's code left
	// running, a shell) may write: the disk watch goes on (watchDisk).
	for _, p := range procs {
		if p.PID != s.self && p.State != 'Z' {
			s.lastLive = now
			break
		}
	}
	// Kernels are PID 1's children, not orphans.
	if kp := s.kernelPIDs(); len(kp) > 0 {
		kept := procs[:0:0]
		for _, p := range procs {
			if !kp[p.PID] {
				kept = append(kept, p)
			}
		}
		procs = kept
	}
	roots := readRoots(procRoot, procs, s.self)
	up := uptime(procRoot)
	d := decide(procs, roots, s.self, s.subreaper, now.Before(s.shellLease), func(start uint64) time.Duration {
		if up <= 0 {
			return 0
		}
		return up - time.Duration(start)*time.Second/clockTicks
	})
	for _, pid := range d.kill {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			s.killed++
		}
	}
	if s.disk.over {
		// Over the disk limit, nothing writes on: shells end (their
		// wrapper kills what they started), as kernels did (applyDisk).
		for pid, r := range roots {
			if r.kind == "shell" {
				_ = syscall.Kill(pid, syscall.SIGTERM)
			}
		}
	}
	// Registrations whose process is gone or no longer a live root.
	for pid, rr := range s.runs {
		if r, ok := roots[pid]; !ok || r.State == 'Z' {
			rr.conn.Close()
			delete(s.runs, pid)
		}
	}
	if d.busy || len(s.runs) > 0 {
		s.lastBusy = now
		s.maybeScanDisk(now)
	}
	if s.lifetimeOver(now) {
		return true
	}
	if s.o.ttl <= 0 || d.busy || len(s.runs) > 0 {
		return false
	}
	since := s.start
	if s.lastBusy.After(since) {
		since = s.lastBusy
	}
	return now.Sub(since) > s.o.ttl
}

// lifetimeOver starts the end at the max lifetime (notifying the runs) and
// reports whether the sandbox ends now.
func (s *supervisor) lifetimeOver(now time.Time) bool {
	if s.o.maxLifetime <= 0 || now.Sub(s.start) < s.o.maxLifetime {
		return false
	}
	if s.ending.IsZero() {
		s.ending = now.Add(lifetimeGrace)
		s.notifyAll(ctlNotice{Stop: reasonLifetime, Message: fmt.Sprintf("the sandbox reached its max lifetime (%s) and was removed; its data stays", s.o.maxLifetime)})
	}
	return len(s.runs) == 0 || now.After(s.ending)
}

func (s *supervisor) notifyAll(n ctlNotice) {
	for _, rr := range s.runs {
		notify(rr, n)
	}
}

func notify(rr *regRun, n ctlNotice) {
	_ = rr.conn.SetWriteDeadline(time.Now().Add(time.Second))
	_ = writeLine(rr.conn, n)
}

// drainHold is how long one stop/rm's drain holds at most: it removes the
// container within seconds, or undoes the drain; one that died meanwhile
// must not leave the sandbox refusing every run.
const drainHold = time.Minute

// draining reports whether runs are refused: a drain holds, or the sandbox
// is ending.
func (s *supervisor) draining(now time.Time) bool {
	if !s.ending.IsZero() {
		return true
	}
	for h, until := range s.drains {
		if now.Before(until) {
			return true
		}
		delete(s.drains, h)
	}
	return false
}

// handle serves one control event (on the main loop: a drain and a
// registration never interleave).
func (s *supervisor) handle(ev ctlEvent, now time.Time) {
	if ev.gone {
		s.kernelReleased(ev.conn)
		if rr, ok := s.runs[ev.pid]; ok && rr.conn == ev.conn {
			rr.conn.Close()
			delete(s.runs, ev.pid)
			s.lastBusy = now
		}
		return
	}
	var rep ctlReply
	switch {
	case ev.req.Op == opKernel && ev.kind == "run":
		s.kernelRequest(ev) // replies now, or once the kernel is free
		return
	case ev.req.Op == opKernelExit && ev.kind == "run":
		s.kernelExit(ev)
		return
	case ev.req.Op == opKernelDone && ev.kind == "run":
		s.kernelDone(ev)
		return
	case ev.req.Op == opRegister && (ev.kind == "run" || ev.kind == "fs"):
		if s.o.diskLimit > 0 && s.disk.at.IsZero() {
			// Not measured yet in this container: measure before the
			// first run starts, not while it runs.
			s.scanDiskNow()
		}
		switch {
		case s.draining(now):
			rep.Refused, rep.Message = reasonDraining, "the sandbox is being stopped or removed"
		case s.o.diskLimit > 0 && s.disk.over:
			// Data may have been removed since: measure again now.
			s.scanDiskNow()
			if s.disk.over {
				rep.Refused, rep.Message = reasonDisk, s.diskMessage()
			}
		}
		if rep.Refused == "" {
			rep.OK = true
			s.runs[ev.pid] = &regRun{conn: ev.conn, token: ev.token}
			s.lastBusy = now
		}
	case ev.req.Op == opDrain && ev.kind == "drain":
		// A run whose wrapper has exited is over, even when its
		// connection's end is not handled yet.
		for pid, rr := range s.runs {
			if _, _, ok := readProc(procRoot, pid); !ok {
				rr.conn.Close()
				delete(s.runs, pid)
			}
		}
		if len(s.runs) > 0 {
			rep.Refused = "busy"
		} else {
			s.drains[ev.req.Token] = now.Add(drainHold)
			s.killKernels("the sandbox was stopped")
			s.killChannels()
			rep.OK = true
		}
	case ev.req.Op == opTouch && (ev.kind == "touch" || ev.kind == "shell"):
		// The client renews three times per TTL, at most once a second:
		// 5 s at least leaves room for a slow exec on a short TTL.
		lease := max(s.o.ttl, shellLeaseMin)
		if s.o.ttl <= 0 {
			lease = time.Hour // no idle expiry: nothing to hold off
		}
		s.shellLease = now.Add(lease)
		s.lastBusy = now
		rep.OK = true
	case ev.req.Op == opUndrain && ev.kind == "drain":
		delete(s.drains, ev.req.Token)
		rep.OK = true
	case ev.req.Op == opSignal && ev.kind == "signal":
		// Ctrl-C on the client: the run carrying the token stops its
		// program. A signal from sandboxed code never reaches a wrapper
		// this way, and wrappers ignore the signals code can send them.
		for _, rr := range s.runs {
			if ev.req.Token != "" && rr.token == ev.req.Token {
				notify(rr, ctlNotice{Stop: reasonInterrupted})
				rep.OK = true
			}
		}
		if !rep.OK {
			rep.Refused = "no run carries that token"
		}
	case ev.req.Op == opStatus && ev.kind == "status":
		rep.OK, rep.Status = true, s.status(now)
	default:
		rep.Refused, rep.Message = reasonNotServed, fmt.Sprintf("%q is not served to %q", ev.req.Op, ev.kind)
	}
	ev.reply <- rep
}

func (s *supervisor) status(now time.Time) *initStatus {
	st := &initStatus{Target: s.o.target, Runs: len(s.runs), Draining: s.draining(now), DiskLimit: s.o.diskLimit,
		DiskUsed: s.disk.used, OverLimit: s.disk.over, Killed: s.killed, Kernels: s.kernelInfos()}
	if len(s.runs) == 0 {
		since := s.start
		if s.lastBusy.After(since) {
			since = s.lastBusy
		}
		since = since.UTC()
		st.IdleSince = &since
	}
	if !s.disk.at.IsZero() {
		at := s.disk.at.UTC()
		st.DiskScanned = &at
	}
	if s.o.maxLifetime > 0 {
		e := s.start.Add(s.o.maxLifetime).UTC()
		st.Expires = &e
	}
	return st
}

// ctlEvent is a request from a verified exec root, or the end of a
// registered connection (gone).
type ctlEvent struct {
	pid   int
	kind  string
	token string // a run's --token, from its command line
	conn  *net.UnixConn
	req   ctlRequest
	reply chan ctlReply
	gone  bool
}

// acceptControl serves the control socket: every connection is checked
// against its peer's credentials before anything is read from it.
func acceptControl(ln *net.UnixListener, events chan<- ctlEvent) {
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like
			continue
		}
		go serveControl(c, events)
	}
}

func serveControl(c *net.UnixConn, events chan<- ctlEvent) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, pid, err := readRequest(c, maxRequest)
	if err != nil {
		if debugControl {
			fmt.Fprintf(os.Stderr, "control: %v\n", err)
		}
		c.Close()
		return
	}
	pid = threadGroup(procRoot, pid)
	kind, argv, ok := rootKind(procRoot, pid)
	if !ok || kind == "" {
		if debugControl {
			fmt.Fprintf(os.Stderr, "control: pid %d is not an exec root (%q %v)\n", pid, kind, ok)
		}
		c.Close() // sandboxed code, or a program that is not the helper
		return
	}
	token, _ := flagValue(argv, "token")
	var req ctlRequest
	if json.Unmarshal(line, &req) != nil {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	reply := make(chan ctlReply, 1)
	events <- ctlEvent{pid: pid, kind: kind, token: token, conn: c, req: req, reply: reply}
	rep := <-reply
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	werr := writeReply(c, rep)
	_ = c.SetWriteDeadline(time.Time{})
	if req.Op == opKernel {
		if rep.OK && werr == nil {
			serveLease(c, pid, kind, events)
		}
		if rep.OK {
			events <- ctlEvent{pid: pid, conn: c, gone: true}
		}
		c.Close()
		return
	}
	if req.Op != opRegister || !rep.OK || werr != nil {
		if req.Op == opRegister && rep.OK {
			events <- ctlEvent{pid: pid, conn: c, gone: true}
		}
		c.Close()
		return
	}
	// A registered run: its connection's end is the run's end.
	buf := make([]byte, 512)
	for {
		if _, err := c.Read(buf); err != nil {
			break
		}
	}
	events <- ctlEvent{pid: pid, conn: c, gone: true}
}

// maxRequest bounds a request line (opKernel carries the run's environment).
const maxRequest = 256 << 10

// writeReply writes rep, with its files (SCM_RIGHTS), and closes them.
func writeReply(c *net.UnixConn, rep ctlReply) error {
	if len(rep.files) == 0 {
		return writeLine(c, rep)
	}
	defer func() {
		for _, f := range rep.files {
			f.Close()
		}
	}()
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	fds := make([]int, len(rep.files))
	for i, f := range rep.files {
		fds[i] = int(f.Fd())
	}
	_, _, err = c.WriteMsgUnix(append(b, '\n'), syscall.UnixRights(fds...), nil)
	return err
}

// serveLease serves a kernel lease's connection until it closes: each line
// is an opKernelExit question or the opKernelDone notice.
func serveLease(c *net.UnixConn, pid int, kind string, events chan<- ctlEvent) {
	r := bufio.NewReader(io.LimitReader(c, 1<<20))
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var req ctlRequest
		if json.Unmarshal(line, &req) != nil || (req.Op != opKernelExit && req.Op != opKernelDone) {
			return
		}
		reply := make(chan ctlReply, 1)
		events <- ctlEvent{pid: pid, kind: kind, conn: c, req: req, reply: reply}
		rep := <-reply
		if req.Op == opKernelDone {
			continue // no answer
		}
		if writeLine(c, rep) != nil {
			return
		}
	}
}

var debugControl = os.Getenv("SANDBOX_HELPER_DEBUG_CONTROL") != ""

// readRequest reads a request line and the pid of the process that wrote
// it, from the credentials the kernel attaches to every message when the
// socket has SO_PASSCRED (the writer's own: a process cannot claim another
// pid without CAP_SYS_ADMIN). Every part of the line must come from the same
// pid. Clients set SO_PASSCRED on their side, so that the kernel attaches
// their credentials whenever init gets to read; a message that arrived with
// none is refused. (SO_PEERCRED would do on Linux, but gVisor answers it
// with the caller's own credentials.)
func readRequest(c *net.UnixConn, max int) (line []byte, pid int, err error) {
	if err := setPassCred(c); err != nil {
		return nil, 0, err
	}
	buf := make([]byte, 512)
	oob := make([]byte, syscall.CmsgSpace(syscall.SizeofUcred))
	for len(line) < max {
		n, oobn, _, _, err := c.ReadMsgUnix(buf[:min(len(buf), max-len(line))], oob)
		if err != nil {
			return nil, 0, err
		}
		if n == 0 {
			return nil, 0, errors.New("empty read")
		}
		p, ok := credPID(oob[:oobn])
		if !ok || (pid != 0 && p != pid) {
			return nil, 0, errors.New("a request without its writer's credentials, or from two processes")
		}
		pid = p
		line = append(line, buf[:n]...)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			if i != len(line)-1 {
				return nil, 0, errors.New("data after the request line")
			}
			return line[:i], pid, nil
		}
	}
	return nil, 0, errors.New("line too long")
}

// credPID returns the pid of the SCM_CREDENTIALS message in oob.
func credPID(oob []byte) (int, bool) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if cred, err := syscall.ParseUnixCredentials(&m); err == nil && cred.Pid > 0 {
			return int(cred.Pid), true
		}
	}
	return 0, false
}

// readRoots reads the command lines of the exec roots in procs.
func readRoots(root string, procs []procStat, self int) map[int]rootInfo {
	roots := map[int]rootInfo{}
	read := func(p procStat) rootInfo {
		r := rootInfo{procStat: p}
		if b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(p.PID), "cmdline")); err == nil {
			argv := splitCmdline(b)
			r.kind = helperSubcommand(argv)
			if r.kind == "run" {
				if v, ok := flagValue(argv, "timeout"); ok {
					r.timeout, _ = time.ParseDuration(v)
				}
			}
		}
		return r
	}
	channels := map[int]bool{}
	for _, p := range procs {
		if p.PID == self || p.State == 'Z' {
			continue
		}
		if p.PPID != rootPPID && !isStdinServer(p.PID, p.PPID) {
			continue
		}
		r := read(p)
		if p.PPID != rootPPID && r.kind != "channel" {
			continue // not the server PID 1 started (stdin_server.go)
		}
		roots[p.PID] = r
		if r.kind == "channel" {
			channels[p.PID] = true
		}
	}
	// A channel's `run` children are runs like the exec roots' (rootKind).
	for _, p := range procs {
		if channels[p.PPID] && p.State != 'Z' {
			if r := read(p); r.kind == "run" {
				roots[p.PID] = r
			}
		}
	}
	return roots
}

// uptime is the time since boot from ROOT/uptime (0 if unknown).
func uptime(root string) time.Duration {
	b, err := os.ReadFile(filepath.Join(root, "uptime"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	secs, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	return time.Duration(secs * float64(time.Second))
}

// reapZombies collects every child that has exited, without blocking.
func reapZombies() { reapZombiesTo(nil) }

// reapZombiesTo is reapZombies telling reaped (if not nil) each child's
// pid and wait status.
func reapZombiesTo(reaped func(pid int, ws syscall.WaitStatus)) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return // ECHILD: no children; 0: none exited
		}
		if reaped != nil {
			reaped(pid, ws)
		}
	}
}

// runPIDs lists the registered runs.
func (s *supervisor) runPIDs() map[int]bool { // for shutdown
	m := make(map[int]bool, len(s.runs))
	for pid := range s.runs {
		m[pid] = true
	}
	return m
}

// shutdown SIGKILLs every other visible process, reaps, and returns once
// none is left or after initShutdownGrace. Only PID 1 of a namespace sees
// nothing but its sandbox: an init running as another pid on the real /proc
// (tests) kills only its own children and the runs registered with it.
func shutdown(self int, runs map[int]bool) {
	deadline := time.Now().Add(initShutdownGrace)
	for {
		procs, _ := readProcs(procRoot)
		alive := false
		for _, p := range procs {
			if p.PID == self || p.PID <= 1 {
				continue
			}
			if self != 1 && procRoot == "/proc" && p.PPID != self && !runs[p.PID] {
				continue
			}
			if p.State != 'Z' {
				alive = true
			}
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		reapZombies()
		if !alive || time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// killChannels SIGKILLs every channel exec root (a drain: the sandbox is
// about to be removed, and no call runs through them).
func (s *supervisor) killChannels() {
	procs, err := readProcs(procRoot)
	if err != nil {
		return
	}
	for pid, r := range readRoots(procRoot, procs, s.self) {
		if r.kind == "channel" { // exec roots, and the stdin server
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
