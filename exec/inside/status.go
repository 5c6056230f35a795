package inside

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// Status implements `sandbox-helper status`, which tells the plugin what
// runs in the sandbox, as one JSON object on stdout (statusReport):
//
//	sandbox-helper status
//
// lists the processes other than PID 1 and itself (the `run` and `fs`
// wrappers by kind), PID 1's start, and, when nothing runs, the earliest time
// the sandbox can have become idle (idle_since: the later of PID 1's start
// and the last change of /tmp, where every code run creates and removes its
// private directory). `docker sandbox inspect` runs it.
//
//	sandbox-helper status --newest DIR...
//
// walks each DIR without following links and reports the newest
// modification time found and the bytes in regular files (newestReport), at
// most statusMaxEntries entries per DIR. The plugin runs it in a short-lived
// container that mounts volumes read-only: `prune --older-than`, to learn
// when the data of sandboxes whose container is gone was last written, and
// `ls --size`.
func Status(args []string) int {
	a, err := wire.ParseStatusArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "usage: sandbox-helper status [--newest DIR...]")
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-helper status: %v\n", err)
		return 2
	}
	if a.Newest {
		return writeJSON(os.Stdout, newestUnder(a.Dirs, statusMaxEntries, time.Now()))
	}
	rep, err := readStatus(procRoot, statusTmpDir, os.Getpid())
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-helper status: %v\n", err)
		return 1
	}
	if r, err := controlCall(ctlRequest{Op: opStatus}); err == nil && r.OK {
		rep.Init = r.Status
	}
	return writeJSON(os.Stdout, rep)
}

// statusTmpDir is the directory whose modification time tells the last code
// run (tests point it elsewhere).
var statusTmpDir = "/tmp"

// statusMaxEntries bounds the walk of one directory by --newest.
const statusMaxEntries = 200000

// clockTicks is USER_HZ, the unit of /proc/PID/stat's starttime: 100 on every
// Linux architecture the plugin supports.
const clockTicks = 100

// statusReport is the JSON of `sandbox-helper status`.
type statusReport struct {
	PID1Started *time.Time      `json:"pid1_started"`
	Busy        bool            `json:"busy"`
	Processes   []statusProcess `json:"processes"`
	IdleSince   *time.Time      `json:"idle_since"`
	// Init is PID 1's own account (live runs, drains, disk usage and
	// limit, max lifetime); null when it does not answer.
	Init *initStatus `json:"init"`
}

// statusProcess is one process other than PID 1 and the status call itself.
type statusProcess struct {
	PID     int        `json:"pid"`
	Kind    string     `json:"kind"` // run, fs, channel (an exec channel's server) or other
	Started *time.Time `json:"started"`
}

// readStatus builds the report from a proc filesystem at root.
func readStatus(root, tmpDir string, self int) (statusReport, error) {
	rep := statusReport{Processes: []statusProcess{}}
	boot, err := bootTime(root)
	if err != nil {
		return rep, err
	}
	d, err := os.Open(root)
	if err != nil {
		return rep, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return rep, err
	}
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, n, "stat"))
		if err != nil {
			continue // gone
		}
		state, start, err := statStart(b)
		if err != nil || state == 'Z' {
			continue
		}
		var started *time.Time
		if !boot.IsZero() {
			t := boot.Add(time.Duration(start) * time.Second / clockTicks).UTC()
			started = &t
		}
		if pid == 1 {
			rep.PID1Started = started
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join(root, n, "cmdline"))
		kind := processKind(cmd)
		if ps, err := parseStat(b); err == nil && ps.PPID == rootPPID && helperSubcommand(splitCmdline(cmd)) == "channel" {
			kind = "channel" // an exec root only: sandboxed code cannot be one
		}
		rep.Processes = append(rep.Processes, statusProcess{PID: pid, Kind: kind, Started: started})
	}
	sort.Slice(rep.Processes, func(i, j int) bool { return rep.Processes[i].PID < rep.Processes[j].PID })
	for _, p := range rep.Processes {
		if p.Kind != "channel" { // an idle exec channel is not activity
			rep.Busy = true
		}
	}
	if !rep.Busy {
		var since time.Time
		if rep.PID1Started != nil {
			since = *rep.PID1Started
		}
		if fi, err := os.Stat(tmpDir); err == nil && fi.ModTime().After(since) {
			since = fi.ModTime()
		}
		if !since.IsZero() {
			since = since.UTC()
			rep.IdleSince = &since
		}
	}
	return rep, nil
}

