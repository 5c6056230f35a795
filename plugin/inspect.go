package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/docker/cli/cli"
	"github.com/docker/cli/cli/command"
	"github.com/docker/cli/cli/command/inspect"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

type inspectOptions struct {
	format string
	size   bool
}

func newInspectCommand(dockerCli command.Cli) *cobra.Command {
	var o inspectOptions
	cmd := &cobra.Command{
		Use:   "inspect [OPTIONS] SCOPE[/SESSION]...",
		Short: "Show sandboxes in detail (a JSON array, like docker inspect)",
		Long: `Show sandboxes in detail, as a JSON array like docker inspect: state, limits,
mounts, labels, egress mode, the execs running in it, and for a running sandbox
what its helper reports (sandbox-helper status).`,
		Example: `  docker sandbox inspect u1 u1/chatA
  docker sandbox inspect --format '{{.state}} {{.limits.memory}}' u1`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError(cmd, "%q requires at least 1 argument", cmd.CommandPath())
			}
			out := dockerCli.Out()
			ts, err := parseTargets(args)
			if err != nil {
				return fail(out, o.format, err)
			}
			c, err := loadConfig()
			if err != nil {
				return fail(out, o.format, err)
			}
			return runInspect(cmd.Context(), manager(dockerCli, c), out, dockerCli.Err(), ts, o)
		},
		ValidArgsFunction: completeTargets(dockerCli, 0),
	}
	cmd.SetFlagErrorFunc(flagError)
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: a JSON array (the default, indented; json: on one line) or a Go template applied to each sandbox (fields: the JSON names)")
	cmd.Flags().BoolVarP(&o.size, "size", "s", false, "Show the size of the sandbox's data (read by a short-lived probe container: slower)")
	return cmd
}

// sandboxInspector is what inspect asks of the sandbox manager.
type sandboxInspector interface {
	Inspect(ctx context.Context, t core.Target, size bool) (*sbexec.Details, error)
}

// runInspect prints the sandboxes through docker/cli's inspect package:
// a JSON array, or the template per sandbox on its JSON form. A sandbox
// that cannot be inspected is left out, its error on errOut; the exit
// status is then the first error's.
func runInspect(ctx context.Context, m sandboxInspector, out, errOut io.Writer, ts []core.Target, o inspectOptions) error {
	ins, err := inspect.NewTemplateInspectorFromString(out, o.format)
	if err != nil {
		return fail(out, "", badTemplate(err))
	}
	var firstErr error
	n := 0
	for _, t := range ts {
		d, err := m.Inspect(ctx, t, o.size)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			fmt.Fprintf(errOut, "docker sandbox: %s\n", core.TermText(core.AsError(err).Message))
			continue
		}
		raw, err := json.Marshal(d)
		if err != nil {
			return fail(out, "", err)
		}
		data, err := templateData(d)
		if err != nil {
			return fail(out, "", err)
		}
		if err := ins.Inspect(data, raw); err != nil {
			return fail(out, "", badTemplate(err))
		}
		n++
	}
	// An empty array is printed; a template with nothing to run on prints
	// nothing.
	if n > 0 || o.format == "" || o.format == "json" {
		if err := ins.Flush(); err != nil {
			return fail(out, "", err)
		}
	}
	if firstErr != nil {
		// The array is on stdout and the message on stderr already.
		return cli.StatusError{StatusCode: core.AsError(firstErr).Exit}
	}
	return nil
}
