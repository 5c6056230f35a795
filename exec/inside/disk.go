package inside

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

// The disk limit (init --disk BYTES): PID 1 measures what /opt/workspace and
// /opt/user hold together (allocated blocks, each inode once) while anything
// runs, at most every scanEvery and no more often than four times the last
// scan's duration. Past the limit it tells every registered run to stop
// (disk_limit), kills the kernels (a process their code left running dies
// with them, an orphan) and ends the shells, and refuses new runs until a
// measurement is back under it (after `files rm` or `docker sandbox rm`).
// Between two measurements, and while any process besides PID 1 lives (a
// kernel between calls, or what its code left running, is not activity
// but may write), a fall of the filesystem's free space by more than half
// of what is left under the limit starts one at once (diskWatchEvery), so
// that a fast writer is stopped within about one measurement of the limit.
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
	if s.o.diskLimit <= 0 || s.disk.scanning || (len(s.runs) == 0 && now.Sub(s.lastLive) > time.Second) {
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
		s.killKernels(s.diskMessageFor(r))
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

// measureDisk adds up the blocks allocated under roots, counting each
// inode (and a root mounted twice) once. It walks by file descriptors,
// never following a link, so that sandboxed code swapping a folder for a
// link while it walks cannot lead it out of the volumes. A folder it cannot
// read is made readable to its owner through the descriptor it holds (code
// may have chmodded it away) and read again; if that fails the measurement
// is incomplete, which counts as over the limit.
func measureDisk(roots []string) diskScan {
	start := time.Now()
	m := &diskMeasure{seen: map[[2]uint64]bool{}, r: diskScan{complete: true}}
	for _, root := range roots {
		fd, err := syscall.Open(root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, syscall.ENOENT) {
				continue
			}
			m.incomplete(root, err)
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			syscall.Close(fd)
			m.incomplete(root, err)
			continue
		}
		if m.seen[[2]uint64{uint64(st.Dev), st.Ino}] {
			syscall.Close(fd)
			continue // the same volume at two places
		}
		m.add(&st)
		m.dir(fd, root, uint64(st.Dev), 0)
	}
	m.r.at, m.r.dur = time.Now(), time.Since(start)
	return m.r
}

type diskMeasure struct {
	seen map[[2]uint64]bool
	r    diskScan
}

func (m *diskMeasure) add(st *syscall.Stat_t) {
	key := [2]uint64{uint64(st.Dev), st.Ino}
	if !m.seen[key] {
		m.seen[key] = true
		m.r.used += st.Blocks * 512
	}
}

func (m *diskMeasure) incomplete(path string, err error) {
	if m.r.complete {
		m.r.complete, m.r.problem = false, fmt.Sprintf("%s: %v", path, err)
	}
}

// maxDiskDepth bounds the walk's nesting (each level holds a descriptor).
const maxDiskDepth = 256

// dir measures the entries of the folder open at fd (which it closes).
func (m *diskMeasure) dir(fd int, path string, dev uint64, depth int) {
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		if !errors.Is(err, syscall.ENOENT) { // removed while we read it
			m.incomplete(path, err)
		}
		return
	}
	for _, name := range names {
		var st syscall.Stat_t
		if err := fstatat(fd, name, &st); err != nil {
			continue // gone meanwhile
		}
		if uint64(st.Dev) != dev {
			continue // a mount point: not this volume
		}
		m.add(&st)
		if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			continue
		}
		sub := path + "/" + name
		if depth >= maxDiskDepth {
			m.incomplete(sub, errors.New("nested too deep"))
			continue
		}
		cfd, err := openDirAt(fd, name)
		if errors.Is(err, syscall.EACCES) {
			if err = ownerReadable(fd, name); err == nil {
				cfd, err = openDirAt(fd, name)
			}
		}
		if err != nil {
			if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
				continue // removed, or swapped for a link or a file meanwhile
			}
			m.incomplete(sub, err)
			continue
		}
		m.dir(cfd, sub, dev, depth+1)
	}
}

// fstatat is fstatat(2) with AT_SYMLINK_NOFOLLOW: name in dirfd, a link
// itself and never what it points to.
func fstatat(dirfd int, name string, st *syscall.Stat_t) error {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return err
	}
	const atSymlinkNofollow = 0x100
	_, _, e := syscall.Syscall6(sysFstatat, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(st)), atSymlinkNofollow, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

func openDirAt(dirfd int, name string) (int, error) {
	return syscall.Openat(dirfd, name, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
}

// ownerReadable gives the owner read and search permission on the folder
// name in dirfd, through an O_PATH descriptor of that very folder (never a
// path that a link swapped in meanwhile could redirect).
func ownerReadable(dirfd int, name string) error {
	pfd, err := syscall.Openat(dirfd, name, oPath|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(pfd)
	var st syscall.Stat_t
	if err := syscall.Fstat(pfd, &st); err != nil {
		return err
	}
	return syscall.Chmod("/proc/self/fd/"+strconv.Itoa(pfd), (st.Mode&0o7777)|0o700)
}

// oPath is O_PATH (the same on every Linux architecture the helper is
// built for; the syscall package does not name it).
const oPath = 0x200000
