package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress"
)

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
