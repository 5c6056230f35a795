package plugin

// What stop and rm share: their flags, the checks of their arguments, the
// targets of --all, and how each target's result is reported.

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/docker/cli/cli"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// removalOptions are the options of stop and rm.
type removalOptions struct {
	all     bool
	force   bool
	filters []string
	format  string
}

func addRemovalFlags(cmd *cobra.Command, o *removalOptions, allHelp string) {
	cmd.SetFlagErrorFunc(flagError)
	f := cmd.Flags()
	f.BoolVarP(&o.all, "all", "a", false, allHelp)
	f.BoolVarP(&o.force, "force", "f", false, "Kill whatever runs in the sandboxes first, and ignore names that do not exist")
	f.StringArrayVar(&o.filters, "filter", nil, "With --all: only the sandboxes that match (as ls --filter)")
	f.StringVar(&o.format, "format", "", "Output format: json or a Go template")
}

// checkRemovalArgs: names, or --all (with --filter).
func checkRemovalArgs(cmd *cobra.Command, args []string, o removalOptions) error {
	switch {
	case o.all && len(args) > 0:
		return usageError(cmd, "give names or --all, not both")
	case !o.all && len(args) == 0:
		return usageError(cmd, "%q requires at least 1 argument, or --all", cmd.CommandPath())
	case !o.all && len(o.filters) > 0:
		return usageError(cmd, "--filter needs --all")
	}
	return nil
}

// targetResult is one element of stop/rm --format json.
type targetResult struct {
	Target  string     `json:"target"`
	Removed bool       `json:"removed"`
	Error   *errorBody `json:"error"`
}

// listedTargets are the targets of the sandboxes the manager lists (all:
// also those without a container), sessions first: removing a scope
// removes its sessions too.
func listedTargets(ctx context.Context, m sandboxLister, flt sbexec.Filter, all bool, more func(seen map[core.Target]bool) ([]core.Target, error)) ([]core.Target, error) {
	rows, err := m.List(ctx, sbexec.ListOptions{All: all, Filter: flt})
	if err != nil {
		return nil, err
	}
	var ts []core.Target
	seen := map[core.Target]bool{}
	for _, r := range rows {
		ts = append(ts, r.Target())
		seen[r.Target()] = true
	}
	if more != nil {
		extra, err := more(seen)
		if err != nil {
			return nil, err
		}
		ts = append(ts, extra...)
	}
	slices.SortStableFunc(ts, func(a, b core.Target) int {
		switch {
		case a.Session != "" && b.Session == "":
			return -1
		case a.Session == "" && b.Session != "":
			return 1
		}
		return 0
	})
	return ts, nil
}

// removeEach runs remove on each target and reports: the targets done, one
// per line (or the results as JSON or through the template), each failure
// on errOut; the exit status is the first failure's. A target remove did
// not find is an error (not_found, naming what was missing) unless --all
// or --force.
func removeEach(out, errOut io.Writer, ts []core.Target, o removalOptions, missing string, remove func(core.Target) (bool, error)) error {
	res := []targetResult{}
	var firstErr error
	for _, t := range ts {
		found, err := remove(t)
		if err == nil && !found {
			if o.all || o.force {
				continue // gone meanwhile (a scope took its sessions), or -f
			}
			err = core.Errorf(core.CodeNotFound, "no sandbox %s (no %s): see `docker sandbox ls -a`", t, missing)
		}
		r := targetResult{Target: t.String(), Removed: err == nil}
		if err != nil {
			e := core.AsError(err)
			r.Error = newErrorBody(e)
			if firstErr == nil {
				firstErr = e
			}
			if o.format == "" {
				fmt.Fprintf(errOut, "docker sandbox: %s\n", e.Message)
			}
		}
		res = append(res, r)
	}
	if err := writeFormatted(out, o.format, res, func() error {
		for _, r := range res {
			if r.Removed {
				fmt.Fprintln(out, r.Target)
			}
		}
		return nil
	}); err != nil {
		return fail(out, "", err)
	}
	if firstErr != nil {
		if o.format != "" {
			fmt.Fprintf(errOut, "docker sandbox: %s\n", core.AsError(firstErr).Message)
		}
		return cli.StatusError{StatusCode: core.AsError(firstErr).Exit}
	}
	return nil
}
