package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Draining: how `docker sandbox stop` and `rm` make sure that no program
// starts in a container they are about to remove, without pausing it (an
// exec that starts while the engine freezes the container can deadlock the
// engine's shim: the exec waits on the frozen cgroup, unpause waits on the
// exec). Every `run` holds a shared flock on the run lock for its lifetime
// and, once it holds it, refuses to start when the drain flag is fresh;
// `drain` takes the lock exclusively without waiting (busy when a run holds
// it) and, holding it, writes the flag. So either the drain sees the run, or
// the run sees the flag. Both files are on the sandbox's /tmp tmpfs: code in
// the sandbox can tamper with them, which only harms its own sandbox.
var (
	runLockPath   = "/tmp/.sandbox-helper.lock"
	drainFlagPath = "/tmp/.sandbox-helper.draining"
)

const (
	// A flag older than this is left over by a stop/rm that died before
	// removing the container: runs ignore it.
	drainFresh = 2 * time.Minute
	// exitDrainBusy is drain's exit code when a run holds the lock.
	exitDrainBusy = 3
)

// heldRunLock keeps the run lock's file open (so locked) for the process's
// life. The descriptor is close-on-exec: the program does not inherit it.
var heldRunLock *os.File

// enterRun takes the shared run lock and reports whether the sandbox is
// draining. Without a usable lock (no /tmp, or code in the sandbox holding
// it exclusively for more than a moment) the run goes ahead unguarded.
func enterRun(lockPath, flagPath string) (draining bool) {
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil || !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond) // a drain holds it for microseconds
	}
	if err != nil {
		f.Close()
		return false
	}
	heldRunLock = f
	return drainFlagFresh(flagPath)
}

func drainFlagFresh(flagPath string) bool {
	fi, err := os.Stat(flagPath)
	return err == nil && time.Since(fi.ModTime()) < drainFresh
}

// runDrain is `sandbox-helper drain [--undo]`: exit 0 when the sandbox is
// drained (no run holds the lock, and none will start), exitDrainBusy when
// a run holds it; --undo removes the flag (a stop/rm that did not remove the
// container after all).
func runDrain(args []string, stdout, stderr io.Writer) int {
	return drain(args, runLockPath, drainFlagPath, stdout, stderr)
}

func drain(args []string, lockPath, flagPath string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 1 && args[0] == "--undo":
		if err := os.Remove(flagPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(stderr, "sandbox-helper drain: %v\n", err)
			return 1
		}
		return 0
	case len(args) != 0:
		fmt.Fprintln(stderr, "usage: sandbox-helper drain [--undo]")
		return 2
	}
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-helper drain: %v\n", err)
		return 1
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			fmt.Fprintln(stdout, "busy")
			return exitDrainBusy
		}
		fmt.Fprintf(stderr, "sandbox-helper drain: flock: %v\n", err)
		return 1
	}
	if err := os.WriteFile(flagPath, []byte(strconv.FormatInt(time.Now().Unix(), 10)+"\n"), 0o600); err != nil {
		fmt.Fprintf(stderr, "sandbox-helper drain: %v\n", err)
		return 1
	}
	// Rewritten, an old flag's time is now too.
	now := time.Now()
	_ = os.Chtimes(flagPath, now, now)
	fmt.Fprintln(stdout, "drained")
	return 0
}
