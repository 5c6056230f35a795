package egress

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/api/types/volume"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
	"github.com/docker-sandbox/docker-sandbox/egress/proxy"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/exec/helpercall"
)

// Engine is the part of the Engine API this package uses.
type Engine interface {
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, container string, options container.StartOptions) error
	ContainerRemove(ctx context.Context, container string, options container.RemoveOptions) error
	ContainerStop(ctx context.Context, container string, options container.StopOptions) error
	ContainerInspect(ctx context.Context, container string) (container.InspectResponse, error)
	helpercall.Engine // exec create, attach, inspect
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	NetworkInspect(ctx context.Context, networkID string, options network.InspectOptions) (network.Inspect, error)
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkConnect(ctx context.Context, networkID, containerID string, config *network.EndpointSettings) error
	NetworkRemove(ctx context.Context, networkID string) error
	NetworkDisconnect(ctx context.Context, networkID, containerID string, force bool) error
	Info(ctx context.Context) (system.Info, error)
	CopyFromContainer(ctx context.Context, containerID, srcPath string) (io.ReadCloser, container.PathStat, error)
	ContainerStatPath(ctx context.Context, containerID, path string) (container.PathStat, error)
	VolumeInspect(ctx context.Context, volumeID string) (volume.Volume, error)
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
	CodeEgressNotRunning  = core.CodeEgressNotRunning
	CodeEgressMismatch    = core.CodeEgressMismatch
	CodeEgressUnavailable = core.CodeEgressUnavailable
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
		return nil, core.EngineError(err, "cannot inspect the egress sidecar")
	}
	if !isSidecar(c) {
		return nil, core.Errorf(core.CodeEngineError, "a container named %s exists and is not the egress sidecar of docker sandbox: remove or rename it", SidecarName)
	}
	return &c, nil
}

// isSidecar reports whether c is the plugin's sidecar: its name, its
// labels and its kind say so (labels alone can be copied).
func isSidecar(c container.InspectResponse) bool {
	return c.Config != nil && strings.TrimPrefix(c.Name, "/") == SidecarName &&
		c.Config.Labels[core.LabelManaged] == "true" && c.Config.Labels[core.LabelKind] == KindSidecar
}

// outdated reports whether c was made by a plugin whose sidecar lacks what
// this one relies on (the networks file, the host probe, the recorded
// settings): it is replaced, with its settings.
func outdated(c *container.InspectResponse) bool {
	return c != nil && c.Config.Labels[LabelRevision] != SidecarRevision
}

func running(c *container.InspectResponse) bool {
	return c != nil && c.State != nil && c.State.Running
}

// Kept returns the settings the sidecar is kept with: those of the
// existing container (running or stopped), else those recorded in its
// volume by the last sidecar (they survive `egress stop --rm`, `prune` and
// a `docker rm`), else nil.
func (m *Manager) Kept(ctx context.Context) (*Settings, error) {
	c, err := m.sidecar(ctx)
	if err != nil {
		return nil, err
	}
	return m.kept(ctx, c)
}

func (m *Manager) kept(ctx context.Context, c *container.InspectResponse) (*Settings, error) {
	if c != nil {
		s, err := settingsFromLabels(c.Config.Labels).Normalized()
		if err != nil {
			return nil, core.Errorf(CodeEgressUnavailable, "the egress sidecar's settings do not parse (%v): remove it with `docker sandbox egress stop --rm`, then start it with --replace", err)
		}
		return &s, nil
	}
	return m.keptInVolume(ctx)
}

