package plugin

import (
	"context"
	"fmt"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

type stopOptions struct {
	format string
}

func newStopCommand(dockerCli command.Cli) *cobra.Command {
	var o stopOptions
	cmd := &cobra.Command{
		Use:   "stop SCOPE[/SESSION]...",
		Short: "Remove sandbox containers and keep their data",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError(cmd, "%q requires at least 1 argument", cmd.CommandPath())
			}
			return fail(dockerCli.Out(), o.format, runStop(cmd.Context(), dockerCli, args, o))
		},
	}
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: json or a Go template")
	return cmd
}

// targetResult is one line of stop/rm output.
type targetResult struct {
	Target  string `json:"target"`
	Removed bool   `json:"removed"`
}

func parseTargets(args []string) ([]sbexec.Target, error) {
	var ts []sbexec.Target
	for _, a := range args {
		t, err := sbexec.ParseTarget(a)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, nil
}

func runStop(ctx context.Context, dockerCli command.Cli, args []string, o stopOptions) error {
	ts, err := parseTargets(args)
	if err != nil {
		return err
	}
	m := &sbexec.Manager{Engine: dockerCli.Client(), Version: Version}
	return eachTarget(dockerCli, o.format, ts, func(t sbexec.Target) (bool, error) { return m.Stop(ctx, t) })
}

func eachTarget(dockerCli command.Cli, format string, ts []sbexec.Target, do func(sbexec.Target) (bool, error)) error {
	var res []targetResult
	for _, t := range ts {
		ok, err := do(t)
		if err != nil {
			return err
		}
		res = append(res, targetResult{Target: t.String(), Removed: ok})
	}
	out := dockerCli.Out()
	return writeFormatted(out, format, res, func() error {
		for _, r := range res {
			if r.Removed {
				fmt.Fprintln(out, r.Target)
			} else {
				fmt.Fprintf(dockerCli.Err(), "docker sandbox: no sandbox %s\n", r.Target)
			}
		}
		return nil
	})
}
