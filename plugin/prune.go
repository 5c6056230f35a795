package plugin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/docker/cli/cli"
	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/images"
)

type pruneOptions struct {
	force     bool
	dryRun    bool
	olderThan string
	filters   []string
	format    string
}

// pruneGraceEnv overrides the minimum age of the objects prune removes (a
// duration; default pruneGrace). Test suites set it to 0s.
const pruneGraceEnv = "DOCKER_SANDBOX_PRUNE_GRACE"

// pruneGrace spares objects that may belong to a call in progress.
const pruneGrace = time.Minute

func newPruneCommand(dockerCli command.Cli) *cobra.Command {
	var o pruneOptions
	cmd := &cobra.Command{
		Use:   "prune [OPTIONS]",
		Short: "Remove expired sandbox containers, old data, and orphaned networks and sidecars",
		Long: `Remove what the plugin made that nobody needs any more: sandbox containers that
stopped but were not removed, seeder and probe containers left by interrupted
calls, sidecars no sandbox uses, networks that lost their sandbox, helper volumes
of other plugin versions; with --older-than also the data of sandboxes whose
container is gone and whose data was last written longer ago. It never touches
an object without the label com.docker.sandbox.managed=true, nor one younger than
a minute.`,
		Example: `  docker sandbox prune --dry-run
  docker sandbox prune -f --older-than 168h
  docker sandbox prune -f --format json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := dockerCli.Out()
			grace, graceSet := os.LookupEnv(pruneGraceEnv)
			po, err := o.pruneOptions(cmd.Flags().Changed("older-than"), grace, graceSet)
			if err != nil {
				return fail(out, o.format, err)
			}
			c, err := loadConfig()
			if err != nil {
				return fail(out, o.format, err)
			}
			b := builder(dockerCli, c)
			for _, a := range images.Arches {
				po.KeepVolumes = append(po.KeepVolumes, b.HelperVolume(a, false), b.HelperVolume(a, true))
			}
			return fail(out, o.format, runPrune(cmd.Context(), manager(dockerCli, c), dockerCli.In(), out, dockerCli.Err(), po, o))
		},
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.SetFlagErrorFunc(flagError)
	f := cmd.Flags()
	f.BoolVarP(&o.force, "force", "f", false, "Do not prompt for confirmation")
	f.BoolVar(&o.dryRun, "dry-run", false, "Only list what would be removed")
	f.StringVar(&o.olderThan, "older-than", "", "Also remove the data of sandboxes without a container, last written longer ago than this (e.g. 168h)")
	f.StringArrayVar(&o.filters, "filter", nil, "Only objects with this label: label=KEY[=VALUE]")
	f.StringVar(&o.format, "format", "", "Output format: json or a Go template")
	return cmd
}

// pruner is what prune asks of the sandbox manager.
type pruner interface {
	Prune(ctx context.Context, o sbexec.PruneOptions) (sbexec.PruneReport, error)
}

// pruneOptions are the manager's options for these flags (olderThanSet:
// --older-than was given) and the grace from $DOCKER_SANDBOX_PRUNE_GRACE
// (graceSet: it is set).
func (o pruneOptions) pruneOptions(olderThanSet bool, grace string, graceSet bool) (sbexec.PruneOptions, error) {
	po := sbexec.PruneOptions{DryRun: o.dryRun, Grace: pruneGrace}
	if olderThanSet {
		d, err := time.ParseDuration(o.olderThan)
		if err != nil || d < 0 {
			return po, core.Errorf(core.CodeBadFlag, "invalid --older-than %q: want a duration such as 24h or 90m", o.olderThan)
		}
		po.OlderThan, po.DataAge = d, true
	}
	for _, f := range o.filters {
		v, ok := strings.CutPrefix(f, "label=")
		if !ok || v == "" {
			return po, core.Errorf(core.CodeBadFlag, "invalid --filter %q: prune takes label=KEY or label=KEY=VALUE", f)
		}
		po.Labels = append(po.Labels, v)
	}
	if graceSet && grace != "" {
		d, err := time.ParseDuration(grace)
		if err != nil || d < 0 {
			return po, core.Errorf(core.CodeBadFlag, "invalid %s %q: want a duration", pruneGraceEnv, grace)
		}
		po.Grace = d
	}
	return po, nil
}

// runPrune asks (on errOut, the answer from in) unless -f or --dry-run,
// prunes, and reports.
func runPrune(ctx context.Context, m pruner, in io.Reader, out, errOut io.Writer, po sbexec.PruneOptions, o pruneOptions) error {
	if !o.force && !o.dryRun {
		msg := "WARNING! This will remove:\n" +
			"  - sandbox containers that stopped but were not removed\n" +
			"  - seeder and probe containers left by interrupted calls\n" +
			"  - sidecars no sandbox uses, and networks that lost their sandbox\n" +
			"  - helper volumes of other plugin versions that no container uses\n"
		if po.DataAge {
			msg += fmt.Sprintf("  - the data of sandboxes without a container, last written more than %s ago\n", po.OlderThan)
		}
		fmt.Fprint(errOut, msg+"Are you sure you want to continue? [y/N] ")
		line, _ := bufio.NewReader(in).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			return core.Errorf(core.CodeBadFlag, "prune cancelled (use -f to skip the prompt)")
		}
	}
	rep, err := m.Prune(ctx, po)
	if err != nil {
		return err
	}
	var failed []string
	for _, it := range rep.Objects {
		if it.Error != "" {
			failed = append(failed, fmt.Sprintf("%s %s: %s", it.Type, it.Name, it.Error))
		}
	}
	if err := writeFormatted(out, o.format, rep, func() error {
		verb := "Removed"
		if rep.DryRun {
			verb = "Would remove"
		}
		if len(rep.Objects) == 0 {
			fmt.Fprintln(out, "Nothing to remove")
		} else {
			tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "TYPE\tNAME\tREASON")
			for _, it := range rep.Objects {
				if it.Error == "" {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", it.Type, it.Name, it.Reason)
				}
			}
			_ = tw.Flush()
			fmt.Fprintf(out, "%s %d object(s)\n", verb, len(rep.Objects)-len(failed))
		}
		for _, k := range rep.Kept {
			if rep.DryRun || strings.Contains(k.Reason, "unknown") {
				fmt.Fprintf(errOut, "docker sandbox: %s %s %s\n", k.Type, k.Name, k.Reason)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if len(failed) > 0 {
		// The report (with each object's error) is on stdout already.
		fmt.Fprintf(errOut, "docker sandbox: prune could not remove %d object(s): %s\n", len(failed), strings.Join(failed, "; "))
		return cli.StatusError{StatusCode: 125}
	}
	return nil
}
