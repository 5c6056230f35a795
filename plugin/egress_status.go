package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress"
)

type egressStatusOptions struct{ format string }

// egressStatuser is what egress status asks of the sidecar manager.
type egressStatuser interface {
	Status(ctx context.Context) (egress.Status, error)
}

func newEgressStatusCommand(dockerCli command.Cli) *cobra.Command {
	var o egressStatusOptions
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the egress sidecar, its networks, policies and counters",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := dockerCli.Out()
			c, err := loadConfig()
			if err != nil {
				return fail(out, o.format, err)
			}
			return fail(out, o.format, runEgressStatus(cmd.Context(), egressManager(dockerCli, c), out, o))
		},
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().StringVar(&o.format, "format", "", "Output format: json or a Go template (fields: the JSON names, {{.counters.allowed}})")
	return cmd
}

func runEgressStatus(ctx context.Context, m egressStatuser, out io.Writer, o egressStatusOptions) error {
	st, err := m.Status(ctx)
	if err != nil {
		return err
	}
	return writeFormatted(out, o.format, st, func() error { return printEgressStatus(out, st) })
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
	},
	table: `table {{.Scope}}\t{{.Network}}\t{{.Subnet}}\t{{.Proxy}}\t{{.Sandboxes}}\t{{.Allow}}\t{{.Ports}}\t{{.CIDRs}}`,
}
