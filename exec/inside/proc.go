package inside

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// procRoot is where the proc filesystem is mounted. Tests point it at a fake
// listing.
var procRoot = "/proc"

// prctl options (linux/prctl.h).
const (
	prSetDumpable       = 4
	prSetChildSubreaper = 36
)

// procStat is the part of /proc/PID/stat the helper uses.
type procStat struct {
	PID   int
	State byte // R, S, D, Z, T, ...
	PPID  int
	PGRP  int
	Start uint64 // start time, in clock ticks after boot (0 if unknown)
}

// parseStat parses the content of /proc/PID/stat. The command name (field 2)
// is in parentheses and may itself contain spaces and parentheses, so the
// fields after it are found from the last ')'.
func parseStat(b []byte) (procStat, error) {
	var ps procStat
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return ps, errors.New("malformed stat: no command name")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return ps, fmt.Errorf("malformed stat: pid: %v", err)
	}
	rest := bytes.Fields(b[end+1:])
	if len(rest) < 3 || len(rest[0]) != 1 {
		return ps, errors.New("malformed stat: short")
	}
	ppid, err := strconv.Atoi(string(rest[1]))
	if err != nil {
		return ps, fmt.Errorf("malformed stat: ppid: %v", err)
	}
	pgrp, err := strconv.Atoi(string(rest[2]))
	if err != nil {
		return ps, fmt.Errorf("malformed stat: pgrp: %v", err)
	}
	ps.PID, ps.State, ps.PPID, ps.PGRP = pid, rest[0][0], ppid, pgrp
	// rest[0] is field 3 (state); starttime is field 22.
	if len(rest) >= 20 {
		ps.Start, _ = strconv.ParseUint(string(rest[19]), 10, 64)
	}
	return ps, nil
}

// readProcs lists the processes under root (a proc filesystem). Entries that
// vanish while it reads, or that it cannot parse, are skipped; only a failure
// to list root is an error.
func readProcs(root string) ([]procStat, error) {
	d, err := os.Open(root)
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	procs := make([]procStat, 0, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, name, "stat"))
		if err != nil {
			continue // gone, or not ours to read
		}
		ps, err := parseStat(b)
		if err != nil {
			continue
		}
		ps.PID = pid
		procs = append(procs, ps)
	}
	return procs, nil
}

// descendants returns every process in procs whose chain of parents leads to
// root (root itself excluded).
func descendants(procs []procStat, root int) []procStat {
	children := make(map[int][]int, len(procs))
	byPID := make(map[int]procStat, len(procs))
	for _, p := range procs {
		byPID[p.PID] = p
		if p.PID != p.PPID {
			children[p.PPID] = append(children[p.PPID], p.PID)
		}
	}
	var out []procStat
	seen := map[int]bool{root: true}
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if seen[c] {
				continue
			}
			seen[c] = true
			out = append(out, byPID[c])
			queue = append(queue, c)
		}
	}
	return out
}

// splitCmdline splits a /proc/PID/cmdline into its arguments, as the
// program was started (deEmulated).
func splitCmdline(b []byte) []string {
	b = bytes.TrimSuffix(b, []byte{0}) // one NUL ends the last argument
	if len(b) == 0 {
		return nil
	}
	return deEmulated(strings.Split(string(b), "\x00"))
}

// deEmulated is argv without the emulator's part. An image of another
// architecture runs under qemu-user through binfmt_misc: the kernel starts
// the interpreter with the program's path, so /proc/PID/cmdline reads
// INTERP PATH ARGV0 ARGS... with binfmt's P flag (Debian's interpreter
// /usr/libexec/qemu-binfmt/ARCH-binfmt-P), INTERP PATH ARGS... without it
// (qemu-ARCH-static registered directly). The program's own argv is what
// identifies the helper and its flags (PID 1's --target and --spec).
func deEmulated(argv []string) []string {
	if len(argv) < 2 || !strings.HasPrefix(argv[1], "/") {
		return argv
	}
	switch base := filepath.Base(argv[0]); {
	case strings.HasSuffix(base, "-binfmt-P") && len(argv) >= 3:
		return argv[2:]
	case strings.HasPrefix(base, "qemu-") && !strings.HasSuffix(base, "-binfmt-P"):
		return argv[1:]
	}
	return argv
}

// helperSubcommand is the helper subcommand argv runs ("run", "fs", ...), or
// "" when argv is not the helper's.
func helperSubcommand(argv []string) string {
	if len(argv) < 2 || !helperNames[filepath.Base(argv[0])] {
		return ""
	}
	return argv[1]
}

// helperNames are the helper's file names (tests add their own binary's).
var helperNames = map[string]bool{"sandbox-helper": true}

// flagValue returns the value of --name (or -name, --name=V, -name=V) in
// argv before any "--"; the last one wins, as with the flag package.
func flagValue(argv []string, name string) (string, bool) {
	var v string
	var found bool
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--":
			return v, found
		case a == "--"+name || a == "-"+name:
			if i+1 < len(argv) {
				v, found = argv[i+1], true
				i++
			}
		case strings.HasPrefix(a, "--"+name+"="):
			v, found = strings.TrimPrefix(a, "--"+name+"="), true
		case strings.HasPrefix(a, "-"+name+"="):
			v, found = strings.TrimPrefix(a, "-"+name+"="), true
		}
	}
	return v, found
}

// prctl calls prctl(2) with two arguments.
func prctl(option, arg uintptr) error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, option, arg, 0); e != 0 {
		return e
	}
	return nil
}

// SetNonDumpable marks the process non-dumpable, so that other processes of
// the same uid (the sandboxed program) can neither ptrace it nor open its
// /proc/PID/fd or /proc/PID/mem. The flag is reset by execve, so children are
// unaffected.
func SetNonDumpable() error { return prctl(prSetDumpable, 0) }

// setChildSubreaper makes orphaned descendants re-parent to this process
// instead of PID 1.
func setChildSubreaper() error { return prctl(prSetChildSubreaper, 1) }
