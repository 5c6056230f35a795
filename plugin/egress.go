package plugin

import (
	"strconv"
	"strings"

	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
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
