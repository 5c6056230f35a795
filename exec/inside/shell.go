package inside

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// The shell: `docker sandbox shell` runs its program (bash, sh, or the
// user's COMMAND) under `sandbox-helper shell`, never as an engine exec of
// its own. What runs in the sandbox comes from the image and from earlier
// sandboxed code (~/.bashrc, /etc/bash.bashrc, the shell binary itself): as
// an exec root it could run `sandbox-helper run` with a timeout of its
// choosing, or live on after the user closed the shell. As the wrapper's
// child it is sandboxed code like any other: PID 1 serves none of its
// requests, and it cannot outlive the wrapper.
//
// The wrapper is an exec root of kind "shell". PID 1 counts it as activity
// only while the shell's client leases it: the wrapper's own start, then
// `sandbox-helper touch` calls that the plugin makes while the user's
// terminal is attached (opTouch); each lease lasts the idle TTL (5 s at
// least), and the client renews it three times per TTL. A shell
// whose client is gone (closed terminal, killed client, a program that
// never exits) does not keep the sandbox past its idle TTL.
//
// When its program ends, the wrapper kills every process the shell
// started (its process groups and every descendant: it is a subreaper, so
// daemons stay its descendants), and exits with the program's status
// (128+N for signal N). On SIGHUP or SIGTERM (the terminal hung up, or the
// container is stopping) it does the same at once.

// Shell is `sandbox-helper shell [--] COMMAND [ARGS...]`.
func Shell(args []string) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: sandbox-helper shell [--] COMMAND [ARGS...]")
		return 2
	}
	_ = setChildSubreaper()
	// The program can signal the wrapper (same user), and the terminal
	// sends its job-control signals to the foreground group, which is the
	// wrapper's until the shell makes its own: caught and ignored (a
	// handler, unlike SIG_IGN, is reset by execve: the program gets the
	// default dispositions).
	signal.Notify(make(chan os.Signal, 8), syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGTTIN,
		syscall.SIGTTOU, syscall.SIGPIPE, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGWINCH)
	end := make(chan os.Signal, 1)
	signal.Notify(end, syscall.SIGHUP, syscall.SIGTERM)

	// The lease starts with the shell (PID 1 may be gone: no lease then).
	_, _ = controlCall(ctlRequest{Op: opTouch})

	path, err := exec.LookPath(args[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-helper shell: %v\n", err)
		return 127
	}
	proc, err := os.StartProcess(path, args, &os.ProcAttr{
		Env:   os.Environ(),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-helper shell: %v\n", err)
		return 126
	}
	pid := proc.Pid
	_ = proc.Release()

	mainDone := make(chan childExit, 1)
	allReaped := make(chan struct{})
	go reapChildren(pid, mainDone, allReaped)

	var ex childExit
	got := false
	select {
	case ex = <-mainDone:
		got = true
	case <-end:
	}
	// Nothing the shell started outlives it.
	k := killer{self: os.Getpid(), ownPgid: syscall.Getpgrp(), pgid: pid}
	k.sweep(allReaped, time.Now().Add(killDeadline))
	if ex, got = takeExit(mainDone, ex, got, killPoll); !got {
		return 137
	}
	switch {
	case ex.ws.Exited():
		return ex.ws.ExitStatus()
	case ex.ws.Signaled():
		return 128 + int(ex.ws.Signal())
	}
	return 1
}

// Touch is `sandbox-helper touch`: it renews the lease of the sandbox's
// shells (see Shell). Exit 1 when PID 1 does not answer.
func Touch(args []string) int {
	if len(args) > 0 {
		fmt.Fprintln(os.Stderr, "usage: sandbox-helper touch")
		return 2
	}
	rep, err := controlCall(ctlRequest{Op: opTouch})
	if err != nil || !rep.OK {
		fmt.Fprintf(os.Stderr, "sandbox-helper touch: %v %s\n", err, rep.Refused)
		return 1
	}
	return 0
}
