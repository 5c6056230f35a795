package egress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/pkg/stdcopy"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/docker-sandbox/docker-sandbox/egress/policy"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// Engine is the part of the Engine API this package uses.
type Engine interface {
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, container string, options container.StartOptions) error
	ContainerRemove(ctx context.Context, container string, options container.RemoveOptions) error
	ContainerStop(ctx context.Context, container string, options container.StopOptions) error
	ContainerInspect(ctx context.Context, container string) (container.InspectResponse, error)
	ContainerExecCreate(ctx context.Context, container string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecAttach(ctx context.Context, execID string, config container.ExecAttachOptions) (types.HijackedResponse, error)
	ContainerExecInspect(ctx context.Context, execID string) (container.ExecInspect, error)
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	NetworkInspect(ctx context.Context, networkID string, options network.InspectOptions) (network.Inspect, error)
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkConnect(ctx context.Context, networkID, containerID string, config *network.EndpointSettings) error
	NetworkRemove(ctx context.Context, networkID string) error
	NetworkDisconnect(ctx context.Context, networkID, containerID string, force bool) error
	Info(ctx context.Context) (system.Info, error)
}

// Images provides the helper image (implemented by package images).
type Images interface {
	EnsureHelper(ctx context.Context, arch string, readable bool) (ref, volume string, err error)
}

// Manager runs the sidecar and the scope networks on one engine.
type Manager struct {
	Engine   Engine
	Images   Images
	Version  string
	HelperID string
}

// Error codes of this package (see exec/errors.go).
const (
	CodeEgressNotRunning  = sbexec.CodeEgressNotRunning
	CodeEgressMismatch    = sbexec.CodeEgressMismatch
	CodeEgressUnavailable = sbexec.CodeEgressUnavailable
)

func notFound(err error) bool { return cerrdefs.IsNotFound(err) }
func conflict(err error) bool { return cerrdefs.IsConflict(err) }

// sidecar is the inspected sidecar, or nil.
func (m *Manager) sidecar(ctx context.Context) (*container.InspectResponse, error) {
	c, err := m.Engine.ContainerInspect(ctx, SidecarName)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, sbexec.EngineError(err, "cannot inspect the egress sidecar")
	}
	if c.Config == nil || c.Config.Labels[sbexec.LabelKind] != KindSidecar {
		return nil, sbexec.Errorf(sbexec.CodeEngineError, "a container named %s exists and is not the egress sidecar of docker sandbox: remove or rename it", SidecarName)
	}
	return &c, nil
}

func running(c *container.InspectResponse) bool {
	return c != nil && c.State != nil && c.State.Running
}

// Start makes the sidecar run with settings s. It is idempotent: a running
// sidecar with the same settings is left alone; one with other settings is
// an error (stop it first: the sandboxes keep their networks and
// credentials).
func (m *Manager) Start(ctx context.Context, s Settings) (*container.InspectResponse, bool, error) {
	s, err := s.Normalized()
	if err != nil {
		return nil, false, err
	}
	c, err := m.sidecar(ctx)
	if err != nil {
		return nil, false, err
	}
	if c != nil {
		have := settingsFromLabels(c.Config.Labels)
		switch {
		case c.Config.Labels[LabelSettings] == s.Hash() && running(c):
			return c, false, m.connectAll(ctx, c, have)
		case c.Config.Labels[LabelSettings] == s.Hash():
			// Stopped: start it as it is.
		case running(c):
			return nil, false, sbexec.Errorf(CodeEgressMismatch, "the egress sidecar runs with other settings (%s) than asked (%s): run `docker sandbox egress stop` first (sandboxes keep their networks and credentials)",
				have.Describe(), s.Describe())
		default:
			// Stopped with other settings: replace it.
			if err := m.Engine.ContainerRemove(ctx, SidecarName, container.RemoveOptions{Force: true}); err != nil && !notFound(err) && !conflict(err) {
				return nil, false, sbexec.EngineError(err, "cannot remove the stopped egress sidecar")
			}
			m.waitGone(ctx)
		}
	}
	return m.ensure(ctx, &s)
}

