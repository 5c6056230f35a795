package plugin

import (
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

// applyFlags records the changed flags into the configuration.
func applyFlags(cmd *cobra.Command, c *config.Config, pairs map[string]string) error {
	for flag, key := range pairs {
		if !cmd.Flags().Changed(flag) {
			continue
		}
		v := cmd.Flags().Lookup(flag).Value.String()
		if err := c.Set(key, v, "--"+flag); err != nil {
			return asConfigError(err)
		}
	}
	if err := c.Validate(); err != nil {
		return asConfigError(err)
	}
	return nil
}
