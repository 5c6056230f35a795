//go:build !unix

package tarsafe

import (
	"os"
	"time"
)

const openReadFlags = os.O_RDONLY

var timeZero time.Time
