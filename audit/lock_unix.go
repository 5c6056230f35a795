//go:build unix

package audit

import (
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
