package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// The disk limit (init --disk BYTES): PID 1 measures what /opt/workspace and
// /opt/user hold together (allocated blocks, each inode once) while anything
// runs, at most every scanEvery and no more often than four times the last
// scan's duration. Past the limit it tells every registered run to stop
// (disk_limit) and refuses new runs until a measurement is back under it
// (after `files rm` or `docker sandbox rm`). Each run also gets the space
// left at its start as RLIMIT_FSIZE, so that one file cannot overshoot.
var diskRoots = []string{"/opt/workspace", "/opt/user"}

// diskState is PID 1's view of the usage.
type diskState struct {
	used     int64 // bytes; -1 before the first measurement
	at       time.Time
	over     bool
	scanning bool
	next     time.Time
	problem  string // why the last measurement was incomplete
	// free is the free space of the volumes' filesystem when the last
	// measurement started (-1: unknown): a drop by more than half of what
	// is left under the limit starts a measurement at once.
	free int64
}

// diskScan is one measurement.
type diskScan struct {
	used     int64
	complete bool
	problem  string
	dur      time.Duration
	at       time.Time
}

// diskWatchEvery is how often, while something runs, PID 1 looks at the
// free space of the volumes' filesystem (one statfs).
const diskWatchEvery = 50 * time.Millisecond

func (s *supervisor) maybeScanDisk(now time.Time) {
	if s.o.diskLimit <= 0 || s.disk.scanning || now.Before(s.disk.next) {
		return
	}
	s.startDiskScan()
}

func (s *supervisor) startDiskScan() {
	s.disk.scanning = true
	s.disk.free = statfsFree(diskRoots[0])
	go func() { s.diskDone <- measureDisk(diskRoots) }()
}

// watchDisk starts a measurement at once when the filesystem's free space
// fell by more than half of what the sandbox may still write since the last
// one started (the filesystem is shared with others: this only decides
// when to measure, never the usage itself).
func (s *supervisor) watchDisk(now time.Time) {
	if s.o.diskLimit <= 0 || s.disk.scanning || (len(s.runs) == 0 && now.Sub(s.lastBusy) > time.Second) {
		return
	}
	free := statfsFree(diskRoots[0])
	if free < 0 || s.disk.free < 0 {
		return
	}
	left := s.o.diskLimit - max(s.disk.used, 0)
	if s.disk.free-free > left/2 {
		s.startDiskScan()
	}
}

// statfsFree is the space available on the filesystem holding path (-1 if
// unknown).
func statfsFree(path string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// scanDiskNow measures synchronously (a registration while over the limit).
func (s *supervisor) scanDiskNow() {
	s.applyDisk(measureDisk(diskRoots))
}

func (s *supervisor) diskResult(r diskScan, now time.Time) {
	s.disk.scanning = false
	s.disk.next = now.Add(max(scanEvery, 4*r.dur))
	s.applyDisk(r)
}

func (s *supervisor) applyDisk(r diskScan) {
	s.disk.used, s.disk.at, s.disk.problem = r.used, r.at, r.problem
	over := !r.complete || r.used > s.o.diskLimit
	if over && !s.disk.over {
		s.notifyAll(ctlNotice{Stop: reasonDisk, Message: s.diskMessageFor(r)})
	}
	s.disk.over = over
}

func (s *supervisor) diskMessage() string {
	return s.diskMessageFor(diskScan{used: s.disk.used, complete: s.disk.problem == "", problem: s.disk.problem})
}

func (s *supervisor) diskMessageFor(r diskScan) string {
	if !r.complete {
		return fmt.Sprintf("the sandbox's disk usage cannot be measured (%s), so its disk limit (%d bytes) cannot be checked: remove that data (`docker sandbox files rm`) or the sandbox (`docker sandbox rm`)", r.problem, s.o.diskLimit)
	}
	return fmt.Sprintf("/opt/workspace and /opt/user hold %d bytes, over the sandbox's disk limit of %d bytes (--disk): remove data with `docker sandbox files rm` or `docker sandbox rm` to run again", r.used, s.o.diskLimit)
}

// measureDisk adds up the blocks allocated under roots, without following
// links, counting each inode (and a root mounted twice) once. A directory it
// cannot read is made readable to its owner (sandboxed code may have
// chmodded it away) and read again; if that fails the measurement is
// incomplete, which counts as over the limit.
func measureDisk(roots []string) diskScan {
	start := time.Now()
	r := diskScan{complete: true}
	seen := map[[2]uint64]bool{}
	add := func(st *syscall.Stat_t) {
		key := [2]uint64{uint64(st.Dev), st.Ino}
		if seen[key] {
			return
		}
		seen[key] = true
		r.used += st.Blocks * 512
	}
	for _, root := range roots {
		var st syscall.Stat_t
		if err := syscall.Lstat(root, &st); err != nil {
			if errors.Is(err, syscall.ENOENT) {
				continue
			}
			r.complete, r.problem = false, fmt.Sprintf("%s: %v", root, err)
			continue
		}
		if seen[[2]uint64{uint64(st.Dev), st.Ino}] {
			continue // the same volume at two places
		}
		dev := st.Dev
		walkErr := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if d != nil && d.IsDir() && errors.Is(err, fs.ErrPermission) {
					return retryDir(path, &r)
				}
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				r.complete, r.problem = false, fmt.Sprintf("%s: %v", path, err)
				return nil
			}
			var st syscall.Stat_t
			if err := syscall.Lstat(path, &st); err != nil {
				return nil // gone meanwhile
			}
			if st.Dev != dev {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			add(&st)
			return nil
		})
		if walkErr != nil {
			r.complete, r.problem = false, walkErr.Error()
		}
	}
	r.at, r.dur = time.Now(), time.Since(start)
	return r
}

// retryDir makes an unreadable directory readable to its owner and measures
// it (one level of retry: deeper unreadable directories get theirs).
func retryDir(path string, r *diskScan) error {
	fi, err := os.Lstat(path)
	if err == nil {
		err = os.Chmod(path, fi.Mode().Perm()|0o700)
	}
	if err == nil {
		sub := measureDisk([]string{path})
		if sub.complete {
			// measureDisk counted path's blocks with its own seen set:
			// the subtree is new to ours, as WalkDir did not enter it.
			r.used += sub.used
			return filepath.SkipDir
		}
		err = errors.New(sub.problem)
	}
	r.complete, r.problem = false, fmt.Sprintf("%s: cannot be read: %v", path, err)
	return filepath.SkipDir
}
