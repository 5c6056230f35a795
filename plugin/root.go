// Package plugin holds the `docker sandbox` cobra commands, one file per
// verb (an options struct, newXCommand, runX), and their output formats.
package plugin

import (
	"github.com/docker/cli/cli-plugins/metadata"
	"github.com/docker/cli/cli-plugins/plugin"
	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/internal/pluginmeta"
)

// Version is the plugin's version, set at build time from VERSION
// (internal/pluginmeta.Version).
var Version = pluginmeta.Version

// Vendor is the plugin's vendor in its metadata; scripts/install.sh uses it
// to recognise a plugin of ours.
const Vendor = pluginmeta.Vendor

// Name is the plugin's command name (`docker sandbox`).
const Name = "sandbox"

// Metadata is what `docker-sandbox docker-cli-plugin-metadata` prints. It is
// built without any I/O: the Docker CLI asks for it on every `docker --help`.
func Metadata() metadata.Metadata {
	return metadata.Metadata{
		SchemaVersion:    pluginmeta.SchemaVersion,
		Vendor:           Vendor,
		Version:          Version,
		ShortDescription: pluginmeta.ShortDescription,
		URL:              pluginmeta.URL,
	}
}

// NewRootCommand returns the `sandbox` command. It must not do I/O: the
// engine client exists only after the pre-run hook, and the docker CLI
// asks for the metadata (which builds this tree) on every `docker --help`.
func NewRootCommand(dockerCli command.Cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   Name,
		Short: "Run untrusted code in hardened, per-scope sandboxes",
		Long: `Run untrusted code in hardened, per-scope sandbox containers on the engine
your Docker context points at.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if plugin.PersistentPreRunE == nil {
				return nil // not run by plugin.RunPlugin (unit tests)
			}
			core.Debugf("pre-run start")
			err := plugin.PersistentPreRunE(cmd, args)
			core.Debugf("pre-run end")
			return err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError(cmd, "unknown command %q for \"docker sandbox\"", args[0])
			}
			return cmd.Help()
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	cmd.AddCommand(
		newExecCommand(dockerCli),
		newVersionCommand(dockerCli),
		newConfigCommand(dockerCli),
		newImagesCommand(dockerCli),
		newStopCommand(dockerCli),
		newRmCommand(dockerCli),
		newCpCommand(dockerCli),
		newFilesCommand(dockerCli),
		newLsCommand(dockerCli),
		newInspectCommand(dockerCli),
		newPruneCommand(dockerCli),
		newShellCommand(dockerCli),
		newMCPCommand(dockerCli),
		newEgressCommand(dockerCli),
		newAuditCommand(dockerCli),
		newCompletionCommand(),
		newStandaloneCompleteCommand(),
	)
	registerFlagCompletions(dockerCli, cmd)
	return cmd
}