// Start makes the sidecar run. Without settings given (no flag), it runs
// with the kept ones (see Kept), or the defaults when there are none. Given
// settings that differ from the kept ones are refused (egress_mismatch)
// unless replace: then the sidecar is re-created with them (sandboxes keep
// their networks and credentials; open connections end). It is idempotent.
func (m *Manager) Start(ctx context.Context, s Settings, given, replace bool) (*container.InspectResponse, bool, error) {
	if given {
		var err error
		if s, err = s.Normalized(); err != nil {
			return nil, false, err
		}
	}
	c, err := m.sidecar(ctx)
	if err != nil {
		return nil, false, err
	}
	kept, err := m.kept(ctx, c)
	if err != nil && !(replace && given) {
		return nil, false, err
	}
	if !given {
		if kept != nil {
			s = *kept
		}
		if s, err = s.Normalized(); err != nil {
			return nil, false, err
		}
	}
	if kept != nil && kept.Hash() != s.Hash() && !replace {
		state := "is kept"
		if running(c) {
			state = "runs"
		}
		return nil, false, core.Errorf(CodeEgressMismatch, "the egress sidecar %s with other settings (%s) than asked (%s): `docker sandbox egress start` without settings uses them; `egress start --replace` with the new settings replaces them (sandboxes keep their networks and credentials; open connections end)",
			state, kept.Describe(), s.Describe())
	}
	if c != nil && (settingsFromLabels(c.Config.Labels).Hash() != s.Hash() || outdated(c)) {
		if err := m.remove(ctx, c); err != nil {
			return nil, false, err
		}
	}
	return m.ensure(ctx, &s)
}

// Ensure makes the sidecar run: as it is when it exists, else created with
// the kept settings or the defaults (a proxy-mode exec starts the sidecar
// if needed).
func (m *Manager) Ensure(ctx context.Context) (*container.InspectResponse, Settings, error) {
	c, err := m.sidecar(ctx)
	if err != nil {
		return nil, Settings{}, err
	}
	if running(c) && !outdated(c) {
		return c, settingsFromLabels(c.Config.Labels), nil
	}
	s, err := m.kept(ctx, c)
	if err != nil {
		return nil, Settings{}, err
	}
	if outdated(c) {
		core.Debugf("egress: replacing a sidecar of revision %q", c.Config.Labels[LabelRevision])
		if err := m.remove(ctx, c); err != nil {
			return nil, Settings{}, err
		}
	}
	c, _, err = m.ensure(ctx, s)
	if err != nil {
		return nil, Settings{}, err
	}
	return c, settingsFromLabels(c.Config.Labels), nil
}

// remove removes the sidecar container c (its volume stays).
func (m *Manager) remove(ctx context.Context, c *container.InspectResponse) error {
	if err := m.Engine.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !notFound(err) && !conflict(err) {
		return core.EngineError(err, "cannot remove the egress sidecar")
	}
	m.waitGone(ctx)
	return nil
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
			err := m.Engine.ContainerStart(ctx, c.ID, container.StartOptions{})
			switch {
			case err == nil || conflict(err) || strings.Contains(err.Error(), "already"):
				started = true
			case notFound(err) || strings.Contains(err.Error(), "network"):
				// One of its networks was removed while it was stopped:
				// make it again from its settings (they are in its labels).
				set := settingsFromLabels(c.Config.Labels)
				s = &set
				if err := m.remove(ctx, c); err != nil {
					return nil, false, err
				}
			default:
				return nil, false, core.EngineError(err, "cannot start the egress sidecar")
			}
		}
		c, err = m.sidecar(ctx)
		if err != nil {
			return nil, false, err
		}
		if running(c) {
			set := settingsFromLabels(c.Config.Labels)
			if err := m.connectAll(ctx, c, set); err != nil {
				return nil, false, err
			}
			if created || started {
				// Running is not listening yet: wait for the proxy, so
				// that the caller's first request does not race it.
				var errb bytes.Buffer
				code, err := m.helperExec(ctx, c.ID, proxy.WaitArgs{Addr: "127.0.0.1:" + strconv.Itoa(ProxyPort)}.Argv(), nil, nil, &errb)
				if err != nil {
					return nil, false, err
				}
				if code != 0 {
					return nil, false, core.Errorf(CodeEgressUnavailable, "the egress proxy did not start listening: %s (see `docker logs %s`)", strings.TrimSpace(errb.String()), SidecarName)
				}
			}
			c, err = m.sidecar(ctx)
			if err != nil || c == nil {
				return nil, false, core.Errorf(core.CodeEngineError, "the egress sidecar disappeared while starting")
			}
			if err := m.refresh(ctx, c, set); err != nil {
				return nil, false, err
			}
			return c, created, nil
		}
		if c != nil && c.State != nil && c.State.Status == "exited" && attempt > 2 {
			return nil, false, core.Errorf(CodeEgressUnavailable, "the egress sidecar exits right after starting (exit code %d): see `docker logs %s`", c.State.ExitCode, SidecarName)
		}
		if time.Now().After(deadline) {
			return nil, false, core.Errorf(CodeEgressUnavailable, "the egress sidecar did not start within 60s")
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(time.Duration(50*(attempt+1)) * time.Millisecond):
		}
	}
}

