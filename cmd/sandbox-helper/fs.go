package main

import "github.com/docker-sandbox/docker-sandbox/files/fsserver"

// runFS is the confined file server, `sandbox-helper fs ls|cat|put|rm|
// tar-out|tar-in ...`: every path goes through os.Root on /opt/workspace or
// /opt/user (see package fsserver for the commands and the protocol).
func runFS(args []string) int {
	return fsserver.Default().Run(args)
}
