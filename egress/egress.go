// Package egress runs the sidecar egress proxy of docker sandbox and its
// networks, through the Engine API:
//
//	sandbox (scope A) ─┐ docker-sandbox.net.A (internal)
//	                   ├─ sidecar ─── outbound network ─── allowed hosts
//	sandbox (scope B) ─┘ docker-sandbox.net.B (internal)
//
// One sidecar per engine (container docker-sandbox.egress, from the helper
// image, running `sandbox-helper proxy`: non-root, read-only, no
// capabilities) sits on an outbound network and on one internal network
// per proxy-mode scope. A scope's sandboxes sit on that scope's network
// only: they can reach the sidecar and nothing else (the network is
// internal and its bridge has no address, so not even the engine's host).
// Their proxy URL carries the scope's credential; the sidecar's policy file,
// in its volume, holds every scope's token and rules.
//
// The policy, IP rules and the proxy itself are the stdlib-only packages
// egress/policy, egress/iprules and egress/proxy.
package egress

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// Names and fixed values.
const (
	// The plugin's own objects: names in exec's PluginObjectPrefix
	// namespace, which no scope or session name can produce.
	SidecarName   = core.PluginObjectPrefix + "egress"
	VolumeName    = core.PluginObjectPrefix + "egress-data"
	NetworkPrefix = core.PluginObjectPrefix + "net."
	ProxyPort     = 3128
	// DataDir is where the sidecar's volume is mounted (the helper image's
	// folder owned by 65532).
	DataDir    = core.UserDir
	PolicyFile = DataDir + "/policy.json"
	LogFile    = DataDir + "/egress.log"
	StatsFile  = DataDir + "/stats.json"
	// NetworksFile is the engine's networks as the plugin last pushed
	// them (addresses of the engine's host, scopes' subnets).
	NetworksFile = DataDir + "/networks.json"
	// NetworksHashLink is a symbolic link whose target is the SHA-256 of
	// the networks file (the helper keeps it).
	NetworksHashLink = NetworksFile + ".sha"
	// SettingsFile records the sidecar's settings (written by the proxy at
	// every start), so that they survive the container's removal.
	SettingsFile = DataDir + "/settings.json"
	// SidecarRevision marks what a sidecar relies on; an existing sidecar
	// of another revision is replaced (with its settings).
	SidecarRevision = "2"
)

// Kinds (exec.LabelKind) of the objects this package creates.
const (
	KindSidecar = "egress-sidecar"
	KindNetwork = "egress-network"
	KindData    = "egress-data"
)

// Labels of the sidecar (its settings) and of scope networks.
const (
	labelPrefix     = core.LabelPrefix + "egress."
	LabelOutbound   = labelPrefix + "outbound-network"
	LabelPool       = labelPrefix + "subnet-pool"
	LabelBits       = labelPrefix + "subnet-bits"
	LabelHosts      = labelPrefix + "hosts"
	LabelNoDNS      = labelPrefix + "no-dns"
	LabelSettings   = labelPrefix + "settings"
	LabelHelperID   = labelPrefix + "helper-id"
	LabelRevision   = labelPrefix + "revision"
	LabelSubnet     = labelPrefix + "subnet"
	DefaultOutbound = "bridge"
	DefaultBits     = 26
)

// DefaultPool is the range scope networks are allocated from: 1024 /26
// subnets (31 sandboxes each).
var DefaultPool = netip.MustParsePrefix("10.213.0.0/16")

// Settings are the sidecar's: fixed when it is created.
type Settings struct {
	// OutboundNetwork is the network the sidecar reaches upstreams
	// through ("" = the engine's default bridge).
	OutboundNetwork string
	// Pool is where scope networks' subnets come from (zero = DefaultPool),
	// in /Bits subnets (0 = DefaultBits).
	Pool netip.Prefix
	Bits int
	// Hosts are static names the proxy resolves without DNS: NAME=IP[,IP].
	Hosts []string
	// NoDNS makes the proxy resolve only Hosts.
	NoDNS bool
}