// dataVolume checks that the sidecar's volume, when it exists, is the
// plugin's (name, labels, kind, and the local driver with no options): a
// look-alike would be given every scope's credentials. ok is false when there is none.
func (m *Manager) dataVolume(ctx context.Context) (bool, error) {
	v, err := m.Engine.VolumeInspect(ctx, VolumeName)
	if notFound(err) {
		return false, nil
	}
	if err != nil {
		return false, core.EngineError(err, "cannot inspect volume "+VolumeName)
	}
	if v.Name != VolumeName || v.Labels[core.LabelManaged] != "true" || v.Labels[core.LabelKind] != KindData || !core.PlainVolume(v.Driver, v.Options) {
		return false, core.Errorf(core.CodeEngineError, "a volume named %s exists and is not the egress data of docker sandbox: remove or rename it", VolumeName)
	}
	return true, nil
}

// settingsRecord is the settings file in the sidecar's volume.
type settingsRecord struct {
	OutboundNetwork string   `json:"outbound_network"`
	SubnetPool      string   `json:"subnet_pool"`
	SubnetBits      int      `json:"subnet_bits"`
	Hosts           []string `json:"hosts"`
	NoDNS           bool     `json:"no_dns"`
}

func (s Settings) record() []byte {
	hosts := s.Hosts
	if hosts == nil {
		hosts = []string{}
	}
	b, _ := json.Marshal(settingsRecord{OutboundNetwork: s.OutboundNetwork, SubnetPool: s.Pool.String(), SubnetBits: s.Bits, Hosts: hosts, NoDNS: s.NoDNS})
	return b
}

func parseSettingsRecord(b []byte) (Settings, error) {
	var r settingsRecord
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Settings{}, err
	}
	pool, err := netip.ParsePrefix(r.SubnetPool)
	if err != nil {
		return Settings{}, err
	}
	return Settings{OutboundNetwork: r.OutboundNetwork, Pool: pool, Bits: r.SubnetBits, Hosts: r.Hosts, NoDNS: r.NoDNS}.Normalized()
}

// keptInVolume reads the settings the last sidecar recorded in its volume,
// through a container of the helper image that mounts the volume read-only
// and is never started. nil when there is no volume or no record.
func (m *Manager) keptInVolume(ctx context.Context) (*Settings, error) {
	ok, err := m.dataVolume(ctx)
	if err != nil || !ok {
		return nil, err
	}
	if m.Images == nil {
		return nil, core.Errorf(CodeEgressUnavailable, "cannot read the egress sidecar's kept settings: no helper image")
	}
	info, err := m.Engine.Info(ctx)
	if err != nil {
		return nil, core.EngineError(err, "cannot read the engine's architecture")
	}
	ref, _, err := m.Images.EnsureHelper(ctx, info.Architecture, !sbexec.ExecOnlyRuntime(info, ""))
	if err != nil {
		return nil, err
	}
	resp, err := m.Engine.ContainerCreate(ctx, &container.Config{
		Image: ref, User: core.SandboxUser, Entrypoint: []string{core.HelperPath}, Labels: core.BaseLabels(core.KindProbe), WorkingDir: "/",
	}, &container.HostConfig{
		NetworkMode: "none", ReadonlyRootfs: true, CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"},
		Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: VolumeName, Target: DataDir, ReadOnly: true}},
	}, nil, nil, core.PluginObjectName("egress-read."+strconv.FormatInt(time.Now().UnixNano(), 36)))
	if err != nil {
		return nil, core.EngineError(err, "cannot read the egress sidecar's kept settings")
	}
	defer func() {
		_ = m.Engine.ContainerRemove(context.WithoutCancel(ctx), resp.ID, container.RemoveOptions{Force: true})
	}()
	b, found, err := m.readFile(ctx, resp.ID, SettingsFile)
	if err != nil || !found {
		return nil, err
	}
	set, err := parseSettingsRecord(b)
	if err != nil {
		return nil, core.Errorf(CodeEgressUnavailable, "the egress sidecar's kept settings (%s in volume %s) do not parse: %v (start it with --replace and the settings you want)", SettingsFile, VolumeName, err)
	}
	return &set, nil
}

