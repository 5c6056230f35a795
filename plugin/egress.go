package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

// The egress group, and what its verbs share: how policies, lists and the
// sidecar's status print, and the policy flags (egressRuleFlags: exec
// takes them too).

func newEgressCommand(dockerCli command.Cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "egress",
		Short: "Manage the egress proxy sidecar and the per-scope allowlists",
		Long: `Proxy-mode sandboxes (exec --network proxy, or --allow HOST) reach the network only
through one sidecar proxy per engine, under their scope's allowlist.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newEgressStartCommand(dockerCli), newEgressStopCommand(dockerCli), newEgressStatusCommand(dockerCli),
		newEgressPolicyCommand(dockerCli), newEgressLogsCommand(dockerCli))
	return cmd
}

// egList joins a list for a terminal, each item quoted when it holds
// control characters (policies and hosts can come from a sandbox's
// requests or a checked-out repository's config file).
func egList(l []string, empty string) string {
	if len(l) == 0 {
		return empty
	}
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = core.TermText(s)
	}
	return strings.Join(q, ",")
}

func egPorts(ps []int) string {
	if len(ps) == 0 {
		return "80,443"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// egressRuleFlags are the policy flags exec and egress policy share: one
// place for a new rule kind (its flag, its check, its place in the rules).
type egressRuleFlags struct {
	allow []string
	ports []string
	cidrs []string
	deny  []string
}

// add registers the flags; forExec: exec's help (each implies --network
// proxy).
func (r *egressRuleFlags) add(f *pflag.FlagSet, forExec bool) {
	if forExec {
		f.StringSliceVar(&r.allow, "allow", nil, "Allow egress to HOST: pypi.org, *.example.com, * (implies --network proxy; repeatable)")
		f.StringSliceVar(&r.ports, "allow-port", nil, "Allowed destination port (default 80 and 443; implies --network proxy; repeatable)")
		f.StringSliceVar(&r.cidrs, "allow-cidr", nil, "Allowed address range, private ones included (implies --network proxy; repeatable)")
		f.StringSliceVar(&r.deny, "deny", nil, "Refuse egress to HOST even when an --allow matches: *.internal.example (implies --network proxy; repeatable)")
		return
	}
	f.StringSliceVar(&r.allow, "allow", nil, "Allow HOST: pypi.org, *.example.com (subdomains), * (any public host) (repeatable, comma-separated)")
	f.StringSliceVar(&r.ports, "allow-port", nil, "Allowed destination port (default 80 and 443) (repeatable)")
	f.StringSliceVar(&r.cidrs, "allow-cidr", nil, "Allowed address range, private ones included (repeatable)")
	f.StringSliceVar(&r.deny, "deny", nil, "Refuse HOST even when an --allow matches: *.internal.example (repeatable, comma-separated)")
}

// names lists the flags, for messages.
func (r *egressRuleFlags) names() string { return "--allow, --allow-port, --allow-cidr and --deny" }

// given reports whether any rule flag has a value.
func (r *egressRuleFlags) given() bool {
	return len(r.allow) > 0 || len(r.ports) > 0 || len(r.cidrs) > 0 || len(r.deny) > 0
}

// changed reports whether any rule flag was set on the command line.
func (r *egressRuleFlags) changed(cmd *cobra.Command) bool {
	f := cmd.Flags()
	return f.Changed("allow") || f.Changed("allow-port") || f.Changed("allow-cidr") || f.Changed("deny")
}

// rules builds the policy the flags give, validated.
func (r *egressRuleFlags) rules() (policy.Rules, error) {
	out := policy.Rules{Allow: r.allow, AllowCIDRs: r.cidrs, Deny: r.deny}
	for _, p := range r.ports {
		for _, s := range strings.Split(p, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 || n > 65535 {
				return out, core.Errorf(core.CodeBadFlag, "invalid --allow-port %q: use a port from 1 to 65535", s)
			}
			out.AllowPorts = append(out.AllowPorts, n)
		}
	}
	n, err := out.Normalize()
	if err != nil {
		return out, core.Errorf(core.CodeBadFlag, "invalid egress policy: %v", err)
	}
	return n, nil
}

// scopeRules is the policy of a [scope.NAME] table.
func scopeRules(sp config.ScopePolicy) policy.Rules {
	return policy.Rules{Allow: sp.Allow, AllowPorts: sp.AllowPorts, AllowCIDRs: sp.AllowCIDRs, Deny: sp.Deny}
}

// egPrintRules prints a policy's lists, one a line, after "scope:".
func egPrintRules(out io.Writer, r policy.Rules) {
	fmt.Fprintf(out, "allow:  %s\n", egList(r.Allow, "(nothing)"))
	fmt.Fprintf(out, "ports:  %s\n", egPorts(r.AllowPorts))
	fmt.Fprintf(out, "cidrs:  %s\n", egList(r.AllowCIDRs, "(none)"))
	fmt.Fprintf(out, "deny:   %s\n", egList(r.Deny, "(none)"))
}

// execEgress validates exec's --network, --allow, --allow-port and
// --allow-cidr: --allow and friends imply --network proxy (set in
// c.Network); the Docker modes that share a namespace are refused. It
// returns the policy the flags give, or nil.
func execEgress(cmd *cobra.Command, c *config.Config, flags egressRuleFlags) (*policy.Rules, error) {
	var rules *policy.Rules
	if flags.given() {
		if cmd.Flags().Changed("network") && c.Network != "proxy" {
			return nil, core.Errorf(core.CodeBadFlag, "%s need --network proxy, not --network %s", flags.names(), c.Network)
		}
		c.Network = "proxy"
		r, err := flags.rules()
		if err != nil {
			return nil, err
		}
		rules = &r
	}
	switch m := c.Network; {
	case m == "none" || m == "proxy":
	case m == "host" || strings.HasPrefix(m, "container:") || m == "default":
		return nil, core.Errorf(core.CodeBadFlag, "--network %s is refused: use none, proxy (the egress proxy) or the name of a Docker network", m)
	case strings.ContainsAny(m, " \t/\\:"):
		return nil, core.Errorf(core.CodeBadFlag, "invalid --network %q: use none, proxy or the name of a Docker network", m)
	}
	return rules, nil
}

// joinNetwork readies the network of exec's sandbox: a named network is
// checked (and the user warned that no policy applies to it); in proxy
// mode the Manager's egress side attaches it, with rules (from execEgress,
// else the scope's [scope.NAME] table, else the stored policy). Undo with
// Failed on the result when the run fails.
func joinNetwork(ctx context.Context, dockerCli command.Cli, m *sbexec.Manager, c *config.Config, spec *sbexec.Spec, rules *policy.Rules) (*sbexec.Joined, error) {
	switch spec.Network {
	case "none":
		return nil, nil
	case "proxy":
	default:
		if err := checkNetwork(ctx, engineAPI(dockerCli), spec.Network, c.Source("network")); err != nil {
			return nil, err
		}
		fmt.Fprintf(dockerCli.Err(), "docker sandbox: warning: --network %s: the sandbox gets that network's access as it is; no egress policy applies (use --network proxy for allowlists)\n", spec.Network)
		return nil, nil
	}
	if rules == nil {
		if sp, ok := c.Scopes[spec.Scope]; ok {
			r, err := scopeRules(sp).Normalize()
			if err != nil {
				return nil, core.Errorf(core.CodeBadConfig, "%s: [scope.%s]: %v", sp.Source, spec.Scope, err)
			}
			rules = &r
		}
	}
	j, err := m.AttachNetwork(ctx, spec, rules)
	if err != nil {
		return nil, err
	}
	if j.Empty() {
		fmt.Fprintf(dockerCli.Err(), "docker sandbox: warning: scope %s has an empty egress policy: every connection is refused (give --allow HOST, or `docker sandbox egress policy %s --allow HOST`)\n", spec.Scope, spec.Scope)
	}
	return j, nil
}

// egressStatuser is what egress status and start ask of the sidecar
// manager.
type egressStatuser interface {
	Status(ctx context.Context) (egress.Status, error)
}

// egCounters is the part of the proxy's counters the human status shows.
type egCounters struct {
	Allowed       int64 `json:"allowed"`
	Denied        int64 `json:"denied"`
	ActiveTunnels int   `json:"active_tunnels"`
}

func printEgressStatus(out io.Writer, st egress.Status) error {
	if st.State == "absent" {
		fmt.Fprintln(out, "egress sidecar: not running (docker sandbox egress start, or any exec --network proxy, starts it)")
	} else {
		fmt.Fprintf(out, "egress sidecar: %s (%s, %s, version %s)\n", core.TermText(st.State), st.Container, core.TermText(st.Image), core.TermText(st.Version))
		fmt.Fprintf(out, "outbound:       %s %s\n", core.TermText(st.OutboundNetwork), st.OutboundAddress)
		fmt.Fprintf(out, "scope subnets:  /%d from %s\n", st.SubnetBits, st.SubnetPool)
		if len(st.Hosts) > 0 {
			fmt.Fprintf(out, "static hosts:   %s\n", egList(st.Hosts, ""))
		}
		if st.NoDNS {
			fmt.Fprintln(out, "dns:            off (static hosts only)")
		}
		var ct egCounters
		if json.Unmarshal(st.Counters, &ct) == nil && string(st.Counters) != "null" {
			fmt.Fprintf(out, "decisions:      %d allowed, %d denied, %d open connections\n", ct.Allowed, ct.Denied, ct.ActiveTunnels)
		}
	}
	if len(st.Networks) == 0 && len(st.Policies) == 0 {
		return nil
	}
	pol := map[string]egress.ScopePolicy{}
	for _, p := range st.Policies {
		pol[p.Scope] = p
	}
	var rows []egressScopeRow
	seen := map[string]bool{}
	for _, n := range st.Networks {
		seen[n.Scope] = true
		rows = append(rows, egressScopeRow{net: &n, policy: pol[n.Scope]})
	}
	for _, p := range st.Policies {
		if !seen[p.Scope] {
			rows = append(rows, egressScopeRow{policy: p})
		}
	}
	fmt.Fprintln(out)
	return egressScopesFormat.write(out, "", false, rows)
}

// egressScopeRow is a row of egress status's table: a scope's network (nil
// for a scope with a policy and no network) and its policy.
type egressScopeRow struct {
	net    *egress.NetworkStatus
	policy egress.ScopePolicy
}

// egressScopesFormat is egress status's table; scopes, network names and
// the policy's items are quoted for the terminal (they can come from a
// checked-out repository's config file).
var egressScopesFormat = listFormat[egressScopeRow]{
	columns: []column[egressScopeRow]{
		{"Scope", "SCOPE", func(r egressScopeRow) string {
			if r.net != nil {
				return core.TermText(r.net.Scope)
			}
			return core.TermText(r.policy.Scope)
		}},
		{"Network", "NETWORK", func(r egressScopeRow) string {
			if r.net == nil {
				return "-"
			}
			return core.TermText(r.net.Name)
		}},
		{"Subnet", "SUBNET", func(r egressScopeRow) string {
			if r.net == nil {
				return "-"
			}
			return core.TermText(r.net.Subnet)
		}},
		{"Proxy", "PROXY", func(r egressScopeRow) string {
			if r.net == nil {
				return "-"
			}
			return core.TermText(r.net.Proxy)
		}},
		{"Sandboxes", "SANDBOXES", func(r egressScopeRow) string {
			if r.net == nil {
				return "0"
			}
			return strconv.Itoa(r.net.Sandboxes)
		}},
		{"Allow", "ALLOW", func(r egressScopeRow) string { return egList(r.policy.Allow, "-") }},
		{"Ports", "PORTS", func(r egressScopeRow) string { return egPorts(r.policy.AllowPorts) }},
		{"CIDRs", "CIDRS", func(r egressScopeRow) string { return egList(r.policy.AllowCIDRs, "-") }},
		{"Deny", "DENY", func(r egressScopeRow) string { return egList(r.policy.Deny, "-") }},
	},
	table: `table {{.Scope}}\t{{.Network}}\t{{.Subnet}}\t{{.Proxy}}\t{{.Sandboxes}}\t{{.Allow}}\t{{.Ports}}\t{{.CIDRs}}\t{{.Deny}}`,
}
