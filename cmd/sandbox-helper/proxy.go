package main

import (
	"fmt"
	"os"
)

// runProxy is the sidecar egress proxy (`sandbox-helper proxy ...`); see the
// egress issue.
func runProxy(args []string) int {
	fmt.Fprintln(os.Stderr, "sandbox-helper proxy: not implemented yet")
	return 2
}
