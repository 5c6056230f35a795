package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/docker/cli/cli"
	"github.com/docker/cli/cli/command"
	"github.com/docker/cli/templates"
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
			return runInspect(cmd.Context(), dockerCli, args, o)
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: json (the default) or a Go template applied to each sandbox")
	cmd.Flags().BoolVarP(&o.size, "size", "s", false, "Show the size of the sandbox's data (read by a short-lived probe container: slower)")
	return cmd
}

func runInspect(ctx context.Context, dockerCli command.Cli, args []string, o inspectOptions) error {
	ts, err := parseTargets(args)
	if err != nil {
		return fail(dockerCli.Out(), o.format, err)
	}
	c, err := loadConfig()
	if err != nil {
		return fail(dockerCli.Out(), o.format, err)
	}
	m := manager(dockerCli, c)
	list := []*sbexec.Details{}
	var firstErr error
	for _, t := range ts {
		d, err := m.Inspect(ctx, t, o.size)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			fmt.Fprintf(dockerCli.Err(), "docker sandbox: %s\n", core.TermText(core.AsError(err).Message))
			continue
		}
		list = append(list, d)
	}
	out := dockerCli.Out()
	if o.format == "" || isJSON(o.format) {
		b, err := json.MarshalIndent(list, "", "    ")
		if err != nil {
			return fail(out, "", err)
		}
		fmt.Fprintf(out, "%s\n", b)
	} else {
		tmpl, err := templates.Parse(o.format)
		if err != nil {
			return fail(out, "", core.Wrap(core.CodeBadFlag, err, "invalid --format template"))
		}
		for _, d := range list {
			v, err := lcGeneric(d)
			if err != nil {
				return fail(out, "", err)
			}
			var buf bytes.Buffer
			if err := tmpl.Execute(&buf, v); err != nil {
				return fail(out, "", core.Wrap(core.CodeBadFlag, err, "executing the --format template"))
			}
			fmt.Fprintf(out, "%s\n", buf.Bytes())
		}
	}
	if firstErr != nil {
		// The array is on stdout and the message on stderr already.
		return cli.StatusError{StatusCode: core.AsError(firstErr).Exit}
	}
	return nil
}
