package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
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

func runInit(args []string) int {
	fs := flag.NewFlagSet("sandbox-helper init", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	ttl := fs.Duration("idle-ttl", 0, "exit after this long with nothing running (0: never)")
	fs.String("spec", "", "sandbox spec hash, read back by `run` from /proc/1/cmdline")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	reserveThreads(6)
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "sandbox-helper init: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *ttl < 0 {
		fmt.Fprintf(os.Stderr, "sandbox-helper init: --idle-ttl must not be negative, got %v\n", *ttl)
		return 2
	}
	self := os.Getpid()
	if self != 1 && !initAllowNonPID1 {
		fmt.Fprintf(os.Stderr, "sandbox-helper init: must run as PID 1 (the container's entrypoint), running as PID %d\n", self)
		return 2
	}
	_ = setNonDumpable()

	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT)
	if initReadyHook != nil {
		initReadyHook()
	}
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()

	st := idleState{start: time.Now(), ttl: *ttl}
	var logged bool
	reapZombies()
	for {
		select {
		case s := <-sigs:
			if s == syscall.SIGCHLD {
				reapZombies()
				continue
			}
			shutdown(self)
			return 0
		case now := <-ticker.C:
			reapZombies()
			procs, err := readProcs(procRoot)
			if err != nil {
				// Without a process listing the sandbox cannot be shown idle:
				// stay up (treat it as busy), and say so once.
				if !logged {
					fmt.Fprintf(os.Stderr, "sandbox-helper init: cannot list processes, idle expiry disabled: %v\n", err)
					logged = true
				}
				st.lastBusy = now
				continue
			}
			if st.observe(procs, self, now) {
				return 0
			}
		}
	}
}

// idleState tracks when the sandbox was last seen busy.
type idleState struct {
	start    time.Time     // when init started
	lastBusy time.Time     // last scan that found another live process
	ttl      time.Duration // 0: never expire
}

// busy reports whether procs holds a live process other than self. Zombies do
// not count.
func busy(procs []procStat, self int) bool {
	for _, p := range procs {
		if p.PID != self && p.State != 'Z' {
			return true
		}
	}
	return false
}

// observe records one process scan taken at now and reports whether the
// sandbox has been idle for longer than the TTL since the later of init's
// start and the last busy scan.
func (s *idleState) observe(procs []procStat, self int, now time.Time) (expired bool) {
	if busy(procs, self) {
		s.lastBusy = now
		return false
	}
	if s.ttl <= 0 {
		return false
	}
	since := s.start
	if s.lastBusy.After(since) {
		since = s.lastBusy
	}
	return now.Sub(since) > s.ttl
}

// reapZombies collects every child that has exited, without blocking.
func reapZombies() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return // ECHILD: no children; 0: none exited
		}
	}
}

// shutdown SIGKILLs every other visible process, reaps, and returns once
// none is left or after initShutdownGrace.
func shutdown(self int) {
	deadline := time.Now().Add(initShutdownGrace)
	for {
		procs, _ := readProcs(procRoot)
		alive := false
		for _, p := range procs {
			if p.PID == self || p.PID <= 1 {
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
