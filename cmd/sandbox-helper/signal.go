package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// runSignal implements `sandbox-helper signal --token TOKEN`: it sends
// SIGTERM to the `run` wrapper started with that token, which then kills its
// program's whole process group and reports. The plugin uses it when the
// user interrupts an exec: closing the exec's stream does not end it.
// It exits 0 when it signalled a wrapper, 1 when none carries the token.
func runSignal(args []string) int {
	fs := flag.NewFlagSet("sandbox-helper signal", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	token := fs.String("token", "", "token of the run to stop")
	if err := fs.Parse(args); err != nil || *token == "" {
		fmt.Fprintln(os.Stderr, "sandbox-helper signal: --token TOKEN is required")
		return 2
	}
	pids := runsWithToken(procRoot, *token)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	if len(pids) == 0 {
		return 1
	}
	return 0
}

// runsWithToken lists the `run` wrappers whose argv carries --token TOKEN.
func runsWithToken(root, token string) []int {
	d, err := os.Open(root)
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var out []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, n, "cmdline"))
		if err != nil {
			continue
		}
		if isRunWithToken(bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}), token) {
			out = append(out, pid)
		}
	}
	return out
}

func isRunWithToken(argv [][]byte, token string) bool {
	if len(argv) < 2 || filepath.Base(string(argv[0])) != "sandbox-helper" || string(argv[1]) != "run" {
		return false
	}
	for i, a := range argv {
		if a := string(a); a == "--" {
			return false
		} else if (a == "--token" || a == "-token") && i+1 < len(argv) && string(argv[i+1]) == token {
			return true
		} else if a == "--token="+token || a == "-token="+token {
			return true
		}
	}
	return false
}
