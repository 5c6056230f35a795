package plugin

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
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
			c, err := loadConfigQuiet()
			if err != nil {
				return fail(dockerCli.Out(), o.format, err)
			}
			return fail(dockerCli.Out(), o.format, runConfig(dockerCli.Out(), c, o))
		},
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: json or a Go template")
	cmd.AddCommand(newConfigTrustCommand(dockerCli))
	return cmd
}

// runConfig prints the configuration c (loaded without the warning about
// an untrusted project file: the output shows what it ignored).
func runConfig(out io.Writer, c *config.Config, o configOptions) error {
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
	return writeFormatted(out, o.format, j, func() error {
		if err := configFormat.write(out, "", false, entries); err != nil {
			return err
		}
		if c.ProjectFile == "" {
			return nil
		}
		fmt.Fprintf(out, "\nproject file %s: %s\n", core.TermText(c.ProjectFile), trustStateText(c.Project.State))
		if len(c.Refused) > 0 {
			fmt.Fprintln(out, "ignored (an untrusted project file may only narrow the user file and defaults):")
			for _, r := range c.Refused {
				fmt.Fprintf(out, "  %s\n", core.TermText(r.String()))
			}
		}
		if !c.Project.Trusted {
			fmt.Fprintf(out, "after reading it, trust it with: docker sandbox config trust %s\n", core.TermText(c.ProjectFile))
		}
		return nil
	})
}

// configFormat is the table of config's text form.
var configFormat = listFormat[config.Entry]{
	columns: []column[config.Entry]{
		{"Key", "KEY", func(e config.Entry) string { return e.Key }},
		{"Value", "VALUE", func(e config.Entry) string { return core.TermText(configText(e.Key, e.Value)) }},
		{"Source", "SOURCE", func(e config.Entry) string {
			if e.Untrusted {
				return core.TermText(e.Source + " (untrusted: narrows)")
			}
			return core.TermText(e.Source)
		}},
	},
	table: `table {{.Key}}\t{{.Value}}\t{{.Source}}`,
}

// configText is a value as the text form of `config` shows it: what an
// empty or zero value means, a [scope.NAME] table as its three lists and a
// [lang.NAME] table as its interpreter, extensions and shebang
// (the JSON form has the raw values).
func configText(key string, v any) string {
	switch x := v.(type) {
	case string:
		if x == "" {
			switch key {
			case "default_lang":
				return "(sh)"
			case "image":
				return "(the runtime image)"
			case "runtime":
				return "(engine default)"
			case "audit_dir":
				return "(" + auditDir(config.Default()) + ")"
			}
		}
	case map[string]any:
		var parts []string
		keys := config.ScopeKeys()
		if strings.HasPrefix(key, "lang.") {
			keys = config.LangKeys()
		}
		for _, k := range keys {
			if l, ok := x[k]; ok {
				parts = append(parts, k+"="+configList(l))
			}
		}
		return strings.Join(parts, " ")
	}
	switch fmt.Sprint(v) {
	case "0", "0s":
		switch key {
		case "max_lifetime":
			return "0 (none)"
		case "idle_ttl":
			return "0 (never)"
		case "disk":
			return "0 (no limit)"
		case "copy_max_file_size":
			return "0 (= copy_max_size)"
		case "audit_retention_days":
			return "0 (keep)"
		}
	}
	return fmt.Sprint(v)
}

// configList is a list as [a,b], or [] when empty (80 and 443 for an
// empty allow_ports are the proxy's default, shown as such).
func configList(l any) string {
	var items []string
	switch x := l.(type) {
	case []string:
		items = x
	case []int:
		for _, n := range x {
			items = append(items, strconv.Itoa(n))
		}
	default:
		return fmt.Sprint(l)
	}
	return "[" + strings.Join(items, ",") + "]"
}