// Ensure makes the sidecar run: as it is when it exists, else created with
// default settings (a proxy-mode exec starts the sidecar if needed).
func (m *Manager) Ensure(ctx context.Context) (*container.InspectResponse, Settings, error) {
	c, err := m.sidecar(ctx)
	if err != nil {
		return nil, Settings{}, err
	}
	if running(c) {
		return c, settingsFromLabels(c.Config.Labels), nil
	}
	var s *Settings
	if c != nil {
		have := settingsFromLabels(c.Config.Labels)
		s = &have
	}
	c, _, err = m.ensure(ctx, s)
	if err != nil {
		return nil, Settings{}, err
	}
	return c, settingsFromLabels(c.Config.Labels), nil
}

// ensure starts the existing sidecar, or creates it with s (nil: defaults).
func (m *Manager) ensure(ctx context.Context, s *Settings) (*container.InspectResponse, bool, error) {
	created, started := false, false
	deadline := time.Now().Add(60 * time.Second)
	for attempt := 0; ; attempt++ {
		c, err := m.sidecar(ctx)
		if err != nil {
			return nil, false, err
		}
		if c == nil {
			set := Settings{}
			if s != nil {
				set = *s
			}
			if set, err = set.Normalized(); err != nil {
				return nil, false, err
			}
			err := m.create(ctx, set)
			switch {
			case err == nil:
				created = true
			case conflict(err):
				// Another call is creating it.
				started = true // and it may not listen yet: wait too
			default:
				return nil, false, err
			}
		} else if !running(c) {
			err := m.Engine.ContainerStart(ctx, SidecarName, container.StartOptions{})
			switch {
			case err == nil || conflict(err) || strings.Contains(err.Error(), "already"):
				started = true
			case notFound(err) || strings.Contains(err.Error(), "network"):
				// One of its networks was removed while it was stopped:
				// make it again from its settings (they are in its labels).
				set := settingsFromLabels(c.Config.Labels)
				s = &set
				if err := m.Engine.ContainerRemove(ctx, SidecarName, container.RemoveOptions{Force: true}); err != nil && !notFound(err) && !conflict(err) {
					return nil, false, sbexec.EngineError(err, "cannot replace the egress sidecar")
				}
				m.waitGone(ctx)
			default:
				return nil, false, sbexec.EngineError(err, "cannot start the egress sidecar")
			}
		}
		c, err = m.sidecar(ctx)
		if err != nil {
			return nil, false, err
		}
		if running(c) {
			if err := m.connectAll(ctx, c, settingsFromLabels(c.Config.Labels)); err != nil {
				return nil, false, err
			}
			if created || started {
				// Running is not listening yet: wait for the proxy, so
				// that the caller's first request does not race it.
				var errb bytes.Buffer
				code, err := m.helperExec(ctx, []string{"proxy", "wait", "--addr", "127.0.0.1:" + strconv.Itoa(ProxyPort)}, nil, nil, &errb)
				if err != nil {
					return nil, false, err
				}
				if code != 0 {
					return nil, false, sbexec.Errorf(CodeEgressUnavailable, "the egress proxy did not start listening: %s (see `docker logs %s`)", strings.TrimSpace(errb.String()), SidecarName)
				}
			}
			c, err = m.sidecar(ctx)
			if err != nil || c == nil {
				return nil, false, sbexec.Errorf(sbexec.CodeEngineError, "the egress sidecar disappeared while starting")
			}
			return c, created, nil
		}
		if c != nil && c.State != nil && c.State.Status == "exited" && attempt > 2 {
			return nil, false, sbexec.Errorf(CodeEgressUnavailable, "the egress sidecar exits right after starting (exit code %d): see `docker logs %s`", c.State.ExitCode, SidecarName)
		}
		if time.Now().After(deadline) {
			return nil, false, sbexec.Errorf(CodeEgressUnavailable, "the egress sidecar did not start within 60s")
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(time.Duration(50*(attempt+1)) * time.Millisecond):
		}
	}
}

