package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
	"github.com/docker-sandbox/docker-sandbox/images"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

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

// egressManager returns the sidecar manager for the CLI's engine.
func egressManager(dockerCli command.Cli, c *config.Config) *egress.Manager {
	return &egress.Manager{Engine: dockerCli.Client(), Images: builder(dockerCli, c), Version: Version, HelperID: images.HelperID()}
}

type egressStartOptions struct {
	outbound   string
	pool       string
	subnetBits int
	hosts      []string
	noDNS      bool
	replace    bool
	format     string
	// given is set when any settings flag was given: without, the kept
	// settings (or the defaults) are used.
	given bool
}

func newEgressStartCommand(dockerCli command.Cli) *cobra.Command {
	var o egressStartOptions
	cmd := &cobra.Command{
		Use:   "start [OPTIONS]",
		Short: "Start the egress sidecar (idempotent; without settings, with the kept ones)",
		Example: `  docker sandbox egress start
  docker sandbox egress start --outbound-network corp-egress
  docker sandbox egress start --outbound-network lab --add-host pypi.lab=10.9.0.4 --no-dns
  docker sandbox egress start --replace                       # back to the defaults`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, f := range []string{"outbound-network", "subnet-pool", "subnet-size", "add-host", "no-dns"} {
				o.given = o.given || cmd.Flags().Changed(f)
			}
			return fail(dockerCli.Out(), o.format, runEgressStart(cmd.Context(), dockerCli, o))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.outbound, "outbound-network", "", "Network the sidecar reaches upstreams through (default: the engine's bridge)")
	f.StringVar(&o.pool, "subnet-pool", egress.DefaultPool.String(), "IPv4 range the scope networks' subnets are taken from")
	f.IntVar(&o.subnetBits, "subnet-size", egress.DefaultBits, "Prefix length of each scope network (16 to 28)")
	f.StringArrayVar(&o.hosts, "add-host", nil, "Static name for the proxy's resolver, NAME=IP[,IP] (repeatable)")
	f.BoolVar(&o.noDNS, "no-dns", false, "The proxy resolves only --add-host names (air-gapped networks, tests)")
	f.BoolVar(&o.replace, "replace", false, "Replace the kept settings with these (the sidecar is re-created; open connections end)")
	f.StringVar(&o.format, "format", "", "Output format: json or a Go template")
	return cmd
}

func runEgressStart(ctx context.Context, dockerCli command.Cli, o egressStartOptions) error {
	c, err := loadConfig()
	if err != nil {
		return err
	}
	pool, err := netip.ParsePrefix(o.pool)
	if err != nil {
		return core.Errorf(core.CodeBadFlag, "invalid --subnet-pool %q: use an IPv4 prefix such as 10.213.0.0/16", o.pool)
	}
	var hosts []string
	for _, h := range o.hosts {
		hosts = append(hosts, strings.Replace(h, ":", "=", 1)) // docker's NAME:IP works too
	}
	m := egressManager(dockerCli, c)
	if _, _, err := m.Start(ctx, egress.Settings{OutboundNetwork: o.outbound, Pool: pool, Bits: o.subnetBits, Hosts: hosts, NoDNS: o.noDNS}, o.given || o.replace, o.replace); err != nil {
		return err
	}
	st, err := m.Status(ctx)
	if err != nil {
		return err
	}
	return writeFormatted(dockerCli.Out(), o.format, st, func() error { return printEgressStatus(dockerCli.Out(), st) })
}

type egressStopOptions struct {
	rm     bool
	format string
}

// egressStopJSON is `egress stop --format json`.
type egressStopJSON struct {
	Stopped         bool     `json:"stopped"` // there was a sidecar, and it is stopped (or removed)
	Removed         bool     `json:"removed"` // with --rm
	NetworksRemoved []string `json:"networks_removed"`
}