// readFile reads one small file of a container through the Engine API
// (found is false when it does not exist).
func (m *Manager) readFile(ctx context.Context, id, path string) ([]byte, bool, error) {
	rc, _, err := m.Engine.CopyFromContainer(ctx, id, path)
	if notFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, core.EngineError(err, "cannot read "+path+" in the egress sidecar")
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err != nil || h.Typeflag != tar.TypeReg || h.Size > maxStateFile {
		return nil, false, core.Errorf(CodeEgressUnavailable, "%s in the egress sidecar is not a small regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(tr, maxStateFile))
	if err != nil {
		return nil, false, core.Wrap(CodeEgressUnavailable, err, "cannot read %s in the egress sidecar", path)
	}
	return b, true, nil
}

const maxStateFile = 1 << 20

// serveArgs is the proxy's command line in a sidecar with settings s,
// on an engine with networks nets.
func serveArgs(s Settings, nets []network.Summary) proxy.ServeArgs {
	serve := proxy.ServeArgs{
		Listen:     ":" + strconv.Itoa(ProxyPort),
		PolicyFile: PolicyFile, LogFile: LogFile, StatsFile: StatsFile,
		NetworksFile: NetworksFile, HostProbe: true,
		Settings: string(s.record()), SettingsFile: SettingsFile,
		Clients: []netip.Prefix{s.Pool},
		// The scope pool; the engine's host addresses known now (the
		// networks file, pushed on every proxy-mode exec and egress
		// command, adds later ones).
		Deny:  []netip.Prefix{s.Pool},
		Hosts: s.Hosts,
		NoDNS: s.NoDNS,
	}
	for _, a := range HostNetworks(nets, s).Host {
		serve.Deny = append(serve.Deny, netip.PrefixFrom(a, a.BitLen()))
	}
	return serve
}

// create makes the sidecar container and starts it.
func (m *Manager) create(ctx context.Context, s Settings) error {
	info, err := m.Engine.Info(ctx)
	if err != nil {
		return core.EngineError(err, "cannot read the engine's architecture")
	}
	if err := sbexec.CheckEngineLimits(info, "egress sidecar", false); err != nil {
		return err
	}
	out, err := m.Engine.NetworkInspect(ctx, s.OutboundNetwork, network.InspectOptions{})
	if err != nil {
		if notFound(err) {
			return core.Errorf(core.CodeBadFlag, "the outbound network %q does not exist (create it, or leave --outbound-network out to use the engine's default bridge)", s.OutboundNetwork)
		}
		return core.EngineError(err, "cannot inspect the outbound network "+s.OutboundNetwork)
	}
	if out.Driver == "host" || out.Driver == "null" {
		return core.Errorf(core.CodeBadFlag, "the outbound network must be a bridge-like network, not %q (%s)", s.OutboundNetwork, out.Driver)
	}
	if _, _, ok := scopeNetwork(out); ok || core.IsPluginObjectName(out.Name) {
		return core.Errorf(core.CodeBadFlag, "the outbound network cannot be one of docker sandbox's own networks (%s)", out.Name)
	}
	if _, err := m.dataVolume(ctx); err != nil {
		return err
	}
	ref, _, err := m.Images.EnsureHelper(ctx, info.Architecture, !sbexec.ExecOnlyRuntime(info, ""))
	if err != nil {
		return err
	}
	nets, err := m.Engine.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return core.EngineError(err, "cannot list networks")
	}
	cmd := append([]string{core.HelperPath}, serveArgs(s, nets).Argv()...)
	labels := s.labels()
	labels[core.LabelVersion] = m.Version
	labels[LabelHelperID] = m.HelperID
	labels[LabelRevision] = SidecarRevision
	volLabels := core.BaseLabels(KindData)
	pids := int64(512)
	cfg := &container.Config{
		Image:      ref,
		User:       core.SandboxUser,
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
		// The sidecar is on every scope network and the outbound one: it
		// must never route packets between them.
		Sysctls: map[string]string{"net.ipv4.ip_forward": "0", "net.ipv6.conf.all.forwarding": "0"},
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
		return core.EngineError(err, "cannot create the egress sidecar")
	}
	if w := sbexec.DiscardedSetting(resp); w != "" {
		_ = m.Engine.ContainerRemove(context.WithoutCancel(ctx), resp.ID, container.RemoveOptions{Force: true})
		return core.Errorf(core.CodeEngineUnsupported, "the engine created the egress sidecar without a setting it asked for (%s); it was removed: use an engine that enforces the sidecar's limits", w)
	}
	if err := m.Engine.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		_ = m.Engine.ContainerRemove(context.WithoutCancel(ctx), resp.ID, container.RemoveOptions{Force: true})
		return core.EngineError(err, "cannot start the egress sidecar")
	}
	return nil
}