// create makes the sidecar container and starts it.
func (m *Manager) create(ctx context.Context, s Settings) error {
	out, err := m.Engine.NetworkInspect(ctx, s.OutboundNetwork, network.InspectOptions{})
	if err != nil {
		if notFound(err) {
			return sbexec.Errorf(sbexec.CodeBadFlag, "the outbound network %q does not exist (create it, or leave --outbound-network out to use the engine's default bridge)", s.OutboundNetwork)
		}
		return sbexec.EngineError(err, "cannot inspect the outbound network "+s.OutboundNetwork)
	}
	if out.Driver == "host" || out.Driver == "null" {
		return sbexec.Errorf(sbexec.CodeBadFlag, "the outbound network must be a bridge-like network, not %q (%s)", s.OutboundNetwork, out.Driver)
	}
	info, err := m.Engine.Info(ctx)
	if err != nil {
		return sbexec.EngineError(err, "cannot read the engine's architecture")
	}
	ref, _, err := m.Images.EnsureHelper(ctx, info.Architecture, !sbexec.ExecOnlyRuntime(info, ""))
	if err != nil {
		return err
	}
	deny, err := m.denyList(ctx, s)
	if err != nil {
		return err
	}
	cmd := []string{sbexec.HelperPath, "proxy",
		"--listen", ":" + strconv.Itoa(ProxyPort),
		"--policy", PolicyFile, "--log", LogFile, "--stats", StatsFile,
		"--clients", s.Pool.String(),
	}
	for _, d := range deny {
		cmd = append(cmd, "--deny", d.String())
	}
	for _, h := range s.Hosts {
		cmd = append(cmd, "--host", h)
	}
	if s.NoDNS {
		cmd = append(cmd, "--no-dns")
	}
	labels := s.labels()
	labels[sbexec.LabelVersion] = m.Version
	labels[LabelHelperID] = m.HelperID
	volLabels := sbexec.BaseLabels(KindData)
	pids := int64(512)
	cfg := &container.Config{
		Image:      ref,
		User:       sbexec.SandboxUser,
		Entrypoint: cmd,
		WorkingDir: DataDir,
		// Less garbage collection for a proxy under load, bounded by memory.
		Env:        []string{"GOGC=400", "GOMEMLIMIT=384MiB"},
		Labels:     labels,
		StopSignal: "SIGTERM",
	}
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(s.OutboundNetwork),
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		IpcMode:        container.IpcMode("private"),
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
		LogConfig:      container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "1m", "max-file": "2"}},
		Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: VolumeName, Target: DataDir,
			VolumeOptions: &mount.VolumeOptions{Labels: volLabels}}},
		Resources: container.Resources{
			Memory: 512 << 20, MemorySwap: 512 << 20, PidsLimit: &pids,
			Ulimits: []*container.Ulimit{{Name: "nofile", Soft: 16384, Hard: 16384}},
		},
	}
	resp, err := m.Engine.ContainerCreate(ctx, cfg, hc, nil, nil, SidecarName)
	if err != nil {
		if conflict(err) {
			return err
		}
		return sbexec.EngineError(err, "cannot create the egress sidecar")
	}
	if err := m.Engine.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		_ = m.Engine.ContainerRemove(context.WithoutCancel(ctx), resp.ID, container.RemoveOptions{Force: true})
		return sbexec.EngineError(err, "cannot start the egress sidecar")
	}
	return nil
}