// Normalized fills the defaults and validates.
func (s Settings) Normalized() (Settings, error) {
	if s.OutboundNetwork == "" {
		s.OutboundNetwork = DefaultOutbound
	}
	if !s.Pool.IsValid() {
		s.Pool = DefaultPool
	}
	if s.Bits == 0 {
		s.Bits = DefaultBits
	}
	if err := CheckPool(s.Pool, s.Bits); err != nil {
		return s, core.Errorf(core.CodeBadFlag, "%v", err)
	}
	if SubnetCount(s.Pool, s.Bits) < 200 {
		return s, core.Errorf(core.CodeBadFlag, "the subnet pool %s holds only %d /%d subnets: give at least 200 (a larger pool or smaller subnets)", s.Pool, SubnetCount(s.Pool, s.Bits), s.Bits)
	}
	var hosts []string
	for _, h := range s.Hosts {
		name, ips, ok := strings.Cut(h, "=")
		ph, err := policy.ParseHost(name)
		if !ok || err != nil || ph.IsLiteral() || ips == "" {
			return s, core.Errorf(core.CodeBadFlag, "invalid --add-host %q: want NAME=IP[,IP]", h)
		}
		var canon []string
		for _, ip := range strings.Split(ips, ",") {
			a, err := netip.ParseAddr(ip)
			if err != nil || a.Zone() != "" {
				return s, core.Errorf(core.CodeBadFlag, "invalid --add-host %q: %q is not an IP address", h, ip)
			}
			canon = append(canon, a.String())
		}
		hosts = append(hosts, ph.Name+"="+strings.Join(canon, ","))
	}
	sort.Strings(hosts)
	s.Hosts = hosts
	return s, nil
}

// Hash identifies the settings.
func (s Settings) Hash() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%s\x00%v", s.OutboundNetwork, s.Pool, s.Bits, strings.Join(s.Hosts, ";"), s.NoDNS)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Describe is a short human description.
func (s Settings) Describe() string {
	d := fmt.Sprintf("outbound network %s, subnet pool %s in /%d", s.OutboundNetwork, s.Pool, s.Bits)
	if len(s.Hosts) > 0 {
		d += ", hosts " + strings.Join(s.Hosts, " ")
	}
	if s.NoDNS {
		d += ", no DNS"
	}
	return d
}

func (s Settings) labels() map[string]string {
	l := core.BaseLabels(KindSidecar)
	l[LabelOutbound] = s.OutboundNetwork
	l[LabelPool] = s.Pool.String()
	l[LabelBits] = fmt.Sprint(s.Bits)
	l[LabelHosts] = strings.Join(s.Hosts, " ")
	l[LabelNoDNS] = fmt.Sprint(s.NoDNS)
	l[LabelSettings] = s.Hash()
	return l
}

// settingsFromLabels reads a sidecar's settings back.
func settingsFromLabels(l map[string]string) Settings {
	s := Settings{OutboundNetwork: l[LabelOutbound], NoDNS: l[LabelNoDNS] == "true"}
	s.Pool, _ = netip.ParsePrefix(l[LabelPool])
	fmt.Sscan(l[LabelBits], &s.Bits)
	if h := strings.TrimSpace(l[LabelHosts]); h != "" {
		s.Hosts = strings.Fields(h)
	}
	return s
}

// NetworkName is a scope's network.
func NetworkName(scope string) string { return NetworkPrefix + scope }

// Attachment is what a proxy-mode sandbox of a scope is created with (the
// type of exec's Network, which Manager implements).
type Attachment = sbexec.Attachment

// ProxyURLFrom returns the HTTP_PROXY value of a container environment.
func ProxyURLFrom(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HTTP_PROXY="); ok {
			return v
		}
	}
	return ""
}

// ProxyEnv returns the variables a proxy-mode sandbox gets.
func ProxyEnv(proxyURL string) []string {
	noProxy := "localhost,127.0.0.1,::1"
	return []string{
		"HTTP_PROXY=" + proxyURL, "HTTPS_PROXY=" + proxyURL,
		"http_proxy=" + proxyURL, "https_proxy=" + proxyURL,
		"NO_PROXY=" + noProxy, "no_proxy=" + noProxy,
	}
}