// HostNetworks computes what the sidecar must know about the engine's
// networks: every address of the engine's host a network shows (each
// gateway; the first address of a subnet with no gateway recorded, as the
// default bridge on API 1.41; auxiliary addresses), and each scope's
// subnet (only the plugin's own scope networks, in the pool of s).
func HostNetworks(nets []network.Summary, s Settings) policy.Networks {
	n := policy.Networks{Version: policy.NetworksVersion, Host: []netip.Addr{}, Scopes: map[string]netip.Prefix{}}
	for _, nw := range nets {
		for _, c := range nw.IPAM.Config {
			sub, serr := netip.ParsePrefix(c.Subnet)
			if gw, err := netip.ParseAddr(c.Gateway); err == nil {
				n.Host = append(n.Host, gw.WithZone(""))
			} else if serr == nil && sub.Bits() <= sub.Addr().BitLen()-2 {
				n.Host = append(n.Host, sub.Masked().Addr().Next())
			}
			for _, aux := range c.AuxAddress {
				if a, err := netip.ParseAddr(aux); err == nil {
					n.Host = append(n.Host, a.WithZone(""))
				}
			}
		}
		if scope, sub, ok := scopeNetwork(nw); ok && (!s.Pool.IsValid() || s.Pool.Contains(sub.Addr())) {
			n.Scopes[scope] = sub
		}
	}
	out, _ := n.Normalized()
	return out
}

// Refresh pushes the engine's networks to the running sidecar when they
// changed (compared with the file it holds: two Engine API calls when
// nothing changed). Every proxy-mode exec and egress command calls it, so
// that a network created after the sidecar started has its gateway denied.
func (m *Manager) Refresh(ctx context.Context) error {
	c, err := m.sidecar(ctx)
	if err != nil || !running(c) {
		return err
	}
	return m.refresh(ctx, c, settingsFromLabels(c.Config.Labels))
}

func (m *Manager) refresh(ctx context.Context, c *container.InspectResponse, s Settings) error {
	// Read the sidecar's file first, then list the networks, then replace
	// only the version read: a concurrent push (another client's newer
	// picture) makes this one start again, so the last word is never an
	// older list of networks.
	for attempt := 0; ; attempt++ {
		match, linked, err := m.networksVersion(ctx, c.ID)
		if err != nil {
			return err
		}
		nets, err := m.Engine.NetworkList(ctx, network.ListOptions{})
		if err != nil {
			return core.EngineError(err, "cannot list networks")
		}
		want := HostNetworks(nets, s).Marshal()
		sum := sha256.Sum256(want)
		if linked && match == hex.EncodeToString(sum[:]) {
			return nil
		}
		var errb bytes.Buffer
		code, err := m.helperExec(ctx, c.ID, proxy.NetworksArgs{File: NetworksFile, IfMatch: match}.Argv(), bytes.NewReader(want), nil, &errb)
		if err != nil {
			return err
		}
		switch {
		case code == 0:
			core.Debugf("egress: networks pushed")
			return nil
		case code == 3 && attempt < 10:
			continue // pushed by another call meanwhile: look again
		default:
			return core.Errorf(CodeEgressUnavailable, "the egress sidecar could not take the engine's networks: %s", strings.TrimSpace(errb.String()))
		}
	}
}

