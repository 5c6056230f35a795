package plugin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/cli/cli/command"
	"github.com/docker/docker/api/types/container"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

// egExecPlan is exec's network choice: none, proxy (with the policy the
// call sets, if any) or a named Docker network.
type egExecPlan struct {
	mode string
	// m and netCreated: the scope network this call made, to remove if
	// the run fails before a sandbox uses it.
	m          *egress.Manager
	netCreated bool
	// rules replace the scope's policy when set (flags, or the scope's
	// [scope.NAME] table); nil keeps the stored policy.
	rules *policy.Rules
}

// egPlanExec validates --network, --allow, --allow-port and --allow-cidr
// (--allow and friends imply --network proxy).
func egPlanExec(cmd *cobra.Command, c *config.Config, allow, ports, cidrs []string) (*egExecPlan, error) {
	p := &egExecPlan{mode: c.Network}
	if len(allow) > 0 || len(ports) > 0 || len(cidrs) > 0 {
		if cmd.Flags().Changed("network") && c.Network != "proxy" {
			return nil, core.Errorf(core.CodeBadFlag, "--allow, --allow-port and --allow-cidr need --network proxy, not --network %s", c.Network)
		}
		p.mode = "proxy"
		r, err := egressRules(allow, ports, cidrs)
		if err != nil {
			return nil, err
		}
		p.rules = &r
	}
	switch m := p.mode; {
	case m == "none" || m == "proxy":
	case m == "host" || strings.HasPrefix(m, "container:") || m == "default":
		return nil, core.Errorf(core.CodeBadFlag, "--network %s is refused: use none, proxy (the egress proxy) or the name of a Docker network", m)
	case strings.ContainsAny(m, " \t/\\:"):
		return nil, core.Errorf(core.CodeBadFlag, "invalid --network %q: use none, proxy or the name of a Docker network", m)
	}
	return p, nil
}

// apply sets the spec's network for the plan; in proxy mode it starts the
// sidecar if needed, makes the scope's network and credential, and sets the
// scope's policy when this call gives one.
func (p *egExecPlan) apply(ctx context.Context, dockerCli command.Cli, c *config.Config, spec *sbexec.Spec) error {
	spec.Network = p.mode
	switch p.mode {
	case "none":
		return nil
	case "proxy":
	default:
		if err := checkNetwork(ctx, dockerCli.Client(), p.mode, c.Source("network")); err != nil {
			return err
		}
		fmt.Fprintf(dockerCli.Err(), "docker sandbox: warning: --network %s: the sandbox gets that network's access as it is; no egress policy applies (use --network proxy for allowlists)\n", p.mode)
		return nil
	}
	rules := p.rules
	if rules == nil {
		if sp, ok := c.Scopes[spec.Scope]; ok {
			r, err := policy.Rules{Allow: sp.Allow, AllowPorts: sp.AllowPorts, AllowCIDRs: sp.AllowCIDRs}.Normalize()
			if err != nil {
				return core.Errorf(core.CodeBadConfig, "%s: [scope.%s]: %v", sp.Source, spec.Scope, err)
			}
			rules = &r
		}
	}
	// The proxy URL of the target's existing sandbox, when the container of
	// that name is that sandbox (name, labels and kind: a look-alike's
	// environment is never reused).
	known := ""
	if ctr, err := dockerCli.Client().ContainerInspect(ctx, spec.ContainerName()); err == nil && egIsSandboxOf(ctr, spec.Target) {
		known = egress.ProxyURLFrom(ctr.Config.Env)
	}
	p.m = egressManager(dockerCli, c)
	att, err := p.m.Attach(ctx, spec.Scope, rules, known)
	if err != nil {
		return err
	}
	p.netCreated = att.NetworkCreated
	spec.NetworkAttach, spec.DNS, spec.DNSOptions, spec.Env = att.Network, att.DNS, att.DNSOptions, att.Env
	if !att.Known && len(att.Rules.Allow) == 0 && len(att.Rules.AllowCIDRs) == 0 {
		fmt.Fprintf(dockerCli.Err(), "docker sandbox: warning: scope %s has an empty egress policy: every connection is refused (give --allow HOST, or `docker sandbox egress policy %s --allow HOST`)\n", spec.Scope, spec.Scope)
	}
	return nil
}

// failed undoes what apply made when the run failed without creating the
// sandbox: a failed call leaves no network behind (the scope's credential
// and policy stay, as data).
func (p *egExecPlan) failed(ctx context.Context, spec sbexec.Spec, created bool) {
	if p == nil || !p.netCreated || created || p.m == nil {
		return
	}
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = p.m.RemoveScope(bg, spec.Scope, false)
}

// egIsSandboxOf reports whether c is the sandbox container of t.
func egIsSandboxOf(c container.InspectResponse, t core.Target) bool {
	if c.ContainerJSONBase == nil || c.Config == nil {
		return false
	}
	got, ok := core.ParseContainerName(c.Name)
	l := c.Config.Labels
	return ok && got == t && l[core.LabelManaged] == "true" && l[core.LabelKind] == core.KindSandbox &&
		l[core.LabelScope] == t.Scope && l[core.LabelSession] == t.Session
}
