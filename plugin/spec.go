package plugin

import (
	"context"

	"github.com/docker/docker/api/types/system"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/images"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"

	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// runtimeRefer names the built-in runtime image (images.Builder).
type runtimeRefer interface{ RuntimeRef() string }

// sandboxSpec is the one place a sandbox's container settings are made:
// exec, cp/files and shell all create or join sandboxes with it, so that
// they ask for the same settings (a sandbox made by one is joined, not
// refused as a mismatch, by the others). The configuration's keys of the
// config.FlagsSandbox group are its core.Settings, which the Spec embeds as
// they are (TestSandboxSpecCoversSettings fails for a key outside them); the
// image is the configured one, else the built-in runtime image.
//
// It lives here, not as a method of config.Config or in exec, because it
// joins three sources: the configuration (plugin/config, which stays free
// of exec and its engine types), the images (the helper's ID and the
// runtime image) and the plugin's version; exec takes the finished Spec and
// knows nothing of configuration.
func sandboxSpec(c *config.Config, b runtimeRefer, t core.Target) sbexec.Spec {
	st := c.Settings
	if st.Image == "" {
		st.Image = b.RuntimeRef()
	}
	return sbexec.Spec{Target: t, Settings: st, HelperID: images.HelperID(), Version: Version}
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
