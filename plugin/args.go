package plugin

import (
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// Positional arguments shared by the verbs.

// noArgs is the Args check of a command that takes no arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError(cmd, "%q accepts no arguments", cmd.CommandPath())
	}
	return nil
}

// parseTargets parses SCOPE[/SESSION] arguments, each once, in order.
func parseTargets(args []string) ([]core.Target, error) {
	var ts []core.Target
	seen := map[core.Target]bool{}
	for _, a := range args {
		t, err := core.ParseTarget(a)
		if err != nil {
			return nil, err
		}
		if !seen[t] {
			seen[t] = true
			ts = append(ts, t)
		}
	}
	return ts, nil
}
