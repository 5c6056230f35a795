package egress

import (
	"context"
	"encoding/json"
	"io"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/network"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
	"github.com/docker-sandbox/docker-sandbox/egress/proxy"
)

// Status is `egress status --format json`.
type Status struct {
	Running         bool     `json:"running"`
	State           string   `json:"state"` // "running", "exited", ..., "absent"
	Container       string   `json:"container"`
	Image           string   `json:"image"`
	Version         string   `json:"version"`
	OutboundNetwork string   `json:"outbound_network"`
	OutboundAddress string   `json:"outbound_address"`
	SubnetPool      string   `json:"subnet_pool"`
	SubnetBits      int      `json:"subnet_bits"`
	Hosts           []string `json:"hosts"`
	NoDNS           bool     `json:"no_dns"`
	// Networks are the scope networks.
	Networks []NetworkStatus `json:"networks"`
	// Policies are the scopes' policies (no credentials).
	Policies []ScopePolicy `json:"policies"`
	// Counters are the proxy's since it started (null when not running).
	Counters json.RawMessage `json:"counters"`
}

// NetworkStatus is one scope network.
type NetworkStatus struct {
	Scope     string `json:"scope"`
	Name      string `json:"name"`
	Subnet    string `json:"subnet"`
	Proxy     string `json:"proxy"`     // the sidecar's address:port on it
	Sandboxes int    `json:"sandboxes"` // containers on it besides the sidecar
	Connected bool   `json:"sidecar_connected"`
}

// ScopePolicy is one scope's policy.
type ScopePolicy struct {
	Scope string `json:"scope"`
	policy.Rules
	Updated time.Time `json:"updated"`
}

// PolicyOf turns a policy file entry into its JSON view.
func PolicyOf(name string, s policy.Scope) ScopePolicy {
	return ScopePolicy{Scope: name, Rules: s.Rules.Lists(), Updated: s.Updated}
}

// Status reports the sidecar, its networks, policies and counters.
func (m *Manager) Status(ctx context.Context) (Status, error) {
	st := Status{State: "absent", Networks: []NetworkStatus{}, Policies: []ScopePolicy{}, Hosts: []string{}, Counters: json.RawMessage("null")}
	c, err := m.sidecar(ctx)
	if err != nil {
		return st, err
	}
	if c != nil {
		s := settingsFromLabels(c.Config.Labels)
		st.Running = running(c)
		if c.State != nil {
			st.State = c.State.Status
		}
		st.Container = c.ID
		if len(st.Container) > 12 {
			st.Container = st.Container[:12]
		}
		st.Image = c.Config.Image
		st.Version = c.Config.Labels[core.LabelVersion]
		st.OutboundNetwork, st.SubnetPool, st.SubnetBits, st.NoDNS = s.OutboundNetwork, s.Pool.String(), s.Bits, s.NoDNS
		if s.Hosts != nil {
			st.Hosts = s.Hosts
		}
		if c.NetworkSettings != nil {
			if ep := c.NetworkSettings.Networks[s.OutboundNetwork]; ep != nil {
				st.OutboundAddress = ep.IPAddress
			}
		}
	}
	nets, err := m.scopeNetworks(ctx)
	if err != nil {
		return st, err
	}
	for _, n := range nets {
		full, err := m.Engine.NetworkInspect(ctx, n.ID, network.InspectOptions{})
		if err != nil {
			continue
		}
		ns := NetworkStatus{Scope: full.Labels[core.LabelScope], Name: full.Name}
		if sub, ok := subnetOf(full); ok {
			ns.Subnet = sub.String()
			if lay, err := LayoutOf(sub); err == nil {
				ns.Proxy = netip.AddrPortFrom(lay.Proxy, ProxyPort).String()
			}
		}
		for id := range full.Containers {
			if c != nil && id == c.ID {
				ns.Connected = true
			} else {
				ns.Sandboxes++
			}
		}
		st.Networks = append(st.Networks, ns)
	}
	sort.Slice(st.Networks, func(i, j int) bool { return st.Networks[i].Scope < st.Networks[j].Scope })
	if st.Running {
		if err := m.refresh(ctx, c, settingsFromLabels(c.Config.Labels)); err != nil {
			return st, err
		}
		state, err := m.ReadState(ctx, c)
		if err != nil {
			return st, err
		}
		for _, name := range state.Policy.Names() {
			st.Policies = append(st.Policies, PolicyOf(name, state.Policy.Scopes[name]))
		}
		if len(state.Stats) > 0 {
			st.Counters = state.Stats
		}
	}
	return st, nil
}

// Policy returns a scope's policy; ok is false when the scope has none.
func (m *Manager) Policy(ctx context.Context, scope string) (ScopePolicy, bool, error) {
	c, err := m.RunningSidecar(ctx)
	if err != nil {
		return ScopePolicy{}, false, err
	}
	st, err := m.ReadState(ctx, c)
	if err != nil {
		return ScopePolicy{}, false, err
	}
	s, ok := st.Policy.Scopes[scope]
	return PolicyOf(scope, s), ok, nil
}

// Logs streams the decision log's lines to out (the last tail lines, -1
// for all; with follow, new lines until ctx ends). A stopped sidecar is not
// started: its log is read from the container as it is (follow then is
// egress_not_running: nothing would come).
func (m *Manager) Logs(ctx context.Context, follow bool, tail int, out io.Writer) error {
	c, err := m.sidecar(ctx)
	if err != nil {
		return err
	}
	if c != nil && !running(c) {
		if follow {
			return core.Errorf(CodeEgressNotRunning, "the egress sidecar is stopped: nothing would follow (start it with `docker sandbox egress start`, or drop -f to read its log as it is)")
		}
		return m.stoppedLogs(ctx, c.ID, tail, out)
	}
	c, err = m.RunningSidecar(ctx)
	if err != nil {
		return err
	}
	args := proxy.LogsArgs{File: LogFile, Tail: tail, Follow: follow}
	var stdin io.Reader
	if follow {
		// The helper follows until its stdin ends: keep it open until ctx
		// ends, then close it so that the helper exits.
		pr, pw := io.Pipe()
		stop := context.AfterFunc(ctx, func() { pw.Close() })
		defer stop()
		stdin = pr
	}
	var errb strings.Builder
	code, err := m.helperExec(ctx, c.ID, args.Argv(), stdin, out, &errb)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if code != 0 {
		return core.Errorf(CodeEgressUnavailable, "the egress sidecar could not read its log: %s", strings.TrimSpace(errb.String()))
	}
	return nil
}
