// Command docker-sandbox is the `docker sandbox` CLI plugin. It also runs
// standalone (`docker-sandbox exec ...`). This file is wiring only.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/docker/cli/cli"
	"github.com/docker/cli/cli-plugins/metadata"
	"github.com/docker/cli/cli-plugins/plugin"
	"github.com/docker/cli/cli/command"

	"github.com/docker-sandbox/docker-sandbox/exec/channel"
	sbplugin "github.com/docker-sandbox/docker-sandbox/plugin"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == channel.Verb {
		// A sandbox's exec channel process (started detached by a call).
		os.Exit(channel.Main(os.Args[2:]))
	}
	if plugin.RunningStandalone() {
		os.Args = standaloneArgs(os.Args)
	}
	dockerCli, err := command.NewDockerCli()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(125)
	}
	err = plugin.RunPlugin(dockerCli, sbplugin.NewRootCommand(dockerCli), sbplugin.Metadata())
	if err == nil {
		return
	}
	var st cli.StatusError
	if errors.As(err, &st) {
		if st.Status != "" {
			fmt.Fprintln(dockerCli.Err(), st.Status)
		}
		if st.StatusCode == 0 {
			st.StatusCode = 125
		}
		os.Exit(st.StatusCode)
	}
	// Cobra's own errors (unknown command or flag) are usage errors.
	fmt.Fprintln(dockerCli.Err(), "docker sandbox:", err)
	os.Exit(125)
}

// globalWithValue are the docker CLI's global flags that take a value.
var globalWithValue = map[string]bool{
	"-H": true, "--host": true, "-c": true, "--context": true, "--config": true,
	"-l": true, "--log-level": true, "--tlscacert": true, "--tlscert": true, "--tlskey": true,
}

// standaloneArgs makes `docker-sandbox [GLOBAL FLAGS] exec ...` look like
// the CLI's `docker-sandbox [GLOBAL FLAGS] sandbox exec ...`.
func standaloneArgs(args []string) []string {
	i := 1
	for i < len(args) {
		a := args[i]
		if a == "--" || len(a) == 0 || a[0] != '-' {
			break
		}
		i++
		if globalWithValue[a] && i < len(args) {
			i++
		}
	}
	if i < len(args) && (args[i] == sbplugin.Name || args[i] == metadata.MetadataSubcommandName) {
		return args
	}
	out := append([]string{}, args[:i]...)
	out = append(out, sbplugin.Name)
	return append(out, args[i:]...)
}
