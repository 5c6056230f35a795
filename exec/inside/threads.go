package inside

import (
	"runtime"
	"sync"
)

// reserveThreads makes the Go runtime create n OS threads now and keep them
// idle for later. A fork bomb in the sandbox fills the pids limit (which
// counts threads); a runtime that then needs a new thread for a blocking
// syscall dies with "failed to create new OS thread". The runtime never
// frees idle threads, so creating them up front is enough.
func reserveThreads(n int) {
	var started, done sync.WaitGroup
	release := make(chan struct{})
	for i := 0; i < n; i++ {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			// A locked goroutine keeps its thread: the others need new ones.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread() // unlocked, the thread goes idle, not away
			started.Done()
			<-release
		}()
	}
	started.Wait()
	close(release)
	done.Wait()
}