// processKind names what a command line is: one of the helper's wrappers,
// or anything else (a shell, a program left by `docker exec`).
func processKind(cmdline []byte) string {
	switch k := helperSubcommand(splitCmdline(cmdline)); k {
	case "run", "fs":
		return k
	}
	return "other"
}

// statStart returns the state and the start time (in clock ticks after boot)
// from the content of /proc/PID/stat.
func statStart(b []byte) (byte, uint64, error) {
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return 0, 0, errors.New("malformed stat")
	}
	f := bytes.Fields(b[end+1:])
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, errors.New("malformed stat: short")
	}
	st, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("malformed stat: starttime: %v", err)
	}
	return f[0][0], st, nil
}

// bootTime reads btime from ROOT/stat; zero when the file has none.
func bootTime(root string) (time.Time, error) {
	b, err := os.ReadFile(filepath.Join(root, "stat"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return time.Time{}, nil
		}
		return time.Time{}, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("malformed btime in %s/stat", root)
			}
			return time.Unix(s, 0), nil
		}
	}
	return time.Time{}, nil
}

// newestReport is the JSON of `sandbox-helper status --newest`.
type newestReport struct {
	Paths []newestPath `json:"paths"`
}

// newestPath is what the walk of one directory found.
type newestPath struct {
	Path string `json:"path"`
	// Newest is the newest modification time (of the directory itself or
	// anything under it) that is not after the time of the walk. A time in
	// the future is no evidence of use (sandboxed code can plant one with
	// `touch -d`, to make its data look fresh forever): it is left out and
	// counted in Future. Null when the path cannot be read, or when every
	// time seen is in the future.
	Newest *time.Time `json:"newest"`
	// Future counts the entries whose time was in the future.
	Future  int `json:"future"`
	Entries int `json:"entries"`
	// Bytes is the total size of the regular files seen.
	Bytes    int64  `json:"bytes"`
	Complete bool   `json:"complete"` // every entry was seen
	Error    string `json:"error,omitempty"`
}

var errTooMany = errors.New("too many entries")

// newestUnder walks every dir (lstat only: links are not followed).
func newestUnder(dirs []string, max int, now time.Time) newestReport {
	rep := newestReport{Paths: []newestPath{}}
	for _, dir := range dirs {
		p := newestPath{Path: dir, Complete: true}
		var newest time.Time
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if path == dir {
					return err
				}
				p.Complete = false // an unreadable directory: its entries are unseen
				return nil
			}
			if p.Entries >= max {
				return errTooMany
			}
			p.Entries++
			fi, err := d.Info()
			if err != nil {
				return nil // vanished
			}
			switch mt := fi.ModTime(); {
			case mt.After(now):
				p.Future++
			case mt.After(newest):
				newest = mt
			}
			if fi.Mode().IsRegular() {
				p.Bytes += fi.Size()
			}
			return nil
		})
		switch {
		case errors.Is(err, errTooMany):
			p.Complete = false
		case err != nil:
			p.Complete = false
			p.Error = err.Error()
		}
		if !newest.IsZero() {
			n := newest.UTC()
			p.Newest = &n
		}
		rep.Paths = append(rep.Paths, p)
	}
	return rep
}

func writeJSON(w io.Writer, v any) int {
	enc := json.NewEncoder(w)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-helper status: %v\n", err)
		return 1
	}
	return 0
}