// networksVersion is the SHA-256 of the sidecar's networks file ("none"
// when there is none), from the stat of the link the helper keeps next to
// it (one cheap call). Without the link (a file an older helper wrote),
// the file is read and linked is false: the next push makes the link.
func (m *Manager) networksVersion(ctx context.Context, id string) (version string, linked bool, err error) {
	st, err := m.Engine.ContainerStatPath(ctx, id, NetworksHashLink)
	if err == nil && st.LinkTarget != "" {
		return path.Base(st.LinkTarget), true, nil
	}
	if err != nil && !notFound(err) {
		return "", false, core.EngineError(err, "cannot stat "+NetworksHashLink+" in the egress sidecar")
	}
	have, found, err := m.readFile(ctx, id, NetworksFile)
	if err != nil || !found {
		return "none", false, err
	}
	sum := sha256.Sum256(have)
	return hex.EncodeToString(sum[:]), false, nil
}

// scopeNetwork tells whether n is one of the plugin's scope networks: its
// name, its labels (managed, kind, scope) and its shape (internal, one IPv4
// subnet) all say so; labels alone can be copied onto a user's network.
func scopeNetwork(n network.Summary) (scope string, sub netip.Prefix, ok bool) {
	scope = n.Labels[core.LabelScope]
	if n.Labels[core.LabelManaged] != "true" || n.Labels[core.LabelKind] != KindNetwork ||
		core.ValidateName("scope", scope) != nil || n.Name != NetworkName(scope) || !n.Internal {
		return "", netip.Prefix{}, false
	}
	sub, ok = subnetOf(n)
	if !ok {
		return "", netip.Prefix{}, false
	}
	if _, err := LayoutOf(sub); err != nil {
		return "", netip.Prefix{}, false
	}
	return scope, sub, true
}

// scopeNetworks lists the scope networks (only the plugin's own).
func (m *Manager) scopeNetworks(ctx context.Context) ([]network.Summary, error) {
	nets, err := m.Engine.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", core.LabelManaged+"=true"), filters.Arg("label", core.LabelKind+"="+KindNetwork))})
	if err != nil {
		return nil, core.EngineError(err, "cannot list the scope networks")
	}
	out := nets[:0]
	for _, n := range nets {
		if _, _, ok := scopeNetwork(n); ok {
			out = append(out, n)
		}
	}
	return out, nil
}

// connectAll connects the sidecar to every scope network of its pool it is
// not on (after it was re-created, or when a network was made by another
// call).
func (m *Manager) connectAll(ctx context.Context, c *container.InspectResponse, s Settings) error {
	nets, err := m.scopeNetworks(ctx)
	if err != nil {
		return err
	}
	for _, n := range nets {
		if _, sub, _ := scopeNetwork(n); s.Pool.IsValid() && !s.Pool.Contains(sub.Addr()) {
			continue
		}
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

// connect puts the sidecar on scope network n at the layout's proxy
// address.
func (m *Manager) connect(ctx context.Context, c *container.InspectResponse, n network.Inspect) error {
	if c.NetworkSettings != nil {
		for name, ep := range c.NetworkSettings.Networks {
			if name == n.Name || (ep != nil && ep.NetworkID == n.ID) {
				return nil
			}
		}
	}
	_, sub, ok := scopeNetwork(n)
	if !ok {
		return nil // not one of ours: never joined
	}
	lay, _ := LayoutOf(sub)
	err := m.Engine.NetworkConnect(ctx, n.ID, c.ID, &network.EndpointSettings{
		IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: lay.Proxy.String()},
	})
	if err != nil && !alreadyConnected(err) {
		return core.EngineError(err, "cannot connect the egress sidecar to "+n.Name)
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
			got, sub, ok := scopeNetwork(n)
			if !ok || got != scope {
				return n, Layout{}, false, core.Errorf(core.CodeEngineError, "network %s exists and is not a docker sandbox scope network: remove it", name)
			}
			lay, err := LayoutOf(sub)
			return n, lay, created, err
		}
		if !notFound(err) {
			return n, Layout{}, false, core.EngineError(err, "cannot inspect network "+name)
		}
		all, err := m.Engine.NetworkList(ctx, network.ListOptions{})
		if err != nil {
			return n, Layout{}, false, core.EngineError(err, "cannot list networks")
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
			return n, Layout{}, false, core.Errorf(core.CodeLimitReached, "%v", err)
		}
		lay, _ := LayoutOf(sub)
		labels := core.BaseLabels(KindNetwork)
		labels[core.LabelScope] = scope
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
			return n, Layout{}, false, core.EngineError(err, "cannot create network "+name)
		}
	}
	return network.Inspect{}, Layout{}, false, core.Errorf(core.CodeEngineError, "could not create network %s: the engine kept refusing the subnets", name)
}

