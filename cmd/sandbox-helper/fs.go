package main

import (
	"os"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
	"github.com/docker-sandbox/docker-sandbox/files/fsserver"
)

// runFS is the confined file server, `sandbox-helper fs [--target
// SCOPE[/SESSION]] ls|cat|put|rm|tar-out|tar-in ...`: every path goes
// through os.Root on /opt/workspace or /opt/user (see package fsserver for
// the commands and the protocol). With --target, it first checks that the
// container is that sandbox (PID 1 is the helper's init for it), and
// otherwise serves nothing; then it writes wire.FSPreamble on stdout.
func runFS(args []string) int {
	if len(args) >= 2 && (args[0] == "--target" || args[0] == "-target") {
		if st := checkPID1(args[1], ""); st != nil {
			_ = writeLine(os.Stderr, map[string]string{"code": wire.ErrNotSandbox, "message": st.Error})
			return fsserver.ExitFailed
		}
		args = args[2:]
		if _, err := os.Stdout.WriteString(wire.FSPreamble); err != nil {
			return fsserver.ExitFailed
		}
	}
	return fsserver.Default().Run(args)
}
