//go:build unix

package audit

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

const openNoFollow = syscall.O_NOFOLLOW

// lockFile takes an exclusive flock of f, trying for at most wait, and
// returns its release (a no-op when the lock was not taken: the write
// goes ahead, see lockWait).
func lockFile(f *os.File, wait time.Duration) func() {
	fd := int(f.Fd())
	deadline := time.Now().Add(wait)
	for pause := 100 * time.Microsecond; ; pause = min(2*pause, 10*time.Millisecond) {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(fd, syscall.LOCK_UN) }
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR || time.Now().After(deadline) {
			return func() {}
		}
		time.Sleep(pause) // waiting for another writer's lock (not test synchronisation)
	}
}

// private checks that fi (of path) is this user's and that no one else may
// write it (and, for a file, read it): an audit folder or file that another
// local user made or can change is not written to (they could read the
// records, or swap a folder for a link between our check and our write).
func private(path string, fi os.FileInfo, file bool) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	mask := os.FileMode(0o022)
	if file {
		mask = 0o077
	}
	if uid := os.Getuid(); int(st.Uid) != uid {
		return fmt.Errorf("%s is owned by uid %d, not by this user (uid %d): not used", path, st.Uid, uid)
	}
	if fi.Mode().Perm()&mask != 0 {
		return fmt.Errorf("%s has mode %04o: others may change it (want no %04o bits): not used", path, fi.Mode().Perm(), mask)
	}
	return nil
}