func newEgressStopCommand(dockerCli command.Cli) *cobra.Command {
	var o egressStopOptions
	cmd := &cobra.Command{
		Use:   "stop [--rm]",
		Short: "Stop the egress sidecar (with --rm: remove it and the unused scope networks; policies and credentials stay)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fail(dockerCli.Out(), o.format, runEgressStop(cmd.Context(), dockerCli, o))
		},
	}
	cmd.Flags().BoolVar(&o.rm, "rm", false, "Remove the sidecar and the scope networks no sandbox uses")
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: json or a Go template")
	return cmd
}

func runEgressStop(ctx context.Context, dockerCli command.Cli, o egressStopOptions) error {
	c, err := loadConfig()
	if err != nil {
		return err
	}
	found, nets, err := egressManager(dockerCli, c).Stop(ctx, o.rm)
	if err != nil {
		return err
	}
	if nets == nil {
		nets = []string{}
	}
	j := egressStopJSON{Stopped: found, Removed: found && o.rm, NetworksRemoved: nets}
	return writeFormatted(dockerCli.Out(), o.format, j, func() error {
		switch {
		case found && o.rm:
			fmt.Fprintln(dockerCli.Out(), "removed the egress sidecar "+egress.SidecarName)
		case found:
			fmt.Fprintln(dockerCli.Out(), "stopped the egress sidecar "+egress.SidecarName)
		default:
			fmt.Fprintln(dockerCli.Err(), "docker sandbox: no egress sidecar")
		}
		for _, n := range nets {
			fmt.Fprintln(dockerCli.Out(), "removed network "+n)
		}
		return nil
	})
}

type egressStatusOptions struct{ format string }

func newEgressStatusCommand(dockerCli command.Cli) *cobra.Command {
	var o egressStatusOptions
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the egress sidecar, its networks, policies and counters",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fail(dockerCli.Out(), o.format, runEgressStatus(cmd.Context(), dockerCli, o))
		},
	}
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: json or a Go template")
	return cmd
}

func runEgressStatus(ctx context.Context, dockerCli command.Cli, o egressStatusOptions) error {
	c, err := loadConfig()
	if err != nil {
		return err
	}
	st, err := egressManager(dockerCli, c).Status(ctx)
	if err != nil {
		return err
	}
	return writeFormatted(dockerCli.Out(), o.format, st, func() error { return printEgressStatus(dockerCli.Out(), st) })
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
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tNETWORK\tSUBNET\tPROXY\tSANDBOXES\tALLOW\tPORTS\tCIDRS")
	seen := map[string]bool{}
	for _, n := range st.Networks {
		seen[n.Scope] = true
		p := pol[n.Scope]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", core.TermText(n.Scope), core.TermText(n.Name), n.Subnet, n.Proxy, n.Sandboxes, egList(p.Allow, "-"), egPorts(p.AllowPorts), egList(p.AllowCIDRs, "-"))
	}
	for _, p := range st.Policies {
		if !seen[p.Scope] {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t0\t%s\t%s\t%s\n", core.TermText(p.Scope), egList(p.Allow, "-"), egPorts(p.AllowPorts), egList(p.AllowCIDRs, "-"))
		}
	}
	return tw.Flush()
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

// egressRules builds a policy from --allow, --allow-port and --allow-cidr
// values, validated; the flag names are for the messages.
func egressRules(allow, ports, cidrs []string) (policy.Rules, error) {
	r := policy.Rules{Allow: allow, AllowCIDRs: cidrs}
	for _, p := range ports {
		for _, s := range strings.Split(p, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 || n > 65535 {
				return r, core.Errorf(core.CodeBadFlag, "invalid --allow-port %q: use a port from 1 to 65535", s)
			}
			r.AllowPorts = append(r.AllowPorts, n)
		}
	}
	n, err := r.Normalize()
	if err != nil {
		return r, core.Errorf(core.CodeBadFlag, "invalid egress policy: %v", err)
	}
	return n, nil
}

type egressPolicyOptions struct {
	allow  []string
	ports  []string
	cidrs  []string
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
			set := cmd.Flags().Changed("allow") || cmd.Flags().Changed("allow-port") || cmd.Flags().Changed("allow-cidr") || o.clear
			return fail(dockerCli.Out(), o.format, runEgressPolicy(cmd.Context(), dockerCli, args[0], set, o))
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.allow, "allow", nil, "Allow HOST: pypi.org, *.example.com (subdomains), * (any public host) (repeatable, comma-separated)")
	f.StringSliceVar(&o.ports, "allow-port", nil, "Allowed destination port (default 80 and 443) (repeatable)")
	f.StringSliceVar(&o.cidrs, "allow-cidr", nil, "Allowed address range, private ones included (repeatable)")
	f.BoolVar(&o.clear, "clear", false, "Remove the scope's policy and credential (while sandboxes of the scope exist: empty it, denying everything)")
	f.StringVar(&o.format, "format", "", "Output format: json or a Go template")
	return cmd
}

