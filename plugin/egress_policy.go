package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
)

type egressPolicyOptions struct {
	rules  egressRuleFlags
	clear  bool
	format string
}

func newEgressPolicyCommand(dockerCli command.Cli) *cobra.Command {
	var o egressPolicyOptions
	cmd := &cobra.Command{
		Use:   "policy SCOPE [--allow HOST]... [--allow-port N]... [--allow-cidr CIDR]... [--clear]",
		Short: "Show, replace or remove a scope's egress policy (no sandbox is re-created)",
		Example: `  docker sandbox egress policy ci-job
  docker sandbox egress policy ci-job --allow pypi.org --allow '*.pythonhosted.org'
  docker sandbox egress policy ci-job --allow git.corp --allow-port 443 --allow-cidr 10.1.0.0/16
  docker sandbox egress policy ci-job --clear`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError(cmd, "%q requires exactly 1 argument (a scope)", cmd.CommandPath())
			}
			set := o.rules.changed(cmd) || o.clear
			out := dockerCli.Out()
			if err := core.ValidateName("scope", args[0]); err != nil {
				return fail(out, o.format, err)
			}
			c, err := loadConfig()
			if err != nil {
				return fail(out, o.format, err)
			}
			au := newAuditor(dockerCli, c)
			err = runEgressPolicy(cmd.Context(), egressManager(dockerCli, c), out, dockerCli.Err(), args[0], set, o)
			if set { // a change of the scope's policy
				au.record(flagsRecord("egress policy", args[0], cmd.Flags(), err), nil, nil)
			}
			return fail(out, o.format, err)
		},
		ValidArgsFunction: completeScopes(dockerCli, 1),
	}
	f := cmd.Flags()
	o.rules.add(f, false)
	f.BoolVar(&o.clear, "clear", false, "Remove the scope's policy and credential (while sandboxes of the scope exist: empty it, denying everything)")
	f.StringVar(&o.format, "format", "", "Output format: json or a Go template")
	return cmd
}

// egressPolicies is what egress policy asks of the sidecar manager.
type egressPolicies interface {
	Policy(ctx context.Context, scope string) (egress.ScopePolicy, bool, error)
	SetPolicy(ctx context.Context, scope string, rules policy.Rules) (policy.Rules, error)
	ClearPolicy(ctx context.Context, scope string) (egress.Cleared, error)
}

// runEgressPolicy shows the policy of scope (a valid name), or with set
// replaces or (--clear) removes it.
func runEgressPolicy(ctx context.Context, m egressPolicies, out, errOut io.Writer, scope string, set bool, o egressPolicyOptions) error {
	var (
		p   egress.ScopePolicy
		err error
	)
	if o.clear {
		if o.rules.given() {
			return core.Errorf(core.CodeBadFlag, "--clear cannot be combined with %s", strings.Replace(o.rules.names(), " and ", " or ", 1))
		}
		return runEgressPolicyClear(ctx, m, out, errOut, scope, o.format)
	}
	if set {
		r, err := o.rules.rules()
		if err != nil {
			return err
		}
		if _, err := m.SetPolicy(ctx, scope, r); err != nil {
			return err
		}
		p, _, err = m.Policy(ctx, scope)
		if err != nil {
			return err
		}
	} else {
		var ok bool
		p, ok, err = m.Policy(ctx, scope)
		if err != nil {
			return err
		}
		if !ok {
			return core.Errorf(core.CodeNotFound, "scope %s has no egress policy (set one with --allow, or run it with exec --network proxy)", scope)
		}
	}
	return writeFormatted(out, o.format, p, func() error {
		fmt.Fprintf(out, "scope:  %s\n", core.TermText(p.Scope))
		egPrintRules(out, p.Rules)
		return nil
	})
}

// egressClearJSON is `egress policy SCOPE --clear --format json`.
type egressClearJSON struct {
	Scope string `json:"scope"`
	// Existed: the scope had a policy.
	Existed bool `json:"existed"`
	// Removed: its policy and credential are gone (false while sandboxes
	// of the scope exist: the policy was emptied instead).
	Removed bool `json:"removed"`
	// Sandboxes are the scope's proxy-mode sandbox containers.
	Sandboxes []string `json:"sandboxes"`
}

func runEgressPolicyClear(ctx context.Context, m egressPolicies, out, errOut io.Writer, scope, format string) error {
	res, err := m.ClearPolicy(ctx, scope)
	if err != nil {
		return err
	}
	j := egressClearJSON{Scope: scope, Existed: res.Existed, Removed: res.Removed, Sandboxes: res.Sandboxes}
	if j.Sandboxes == nil {
		j.Sandboxes = []string{}
	}
	return writeFormatted(out, format, j, func() error {
		switch {
		case !res.Existed:
			fmt.Fprintf(out, "scope %s has no egress policy\n", scope)
		case res.Removed:
			fmt.Fprintf(out, "removed the egress policy of scope %s\n", scope)
		default:
			fmt.Fprintf(out, "scope %s: everything denied; its (empty) policy stays while its sandboxes hold its credential: %s\n", scope, egList(res.Sandboxes, ""))
			fmt.Fprintf(errOut, "docker sandbox: `docker sandbox rm %s`, then --clear again, removes the policy\n", scope)
		}
		return nil
	})
}
