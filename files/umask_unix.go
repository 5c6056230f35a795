//go:build unix

package files

import (
	"io/fs"
	"sync"
	"syscall"
)

var umaskOnce = sync.OnceValue(func() fs.FileMode {
	m := syscall.Umask(0o022)
	syscall.Umask(m)
	return fs.FileMode(m) & fs.ModePerm
})

// Umask is the process's umask, read once.
func Umask() fs.FileMode { return umaskOnce() }
