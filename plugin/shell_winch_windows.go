//go:build windows

package plugin

import "time"

// lcNotifyResize polls the terminal size on Windows (no SIGWINCH), as the
// docker CLI does.
func lcNotifyResize(f func()) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				f()
			case <-done:
				return
			}
		}
	}()
	return func() { close(done) }
}