// denyList is what the proxy never dials besides the special-purpose
// ranges: the scope subnet pool and every network gateway on the engine
// (the engine's host).
func (m *Manager) denyList(ctx context.Context, s Settings) ([]netip.Prefix, error) {
	nets, err := m.Engine.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return nil, sbexec.EngineError(err, "cannot list networks")
	}
	set := map[netip.Prefix]bool{s.Pool: true}
	for _, n := range nets {
		for _, c := range n.IPAM.Config {
			if gw, err := netip.ParseAddr(c.Gateway); err == nil {
				set[netip.PrefixFrom(gw, gw.BitLen())] = true
			}
			if n.Labels[sbexec.LabelKind] == KindNetwork {
				if p, err := netip.ParsePrefix(c.Subnet); err == nil {
					set[p.Masked()] = true
				}
			}
		}
	}
	out := make([]netip.Prefix, 0, len(set))
	for p := range set {
		if !s.Pool.Contains(p.Addr()) || p == s.Pool {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// scopeNetworks lists the scope networks.
func (m *Manager) scopeNetworks(ctx context.Context) ([]network.Summary, error) {
	nets, err := m.Engine.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", sbexec.LabelManaged+"=true"), filters.Arg("label", sbexec.LabelKind+"="+KindNetwork))})
	if err != nil {
		return nil, sbexec.EngineError(err, "cannot list the scope networks")
	}
	return nets, nil
}

// connectAll connects the sidecar to every scope network it is not on
// (after it was re-created, or when a network was made by another call).
func (m *Manager) connectAll(ctx context.Context, c *container.InspectResponse, s Settings) error {
	nets, err := m.scopeNetworks(ctx)
	if err != nil {
		return err
	}
	for _, n := range nets {
		if err := m.connect(ctx, c, n); err != nil {
			return err
		}
	}
	return nil
}

func subnetOf(n network.Inspect) (netip.Prefix, bool) {
	for _, c := range n.IPAM.Config {
		if p, err := netip.ParsePrefix(c.Subnet); err == nil && p.Addr().Is4() {
			return p.Masked(), true
		}
	}
	return netip.Prefix{}, false
}

// connect puts the sidecar on network n at the layout's proxy address.
func (m *Manager) connect(ctx context.Context, c *container.InspectResponse, n network.Inspect) error {
	if c.NetworkSettings != nil {
		for name, ep := range c.NetworkSettings.Networks {
			if name == n.Name || (ep != nil && ep.NetworkID == n.ID) {
				return nil
			}
		}
	}
	sub, ok := subnetOf(n)
	if !ok {
		return nil
	}
	lay, err := LayoutOf(sub)
	if err != nil {
		return nil // not one of ours to use
	}
	err = m.Engine.NetworkConnect(ctx, n.ID, SidecarName, &network.EndpointSettings{
		IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: lay.Proxy.String()},
	})
	if err != nil && !alreadyConnected(err) {
		return sbexec.EngineError(err, "cannot connect the egress sidecar to "+n.Name)
	}
	return nil
}

func alreadyConnected(err error) bool {
	s := err.Error()
	return strings.Contains(s, "already exists") || strings.Contains(s, "already attached") || conflict(err)
}

// ensureNetwork returns the scope's network, creating it with a free
// subnet of the pool.
func (m *Manager) ensureNetwork(ctx context.Context, scope string, s Settings) (network.Inspect, Layout, bool, error) {
	name := NetworkName(scope)
	skip := map[netip.Prefix]bool{}
	created := false
	for attempt := 0; attempt < 20; attempt++ {
		n, err := m.Engine.NetworkInspect(ctx, name, network.InspectOptions{})
		if err == nil {
			sub, ok := subnetOf(n)
			if !ok || n.Labels[sbexec.LabelKind] != KindNetwork {
				return n, Layout{}, false, sbexec.Errorf(sbexec.CodeEngineError, "network %s exists and is not a docker sandbox scope network: remove it", name)
			}
			lay, err := LayoutOf(sub)
			return n, lay, created, err
		}
		if !notFound(err) {
			return n, Layout{}, false, sbexec.EngineError(err, "cannot inspect network "+name)
		}
		all, err := m.Engine.NetworkList(ctx, network.ListOptions{})
		if err != nil {
			return n, Layout{}, false, sbexec.EngineError(err, "cannot list networks")
		}
		var used []netip.Prefix
		for _, o := range all {
			for _, c := range o.IPAM.Config {
				if p, err := netip.ParsePrefix(c.Subnet); err == nil {
					used = append(used, p.Masked())
				}
			}
		}
		sub, err := Allocate(s.Pool, s.Bits, used, skip, scope)
		if err != nil {
			return n, Layout{}, false, sbexec.Errorf(sbexec.CodeLimitReached, "%v", err)
		}
		lay, _ := LayoutOf(sub)
		labels := sbexec.BaseLabels(KindNetwork)
		labels[sbexec.LabelScope] = scope
		labels[LabelSubnet] = sub.String()
		_, err = m.Engine.NetworkCreate(ctx, name, network.CreateOptions{
			Driver:   "bridge",
			Internal: true,
			IPAM: &network.IPAM{Driver: "default", Config: []network.IPAMConfig{{
				Subnet: sub.String(), IPRange: lay.Range.String(), Gateway: lay.Gateway.String(),
			}}},
			Options: map[string]string{
				// No address on the host's side of the bridge: sandboxes
				// cannot reach the engine's host, even on open ports.
				"com.docker.network.bridge.inhibit_ipv4":         "true",
				"com.docker.network.bridge.enable_ip_masquerade": "false",
				"com.docker.network.bridge.enable_icc":           "true",
			},
			Labels: labels,
		})
		switch {
		case err == nil:
			created = true
			continue // inspect it
		case conflict(err) || strings.Contains(err.Error(), "already exists"):
			continue // another call made it
		case strings.Contains(err.Error(), "overlap"):
			skip[sub] = true // another call took the subnet
			continue
		default:
			return n, Layout{}, false, sbexec.EngineError(err, "cannot create network "+name)
		}
	}
	return network.Inspect{}, Layout{}, false, sbexec.Errorf(sbexec.CodeEngineError, "could not create network %s: the engine kept refusing the subnets", name)
}

// Attach prepares a proxy-mode sandbox of scope: the sidecar runs, the
// scope's network exists with the sidecar on it, and the scope has a
// credential. rules, when not nil, replace the scope's policy; otherwise
// the stored policy stays (empty for a new scope: everything denied).
// known is the proxy URL of the scope's existing sandbox, if any: without
// rules, it is reused as it is.
func (m *Manager) Attach(ctx context.Context, scope string, rules *policy.Rules, known string) (Attachment, error) {
	n, lay, created, err := m.EnsureNetwork(ctx, scope)
	if err != nil {
		return Attachment{}, err
	}
	att := Attachment{Network: n.Name, NetworkCreated: created, DNS: []string{lay.DNS.String()}, DNSOptions: []string{"timeout:1", "attempts:1"}}
	// The sandbox exists already and this call changes no policy: its
	// proxy URL is all it needs (an exec in the sidecar costs ~0.1 s).
	if rules == nil && known != "" {
		if u, err := url.Parse(known); err == nil && u.Hostname() == lay.Proxy.String() && u.User != nil && u.User.Username() == scope {
			att.ProxyURL, att.Env, att.Known = known, ProxyEnv(known), true
			return att, nil
		}
	}
	entry, err := m.setScope(ctx, scope, rules)
	if err != nil {
		return Attachment{}, err
	}
	sbexec.Debugf("egress: policy set")
	att.ProxyURL = fmt.Sprintf("http://%s:%s@%s:%d", scope, entry.Token, lay.Proxy, ProxyPort)
	att.Env, att.Rules = ProxyEnv(att.ProxyURL), entry.Rules
	return att, nil
}

// EnsureNetwork makes the sidecar run and the scope's network exist with
// the sidecar on it; created tells whether this call made the network.
func (m *Manager) EnsureNetwork(ctx context.Context, scope string) (n network.Inspect, lay Layout, created bool, err error) {
	c, s, err := m.Ensure(ctx)
	if err != nil {
		return n, lay, false, err
	}
	sbexec.Debugf("egress: sidecar ready")
	n, lay, created, err = m.ensureNetwork(ctx, scope, s)
	if err != nil {
		return n, lay, false, err
	}
	if err := m.connect(ctx, c, n); err != nil {
		return n, lay, created, err
	}
	sbexec.Debugf("egress: scope network ready")
	return n, lay, created, nil
}

// ScopeEntry is a scope's entry as the helper prints it.
type ScopeEntry struct {
	Name string `json:"scope"`
	policy.Scope
}

// setScope ensures the scope's credential and, with rules, sets its policy.
func (m *Manager) setScope(ctx context.Context, scope string, rules *policy.Rules) (ScopeEntry, error) {
	args := []string{"proxy", "policy", "--policy", PolicyFile, "ensure", scope}
	var stdin io.Reader
	if rules != nil {
		args[len(args)-2] = "set"
		b, _ := json.Marshal(rules)
		stdin = bytes.NewReader(b)
	}
	var out, errb bytes.Buffer
	code, err := m.helperExec(ctx, args, stdin, &out, &errb)
	if err != nil {
		return ScopeEntry{}, err
	}
	if code != 0 {
		msg := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(errb.String()), "sandbox-helper proxy policy: "))
		return ScopeEntry{}, sbexec.Errorf(CodeEgressUnavailable, "the egress sidecar could not update the policy of %s: %s", scope, msg)
	}
	var e ScopeEntry
	if err := json.Unmarshal(out.Bytes(), &e); err != nil || e.Token == "" {
		return ScopeEntry{}, sbexec.Errorf(CodeEgressUnavailable, "bad answer from the egress sidecar: %q", out.String())
	}
	return e, nil
}