func runEgressPolicy(ctx context.Context, dockerCli command.Cli, scope string, set bool, o egressPolicyOptions) error {
	if err := core.ValidateName("scope", scope); err != nil {
		return err
	}
	c, err := loadConfig()
	if err != nil {
		return err
	}
	m := egressManager(dockerCli, c)
	var p egress.ScopePolicy
	if o.clear {
		if len(o.allow) > 0 || len(o.ports) > 0 || len(o.cidrs) > 0 {
			return core.Errorf(core.CodeBadFlag, "--clear cannot be combined with --allow, --allow-port or --allow-cidr")
		}
		return runEgressPolicyClear(ctx, dockerCli, m, scope, o.format)
	}
	if set {
		r, err := egressRules(o.allow, o.ports, o.cidrs)
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
	out := dockerCli.Out()
	return writeFormatted(out, o.format, p, func() error {
		fmt.Fprintf(out, "scope:  %s\n", core.TermText(p.Scope))
		fmt.Fprintf(out, "allow:  %s\n", egList(p.Allow, "(nothing)"))
		fmt.Fprintf(out, "ports:  %s\n", egPorts(p.AllowPorts))
		fmt.Fprintf(out, "cidrs:  %s\n", egList(p.AllowCIDRs, "(none)"))
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

func runEgressPolicyClear(ctx context.Context, dockerCli command.Cli, m *egress.Manager, scope, format string) error {
	res, err := m.ClearPolicy(ctx, scope)
	if err != nil {
		return err
	}
	j := egressClearJSON{Scope: scope, Existed: res.Existed, Removed: res.Removed, Sandboxes: res.Sandboxes}
	if j.Sandboxes == nil {
		j.Sandboxes = []string{}
	}
	out := dockerCli.Out()
	return writeFormatted(out, format, j, func() error {
		switch {
		case !res.Existed:
			fmt.Fprintf(out, "scope %s has no egress policy\n", scope)
		case res.Removed:
			fmt.Fprintf(out, "removed the egress policy of scope %s\n", scope)
		default:
			fmt.Fprintf(out, "scope %s: everything denied; its (empty) policy stays while its sandboxes hold its credential: %s\n", scope, egList(res.Sandboxes, ""))
			fmt.Fprintf(dockerCli.Err(), "docker sandbox: `docker sandbox rm %s`, then --clear again, removes the policy\n", scope)
		}
		return nil
	})
}

// egressPolicyNote is the line `rm SCOPE` prints when the scope's egress
// policy stays in the sidecar (it is configuration, like a [scope.NAME]
// table), or "" when it has none (or there is no sidecar container to
// read it from). Nothing is started or run in the sidecar.
func egressPolicyNote(ctx context.Context, m *egress.Manager, scope string) string {
	has, known, err := m.StoredPolicy(ctx, scope)
	if err != nil || !known || !has {
		return ""
	}
	return fmt.Sprintf("the egress policy of scope %s stays in the sidecar (`docker sandbox egress policy %s --clear` removes it)", scope, scope)
}