// Attach prepares a proxy-mode sandbox of scope: the sidecar runs, the
// scope's network exists with the sidecar on it, the sidecar knows the
// engine's networks as they are now, and the scope has a credential.
// rules, when not nil, replace the scope's policy; otherwise the stored
// policy stays (empty for a new scope: everything denied). env is the
// environment of the scope's existing sandbox, if any: without rules, its
// proxy URL is reused as it is.
func (m *Manager) Attach(ctx context.Context, scope string, rules *policy.Rules, env []string) (Attachment, error) {
	known := ProxyURLFrom(env)
	c, s, err := m.Ensure(ctx)
	if err != nil {
		return Attachment{}, err
	}
	n, lay, created, err := m.attachNetwork(ctx, c, s, scope)
	if err != nil {
		return Attachment{}, err
	}
	att := Attachment{Network: n.Name, NetworkCreated: created, DNS: []string{lay.DNS.String()}, DNSOptions: []string{"timeout:1", "attempts:1"}}
	if err := m.refresh(ctx, c, s); err != nil {
		return att, err
	}
	core.Debugf("egress: networks checked")
	// The sandbox exists already and this call changes no policy: its
	// proxy URL is all it needs (an exec in the sidecar costs ~0.1 s).
	if rules == nil && known != "" {
		if u, err := url.Parse(known); err == nil && u.Hostname() == lay.Proxy.String() && u.User != nil && u.User.Username() == scope {
			att.ProxyURL, att.Env, att.Known = known, ProxyEnv(known), true
			return att, nil
		}
	}
	entry, err := m.setScope(ctx, c.ID, scope, rules)
	if err != nil {
		return att, err
	}
	core.Debugf("egress: policy set")
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
	return m.attachNetwork(ctx, c, s, scope)
}

func (m *Manager) attachNetwork(ctx context.Context, c *container.InspectResponse, s Settings, scope string) (n network.Inspect, lay Layout, created bool, err error) {
	core.Debugf("egress: sidecar ready")
	n, lay, created, err = m.ensureNetwork(ctx, scope, s)
	if err != nil {
		return n, lay, false, err
	}
	if err := m.connect(ctx, c, n); err != nil {
		return n, lay, created, err
	}
	core.Debugf("egress: scope network ready")
	return n, lay, created, nil
}

// ScopeEntry is a scope's entry as the helper prints it.
type ScopeEntry struct {
	Name string `json:"scope"`
	policy.Scope
}

// setScope ensures the scope's credential and, with rules, sets its policy.
func (m *Manager) setScope(ctx context.Context, id, scope string, rules *policy.Rules) (ScopeEntry, error) {
	args := proxy.PolicyArgs{File: PolicyFile, Op: proxy.PolicyEnsure, Scope: scope}
	var stdin io.Reader
	if rules != nil {
		args.Op = proxy.PolicySet
		b, _ := json.Marshal(rules)
		stdin = bytes.NewReader(b)
	}
	var out, errb bytes.Buffer
	code, err := m.helperExec(ctx, id, args.Argv(), stdin, &out, &errb)
	if err != nil {
		return ScopeEntry{}, err
	}
	if code != 0 {
		msg := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(errb.String()), "sandbox-helper proxy policy: "))
		return ScopeEntry{}, core.Errorf(CodeEgressUnavailable, "the egress sidecar could not update the policy of %s: %s", scope, msg)
	}
	var e ScopeEntry
	if err := json.Unmarshal(out.Bytes(), &e); err != nil || e.Token == "" {
		return ScopeEntry{}, core.Errorf(CodeEgressUnavailable, "bad answer from the egress sidecar: %q", out.String())
	}
	return e, nil
}

// SetPolicy replaces a scope's policy (creating its credential if needed).
// The sidecar must exist (a stopped one is started).
func (m *Manager) SetPolicy(ctx context.Context, scope string, rules policy.Rules) (policy.Rules, error) {
	c, err := m.RunningSidecar(ctx)
	if err != nil {
		return policy.Rules{}, err
	}
	e, err := m.setScope(ctx, c.ID, scope, &rules)
	return e.Rules, err
}

