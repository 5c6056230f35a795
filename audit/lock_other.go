//go:build !unix

package audit

import (
	"os"
	"time"
)

const openNoFollow = 0

func lockFile(*os.File, time.Duration) func() { return func() {} }
