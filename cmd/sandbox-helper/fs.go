package main

import (
	"fmt"
	"os"
)

// runFS is the confined file server (`sandbox-helper fs ...`); see the copy
// issue.
func runFS(args []string) int {
	fmt.Fprintln(os.Stderr, "sandbox-helper fs: not implemented yet")
	return 2
}
