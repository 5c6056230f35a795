package plugin

import (
	"context"

	"github.com/docker/docker/api/types/system"

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

// infoClient is the part of the Engine API resolveRuntime uses.
type infoClient interface {
	Info(ctx context.Context) (system.Info, error)
}

// resolveRuntime returns the engine runtime a sandbox with this network is
// created with when the configuration asks for runtime
// (exec.ResolveRuntime: "auto" becomes gVisor when the engine has it, else
// the default; a gVisor runtime registered with --network=none becomes its
// NAME-host sibling for a sandbox with a network). Only a configured
// runtime costs a call to the engine.
func resolveRuntime(ctx context.Context, cli infoClient, runtime, network string) (string, error) {
	if runtime == "" {
		return "", nil
	}
	info, err := cli.Info(ctx)
	if err != nil {
		return "", core.EngineError(err, "cannot read the engine's runtimes")
	}
	rt, err := sbexec.ResolveRuntime(info, runtime, network)
	if err != nil {
		return "", err
	}
	if rt != runtime {
		core.Debugf("runtime %s: %s", runtime, rt)
	}
	return rt, nil
}

// resolveConfigRuntime resolves the configuration's runtime in place, for
// its network.
func resolveConfigRuntime(ctx context.Context, cli infoClient, c *config.Config) (err error) {
	c.Runtime, err = resolveRuntime(ctx, cli, c.Runtime, c.Network)
	return err
}
