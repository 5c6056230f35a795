package plugin

import (
	"github.com/spf13/pflag"

	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

// applyFlags records the configuration flags given on the command line
// (those config.AddFlags declared: fs nil for none) into the configuration
// and checks the limits between keys.
func applyFlags(fs *pflag.FlagSet, c *config.Config) error {
	if err := c.SetFlags(fs); err != nil {
		return asConfigError(err)
	}
	return nil
}
