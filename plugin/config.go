package plugin

import (
	"fmt"
	"text/tabwriter"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

type configOptions struct {
	format string
}

// configJSON is the `config --format json` schema.
type configJSON struct {
	Files  map[string]string          `json:"files"`
	Values map[string]configValueJSON `json:"values"`
	// Project is the trust decision about the project file; null without
	// one.
	Project *configProjectJSON `json:"project"`
	// Refused lists the values of an untrusted project file that were
	// ignored.
	Refused []configRefusedJSON `json:"refused"`
}

type configValueJSON struct {
	Value  any    `json:"value"`
	Source string `json:"source"`
	// Untrusted: the value came from an untrusted project file (it narrows).
	Untrusted bool `json:"untrusted"`
}

type configProjectJSON struct {
	File    string `json:"file"`
	Trusted bool   `json:"trusted"`
	// State is trusted (a trust record matches), env
	// (DOCKER_SANDBOX_TRUST_PROJECT=1), untrusted or changed (edited since
	// it was trusted).
	State  string `json:"state"`
	SHA256 string `json:"sha256"`
}

type configRefusedJSON struct {
	Key    string `json:"key"`
	Value  string `json:"value"` // as written in the file
	Source string `json:"source"`
	Reason string `json:"reason"`
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
	cmd.AddCommand(newConfigTrustCommand(dockerCli))
	return cmd
}

func runConfig(dockerCli command.Cli, o configOptions) error {
	c, err := loadConfigQuiet()
	if err != nil {
		return err
	}
	j := configJSON{Files: map[string]string{"user": c.UserFile, "project": c.ProjectFile}, Values: map[string]configValueJSON{},
		Refused: []configRefusedJSON{}}
	if c.ProjectFile != "" {
		j.Project = &configProjectJSON{File: c.ProjectFile, Trusted: c.Project.Trusted, State: c.Project.State, SHA256: c.Project.SHA256}
	}
	for _, r := range c.Refused {
		j.Refused = append(j.Refused, configRefusedJSON{Key: r.Key, Value: r.Value, Source: r.Source.String(), Reason: r.Reason})
	}
	entries := c.Entries()
	for _, e := range entries {
		j.Values[e.Key] = configValueJSON{Value: e.Value, Source: e.Source, Untrusted: e.Untrusted}
	}
	out := dockerCli.Out()
	return writeFormatted(out, o.format, j, func() error {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE")
		for _, e := range entries {
			src := e.Source
			if e.Untrusted {
				src += " (untrusted: narrows)"
			}
			fmt.Fprintf(tw, "%s\t%v\t%s\n", e.Key, e.Value, sbexec.TermText(src))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if c.ProjectFile == "" {
			return nil
		}
		fmt.Fprintf(out, "\nproject file %s: %s\n", sbexec.TermText(c.ProjectFile), trustStateText(c.Project.State))
		if len(c.Refused) > 0 {
			fmt.Fprintln(out, "ignored (an untrusted project file may only narrow the user file and defaults):")
			for _, r := range c.Refused {
				fmt.Fprintf(out, "  %s\n", sbexec.TermText(r.String()))
			}
		}
		if !c.Project.Trusted {
			fmt.Fprintf(out, "after reading it, trust it with: docker sandbox config trust %s\n", sbexec.TermText(c.ProjectFile))
		}
		return nil
	})
}
