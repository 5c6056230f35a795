package core

import (
	"fmt"
	"os"
	"time"
)

var debugTiming = os.Getenv("DOCKER_SANDBOX_DEBUG_TIMING") != ""

var processStart = time.Now()

// Debugf prints a timing line when DOCKER_SANDBOX_DEBUG_TIMING is set.
func Debugf(format string, args ...any) { debugf(format, args...) }

func debugf(format string, args ...any) {
	if debugTiming {
		fmt.Fprintf(os.Stderr, "[timing +%v] "+format+"\n", append([]any{time.Since(processStart).Round(100 * time.Microsecond)}, args...)...)
	}
}
