//go:build !windows

package plugin

import (
	"os"
	"os/signal"
	"syscall"
)

// lcNotifyResize calls f whenever the terminal changes size (SIGWINCH) until
// the returned stop is called.
func lcNotifyResize(f func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				f()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}