// SetPolicy replaces a scope's policy (creating its credential if needed).
// The sidecar must exist (a stopped one is started).
func (m *Manager) SetPolicy(ctx context.Context, scope string, rules policy.Rules) (policy.Rules, error) {
	if _, err := m.RunningSidecar(ctx); err != nil {
		return policy.Rules{}, err
	}
	e, err := m.setScope(ctx, scope, &rules)
	return e.Rules, err
}

// State is the sidecar's policy (without tokens) and counters.
type State struct {
	Policy *policy.File    `json:"policy"`
	Stats  json.RawMessage `json:"stats"`
}

// ReadState asks the running sidecar for its state.
func (m *Manager) ReadState(ctx context.Context) (State, error) {
	var out, errb bytes.Buffer
	code, err := m.helperExec(ctx, []string{"proxy", "state", "--policy", PolicyFile, "--stats", StatsFile}, nil, &out, &errb)
	if err != nil {
		return State{}, err
	}
	if code != 0 {
		return State{}, sbexec.Errorf(CodeEgressUnavailable, "the egress sidecar could not report its state: %s", strings.TrimSpace(errb.String()))
	}
	var st State
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || st.Policy == nil {
		return State{}, sbexec.Errorf(CodeEgressUnavailable, "bad state from the egress sidecar: %v", err)
	}
	return st, nil
}

