package main

import (
	"encoding/json"
	"os"

	"github.com/docker-sandbox/docker-sandbox/exec/inside"
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
	a, err := wire.ParseFSArgs(args)
	if err != nil {
		_ = json.NewEncoder(os.Stderr).Encode(map[string]string{"code": wire.ErrBadRequest, "message": err.Error()})
		return fsserver.ExitUsage
	}
	if a.Target != "" {
		if err := inside.CheckTarget(a.Target); err != nil {
			_ = json.NewEncoder(os.Stderr).Encode(map[string]string{"code": wire.ErrNotSandbox, "message": err.Error()})
			return fsserver.ExitFailed
		}
		if _, err := os.Stdout.WriteString(wire.FSPreamble); err != nil {
			return fsserver.ExitFailed
		}
	}
	return fsserver.Default().Run(a.Args)
}
