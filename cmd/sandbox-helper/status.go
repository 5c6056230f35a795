package main

import (
	"fmt"
	"os"
)

// runStatus reports what runs in the sandbox (`sandbox-helper status`); see
// the lifecycle issue.
func runStatus(args []string) int {
	fmt.Fprintln(os.Stderr, "sandbox-helper status: not implemented yet")
	return 2
}
