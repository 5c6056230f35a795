package plugin

import (
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
