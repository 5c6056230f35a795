package plugin

import (
	"context"
	"io"
	"net/netip"
	"strings"

	"github.com/docker/cli/cli/command"
	"github.com/docker/docker/api/types/container"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress"
)

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
			out := dockerCli.Out()
			c, err := loadConfig()
			if err != nil {
				return fail(out, o.format, err)
			}
			return fail(out, o.format, runEgressStart(cmd.Context(), egressManager(dockerCli, c), out, o))
		},
		ValidArgsFunction: cobra.NoFileCompletions,
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

// egressStarter is what egress start asks of the sidecar manager.
type egressStarter interface {
	Start(ctx context.Context, s egress.Settings, given, replace bool) (*container.InspectResponse, bool, error)
	egressStatuser
}

func runEgressStart(ctx context.Context, m egressStarter, out io.Writer, o egressStartOptions) error {
	pool, err := netip.ParsePrefix(o.pool)
	if err != nil {
		return core.Errorf(core.CodeBadFlag, "invalid --subnet-pool %q: use an IPv4 prefix such as 10.213.0.0/16", o.pool)
	}
	var hosts []string
	for _, h := range o.hosts {
		hosts = append(hosts, strings.Replace(h, ":", "=", 1)) // docker's NAME:IP works too
	}
	if _, _, err := m.Start(ctx, egress.Settings{OutboundNetwork: o.outbound, Pool: pool, Bits: o.subnetBits, Hosts: hosts, NoDNS: o.noDNS}, o.given || o.replace, o.replace); err != nil {
		return err
	}
	st, err := m.Status(ctx)
	if err != nil {
		return err
	}
	return writeFormatted(out, o.format, st, func() error { return printEgressStatus(out, st) })
}