// State is the sidecar's policy (without tokens) and counters.
type State struct {
	Policy *policy.File    `json:"policy"`
	Stats  json.RawMessage `json:"stats"`
}

// ReadState asks the running sidecar for its state.
func (m *Manager) ReadState(ctx context.Context, c *container.InspectResponse) (State, error) {
	var out, errb bytes.Buffer
	code, err := m.helperExec(ctx, c.ID, proxy.StateArgs{PolicyFile: PolicyFile, StatsFile: StatsFile}.Argv(), nil, &out, &errb)
	if err != nil {
		return State{}, err
	}
	if code != 0 {
		return State{}, core.Errorf(CodeEgressUnavailable, "the egress sidecar could not report its state: %s", strings.TrimSpace(errb.String()))
	}
	var st State
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || st.Policy == nil {
		return State{}, core.Errorf(CodeEgressUnavailable, "bad state from the egress sidecar: %v", err)
	}
	return st, nil
}

// RunningSidecar returns the sidecar when it runs, starting it when it
// exists but stopped; it never creates one (reading policies and logs does
// not start a proxy that was never asked for). It brings the sidecar's
// view of the engine's networks up to date.
func (m *Manager) RunningSidecar(ctx context.Context) (*container.InspectResponse, error) {
	c, err := m.sidecar(ctx)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, core.Errorf(CodeEgressNotRunning, "the egress sidecar is not running: start it with `docker sandbox egress start` (a proxy-mode exec starts it too)")
	}
	if running(c) && !outdated(c) {
		return c, m.refresh(ctx, c, settingsFromLabels(c.Config.Labels))
	}
	c2, _, err := m.Ensure(ctx)
	return c2, err
}

// helperExec runs the helper in the sidecar (by its ID: the container that
// was checked) and returns its exit code.
func (m *Manager) helperExec(ctx context.Context, id string, args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	r, err := helpercall.Do(ctx, m.Engine, helpercall.Call{Container: id,
		Exec: container.ExecOptions{
			User: core.SandboxUser, AttachStdin: stdin != nil, AttachStdout: true, AttachStderr: true,
			Cmd: append([]string{core.HelperPath}, args...),
		},
		Stdin: stdin, Stdout: stdout, Stderr: stderr, CloseOnCancel: true, Inspect: true,
	})
	switch step, err := helpercall.Split(err); step {
	case helpercall.Create:
		if notFound(err) || strings.Contains(err.Error(), "is not running") {
			return -1, core.Errorf(CodeEgressNotRunning, "the egress sidecar is not running: start it with `docker sandbox egress start`")
		}
		return -1, core.EngineError(err, "cannot run the helper in the egress sidecar")
	case helpercall.Attach:
		return -1, core.EngineError(err, "cannot attach to the egress sidecar")
	case helpercall.Stream:
		if ctx.Err() != nil {
			return -1, ctx.Err()
		}
		if errors.Is(err, io.ErrClosedPipe) {
			return 0, nil
		}
		return -1, core.Wrap(CodeEgressUnavailable, err, "lost the egress sidecar's stream")
	case helpercall.Inspect:
		return -1, core.EngineError(err, "cannot read the helper's exit code in the egress sidecar")
	}
	return r.ExitCode, nil
}

// Stop stops the sidecar. Its settings are kept (in its labels, and in its
// volume), so that the next start or proxy-mode exec brings it back as it
// was. With remove, it removes the sidecar and the scope networks no
// sandbox uses; the volume, with the credentials, the policies, the log and
// the settings, stays either way. It reports whether there was a sidecar
// and which networks it removed.
func (m *Manager) Stop(ctx context.Context, remove bool) (bool, []string, error) {
	c, err := m.sidecar(ctx)
	if err != nil || c == nil {
		return false, nil, err
	}
	if !remove {
		timeout := 5
		if err := m.Engine.ContainerStop(ctx, c.ID, container.StopOptions{Timeout: &timeout}); err != nil && !notFound(err) {
			return false, nil, core.EngineError(err, "cannot stop the egress sidecar")
		}
		return true, nil, nil
	}
	if err := m.remove(ctx, c); err != nil {
		return false, nil, err
	}
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
