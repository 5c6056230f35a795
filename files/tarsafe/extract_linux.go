//go:build linux

package tarsafe

import (
	"io/fs"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// fastCreate says whether createIn and setTimes work on this system: a file
// of an archive is then created with one openat in its folder's handle and
// its time set through the open handle, without the path walks (an lstat,
// and a readlinkat and utimensat by name) that os.Root's calls make; with
// many small files those are most of the per-entry system calls.
const fastCreate = true

// createIn creates name, a single name component, in the folder open as
// dir, exclusively (O_EXCL also refuses to follow a symbolic link that has
// that name), for writing. The error is an *fs.PathError (fs.ErrExist when
// name exists).
func createIn(dir *os.File, name string) (*os.File, error) {
	rc, err := dir.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var oerr error
	cerr := rc.Control(func(dfd uintptr) {
		for {
			fd, oerr = syscall.Openat(int(dfd), name, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
			if oerr != syscall.EINTR {
				return
			}
		}
	})
	if cerr != nil {
		return nil, cerr
	}
	if oerr != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: oerr}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// setTimes sets the open file's modification time (utimensat on the
// handle itself; the access time is left as it is).
func setTimes(f *os.File, mtime time.Time) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	ts := [2]syscall.Timespec{{Nsec: utimeOmit}, {Sec: mtime.Unix(), Nsec: int64(mtime.Nanosecond())}}
	var errno syscall.Errno
	if cerr := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall6(syscall.SYS_UTIMENSAT, fd, 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	}); cerr != nil {
		return cerr
	}
	if errno != 0 {
		return &fs.PathError{Op: "utimensat", Path: f.Name(), Err: errno}
	}
	return nil
}

// utimeOmit is UTIME_OMIT: leave that time as it is.
const utimeOmit = (1 << 30) - 2

// linkat makes the hard link nn in nfd to on in ofd (no flags: a link is
// linked itself, never followed).
func linkat(ofd int, on string, nfd int, nn string) error {
	op, err := syscall.BytePtrFromString(on)
	if err != nil {
		return err
	}
	np, err := syscall.BytePtrFromString(nn)
	if err != nil {
		return err
	}
	_, _, errno := syscall.Syscall6(syscall.SYS_LINKAT, uintptr(ofd), uintptr(unsafe.Pointer(op)), uintptr(nfd), uintptr(unsafe.Pointer(np)), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// withFD runs f with the descriptor of the folder r.
func withFD(r *os.Root, f func(fd int) error) error {
	h, err := r.Open(".")
	if err != nil {
		return err
	}
	defer h.Close()
	rc, err := h.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// renameIn and linkIn rename and hard-link the path from of root to the
// path to of root, each resolved through Walk (links on the way followed
// inside root), with one renameat or linkat between the two folders.
func renameIn(root *os.Root, from, to string) error {
	return betweenIn(root, from, to, "renameat", func(ofd int, on string, nfd int, nn string) error {
		return syscall.Renameat(ofd, on, nfd, nn)
	})
}

func linkIn(root *os.Root, from, to string) error {
	return betweenIn(root, from, to, "linkat", func(ofd int, on string, nfd int, nn string) error {
		return linkat(ofd, on, nfd, nn)
	})
}

func betweenIn(root *os.Root, from, to, op string, f func(ofd int, on string, nfd int, nn string) error) error {
	od, on, err := Walk(root, from, false)
	if err != nil {
		return err
	}
	defer od.Close()
	nd, nn, err := Walk(root, to, false)
	if err != nil {
		return err
	}
	defer nd.Close()
	if on == "." || nn == "." {
		return &fs.PathError{Op: op, Path: to, Err: syscall.EINVAL}
	}
	err = withFD(od, func(ofd int) error {
		return withFD(nd, func(nfd int) error {
			for {
				err := f(ofd, on, nfd, nn)
				if err != syscall.EINTR {
					return err
				}
			}
		})
	})
	if err != nil {
		return &fs.PathError{Op: op, Path: to, Err: err}
	}
	return nil
}
