package plugin

import (
	"fmt"
	"text/tabwriter"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"
)

type configOptions struct {
	format string
}

// configJSON is the `config --format json` schema.
type configJSON struct {
	Files  map[string]string          `json:"files"`
	Values map[string]configValueJSON `json:"values"`
}

type configValueJSON struct {
	Value  any    `json:"value"`
	Source string `json:"source"`
}

func newConfigCommand(dockerCli command.Cli) *cobra.Command {
	var o configOptions
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the effective configuration and where each value comes from",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fail(dockerCli.Out(), o.format, runConfig(dockerCli, o))
		},
	}
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: json or a Go template")
	return cmd
}

func runConfig(dockerCli command.Cli, o configOptions) error {
	c, err := loadConfig()
	if err != nil {
		return err
	}
	j := configJSON{Files: map[string]string{"user": c.UserFile, "project": c.ProjectFile}, Values: map[string]configValueJSON{}}
	entries := c.Entries()
	for _, e := range entries {
		j.Values[e.Key] = configValueJSON{Value: e.Value, Source: e.Source}
	}
	out := dockerCli.Out()
	return writeFormatted(out, o.format, j, func() error {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE")
		for _, e := range entries {
			fmt.Fprintf(tw, "%s\t%v\t%s\n", e.Key, e.Value, e.Source)
		}
		return tw.Flush()
	})
}