// RunningSidecar returns the sidecar when it runs, starting it when it
// exists but stopped; it never creates one (reading policies and logs does
// not start a proxy that was never asked for).
func (m *Manager) RunningSidecar(ctx context.Context) (*container.InspectResponse, error) {
	c, err := m.sidecar(ctx)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, sbexec.Errorf(CodeEgressNotRunning, "the egress sidecar is not running: start it with `docker sandbox egress start` (a proxy-mode exec starts it too)")
	}
	if running(c) {
		return c, nil
	}
	c, _, err = m.ensure(ctx, nil)
	return c, err
}

// helperExec runs the helper in the sidecar and returns its exit code.
func (m *Manager) helperExec(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	resp, err := m.Engine.ContainerExecCreate(ctx, SidecarName, container.ExecOptions{
		User: sbexec.SandboxUser, AttachStdin: stdin != nil, AttachStdout: true, AttachStderr: true,
		Cmd: append([]string{sbexec.HelperPath}, args...),
	})
	if err != nil {
		if notFound(err) || strings.Contains(err.Error(), "is not running") {
			return -1, sbexec.Errorf(CodeEgressNotRunning, "the egress sidecar is not running: start it with `docker sandbox egress start`")
		}
		return -1, sbexec.EngineError(err, "cannot run the helper in the egress sidecar")
	}
	hj, err := m.Engine.ContainerExecAttach(ctx, resp.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, sbexec.EngineError(err, "cannot attach to the egress sidecar")
	}
	defer hj.Close()
	stop := context.AfterFunc(ctx, func() { hj.Conn.Close() })
	defer stop()
	if stdin != nil {
		go func() {
			_, _ = io.Copy(hj.Conn, stdin)
			_ = hj.CloseWrite()
		}()
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if _, err := stdcopy.StdCopy(stdout, stderr, hj.Reader); err != nil {
		if ctx.Err() != nil {
			return -1, ctx.Err()
		}
		if errors.Is(err, io.ErrClosedPipe) {
			return 0, nil
		}
		return -1, sbexec.Wrap(CodeEgressUnavailable, err, "lost the egress sidecar's stream")
	}
	ins, err := m.Engine.ContainerExecInspect(ctx, resp.ID)
	if err != nil {
		return -1, sbexec.EngineError(err, "cannot read the helper's exit code in the egress sidecar")
	}
	return ins.ExitCode, nil
}

// Stop stops the sidecar; it keeps its settings, so that the next start
// (or proxy-mode exec) brings it back as it was. With remove, it removes
// the sidecar and the scope networks no sandbox uses. Its volume, with the
// credentials, the policies and the log, stays either way. It reports
// whether there was a sidecar and which networks it removed.
func (m *Manager) Stop(ctx context.Context, remove bool) (bool, []string, error) {
	c, err := m.sidecar(ctx)
	if err != nil || c == nil {
		return false, nil, err
	}
	if !remove {
		timeout := 5
		if err := m.Engine.ContainerStop(ctx, SidecarName, container.StopOptions{Timeout: &timeout}); err != nil && !notFound(err) {
			return false, nil, sbexec.EngineError(err, "cannot stop the egress sidecar")
		}
		return true, nil, nil
	}
	if err := m.Engine.ContainerRemove(ctx, SidecarName, container.RemoveOptions{Force: true}); err != nil && !notFound(err) && !conflict(err) {
		return false, nil, sbexec.EngineError(err, "cannot remove the egress sidecar")
	}
	m.waitGone(ctx)
	found := true
	nets, err := m.scopeNetworks(ctx)
	if err != nil {
		return found, nil, err
	}
	var removed []string
	for _, n := range nets {
		if err := m.Engine.NetworkRemove(ctx, n.ID); err == nil {
			removed = append(removed, n.Name)
		}
	}
	sort.Strings(removed)
	return found, removed, nil
}

func (m *Manager) waitGone(ctx context.Context) {
	for i := 0; i < 100; i++ {
		if _, err := m.Engine.ContainerInspect(ctx, SidecarName); notFound(err) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// RemoveScope removes a scope's network (when no sandbox uses it: the
// sidecar is disconnected from it first) and, with forget, its credential
// and policy. It is for `rm`, `prune`, and a failed first exec.
func (m *Manager) RemoveScope(ctx context.Context, scope string, forget bool) error {
	n, err := m.Engine.NetworkInspect(ctx, NetworkName(scope), network.InspectOptions{})
	if notFound(err) {
		return nil
	}
	if err != nil {
		return sbexec.EngineError(err, "cannot inspect network "+NetworkName(scope))
	}
	for _, ep := range n.Containers {
		if ep.Name != SidecarName {
			return sbexec.Errorf(sbexec.CodeScopeBusy, "network %s is still used by %s", n.Name, ep.Name)
		}
	}
	_ = m.Engine.NetworkDisconnect(ctx, n.ID, SidecarName, true)
	if err := m.Engine.NetworkRemove(ctx, n.ID); err != nil && !notFound(err) {
		return sbexec.EngineError(err, "cannot remove network "+NetworkName(scope))
	}
	if c, err := m.sidecar(ctx); forget && err == nil && running(c) {
		_, _ = m.helperExec(ctx, []string{"proxy", "policy", "--policy", PolicyFile, "rm", scope}, nil, nil, nil)
	}
	return nil
}
