package plugin

import (
	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/images"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"

	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// sandboxSpec is the one place the configuration becomes a sandbox's
// container settings: exec, cp/files and shell all create or join
// sandboxes with it, so that they ask for the same settings (a sandbox made
// by one is joined, not refused as a mismatch, by the others).
func sandboxSpec(c *config.Config, t core.Target, imageRef string) sbexec.Spec {
	return sbexec.Spec{
		Target: t, Image: imageRef, Network: c.Network, Memory: c.Memory, CPUs: c.CPUs, Pids: c.Pids,
		Nofile: c.Nofile, TmpSize: c.TmpSize, IdleTTL: c.IdleTTL, Runtime: c.Runtime,
		MaxLifetime: c.MaxLifetime, Disk: c.Disk,
		HelperID: images.HelperID(), Version: Version,
	}
}
