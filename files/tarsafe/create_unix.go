//go:build unix

package tarsafe

import (
	"os"
	"syscall"
	"time"
)

// openReadFlags open a file for reading without blocking on a FIFO that was
// swapped in.
const openReadFlags = os.O_RDONLY | syscall.O_NONBLOCK

var timeZero time.Time
