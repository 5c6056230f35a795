package policy

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/docker-sandbox/docker-sandbox/egress/iprules"
)

// DefaultPorts are the ports a scope may reach when it lists none.
var DefaultPorts = []int{80, 443}

// Rules is one scope's policy as users write it (flags, [scope.NAME]
// tables, `egress policy`).
type Rules struct {
	// Allow holds host patterns: "pypi.org" (exact), "*.example.com" (any
	// subdomain, not the apex), "*" (any host), or an IP literal.
	Allow []string `json:"allow"`
	// AllowPorts are the destination ports; empty means DefaultPorts.
	AllowPorts []int `json:"allow_ports"`
	// AllowCIDRs are prefixes whose addresses are granted, private ones
	// included: an IP literal inside one needs no host pattern, and a name
	// that matches a pattern may resolve to private addresses inside them.
	// A prefix never grants a name by itself (the proxy looks up only the
	// names a pattern allows) nor any address that is never reachable.
	AllowCIDRs []string `json:"allow_cidrs"`
	// Deny holds host patterns (the syntax of Allow) that are refused even
	// when an Allow pattern or an AllowCIDRs prefix matches: --allow '*'
	// --deny '*.internal.example'.
	Deny []string `json:"deny"`
}

// Lists returns r with every nil list empty (JSON shows [], not null).
func (r Rules) Lists() Rules {
	if r.Allow == nil {
		r.Allow = []string{}
	}
	if r.AllowPorts == nil {
		r.AllowPorts = []int{}
	}
	if r.AllowCIDRs == nil {
		r.AllowCIDRs = []string{}
	}
	if r.Deny == nil {
		r.Deny = []string{}
	}
	return r
}

// Normalize returns r with patterns and prefixes in canonical form, sorted
// and without duplicates, and validates it.
func (r Rules) Normalize() (Rules, error) {
	c, err := r.Compile()
	if err != nil {
		return Rules{}, err
	}
	out := Rules{Allow: patternList(c.patterns), AllowPorts: []int{}, AllowCIDRs: []string{}, Deny: patternList(c.deny)}
	for p := range c.ports {
		out.AllowPorts = append(out.AllowPorts, p)
	}
	sort.Ints(out.AllowPorts)
	if len(r.AllowPorts) == 0 {
		out.AllowPorts = []int{} // keep "default" visible as empty
	}
	seen := map[string]bool{}
	for _, p := range c.cidrs {
		if s := p.String(); !seen[s] {
			seen[s] = true
			out.AllowCIDRs = append(out.AllowCIDRs, s)
		}
	}
	sort.Strings(out.AllowCIDRs)
	return out, nil
}

// patternList is the canonical form of patterns: sorted, no duplicates.
func patternList(ps []Pattern) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, p := range ps {
		if s := p.String(); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// Pattern is a parsed host pattern.
type Pattern struct {
	any    bool
	suffix string // "*.suffix": the name without "*."
	exact  Host
}

// ParsePattern parses "*", "*.example.com", "example.com" or an IP literal.
func ParsePattern(s string) (Pattern, error) {
	if s == "*" {
		return Pattern{any: true}, nil
	}
	if rest, ok := strings.CutPrefix(s, "*."); ok {
		h, err := ParseHost(rest)
		if err != nil {
			return Pattern{}, fmt.Errorf("bad host pattern %q: %w", s, err)
		}
		if h.IsLiteral() {
			return Pattern{}, fmt.Errorf("bad host pattern %q: a wildcard needs a domain name, not an address", s)
		}
		return Pattern{suffix: h.Name}, nil
	}
	if strings.Contains(s, "*") {
		return Pattern{}, fmt.Errorf("bad host pattern %q: '*' is only allowed alone or as a leading \"*.\"", s)
	}
	h, err := ParseHost(s)
	if err != nil {
		return Pattern{}, fmt.Errorf("bad host pattern %q: %w", s, err)
	}
	return Pattern{exact: h}, nil
}

// String is the canonical form of the pattern.
func (p Pattern) String() string {
	switch {
	case p.any:
		return "*"
	case p.suffix != "":
		return "*." + p.suffix
	default:
		return p.exact.String()
	}
}

// Match reports whether h matches the pattern. "*.example.com" matches
// every name ending in ".example.com" but not "example.com" itself; "*"
// matches every name and literal (the address rules still apply).
func (p Pattern) Match(h Host) bool {
	switch {
	case p.any:
		return true
	case p.suffix != "":
		return h.Name != "" && strings.HasSuffix(h.Name, "."+p.suffix)
	case p.exact.IsLiteral():
		return h.IsLiteral() && p.exact.Addr == h.Addr
	default:
		return h.Name != "" && h.Name == p.exact.Name
	}
}

// Compiled is a scope's rules ready for decisions.
type Compiled struct {
	patterns []Pattern
	deny     []Pattern
	ports    map[int]bool
	cidrs    []netip.Prefix
}

// Compile parses and checks the rules.
func (r Rules) Compile() (*Compiled, error) {
	c := &Compiled{ports: map[int]bool{}}
	for _, s := range r.Allow {
		p, err := ParsePattern(s)
		if err != nil {
			return nil, err
		}
		c.patterns = append(c.patterns, p)
	}
	for _, s := range r.Deny {
		p, err := ParsePattern(s)
		if err != nil {
			return nil, fmt.Errorf("deny: %w", err)
		}
		c.deny = append(c.deny, p)
	}
	ports := r.AllowPorts
	if len(ports) == 0 {
		ports = DefaultPorts
	}
	for _, p := range ports {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("bad port %d (use 1 to 65535)", p)
		}
		c.ports[p] = true
	}
	for _, s := range r.AllowCIDRs {
		p, err := ParseCIDR(s)
		if err != nil {
			return nil, err
		}
		c.cidrs = append(c.cidrs, p)
	}
	return c, nil
}

// ParseCIDR parses a prefix ("10.0.0.0/8") or a bare address (/32, /128)
// into its masked form. Zones and IPv4-mapped prefixes are refused.
func ParseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		a, aerr := netip.ParseAddr(s)
		if aerr != nil {
			return netip.Prefix{}, fmt.Errorf("bad CIDR %q: use a prefix such as 10.0.0.0/8", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Zone() != "" || p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("bad CIDR %q: zones and IPv4-mapped prefixes are refused", s)
	}
	return p.Masked(), nil
}

// Reason codes, also sent in the X-Sandbox-Egress-Error header.
const (
	CodeAllowed         = "allowed"
	CodeAuthRequired    = "auth_required"
	CodeBadCredentials  = "bad_credentials"
	CodeBadRequest      = "bad_request"
	CodeScheme          = "scheme_not_allowed"
	CodeHostNotAllowed  = "host_not_allowed"
	CodeHostDenied      = "host_denied"
	CodePortNotAllowed  = "port_not_allowed"
	CodeMetadata        = "metadata_denied"
	CodeSpecialAddress  = "address_denied"
	CodePrivateAddress  = "private_address_not_listed"
	CodeOwnAddress      = "proxy_address_denied"
	CodeDeniedRange     = "address_range_denied"
	CodeDNS             = "dns_failed"
	CodeConnect         = "connect_failed"
	CodeTooManyTunnels  = "too_many_tunnels"
	CodeUpstream        = "upstream_failed"
	CodeNotProxyRequest = "not_a_proxy_request"
)

// Decision is the outcome of a check.
type Decision struct {
	Allow  bool
	Code   string
	Reason string
	// Addr is the address a decision about addresses is about.
	Addr netip.Addr
}

func deny(code, format string, args ...any) Decision {
	return Decision{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// metadataNames are names of cloud metadata services and loopback names,
// refused before any lookup.
var metadataNames = map[string]bool{
	"metadata.google.internal": true, "metadata.goog": true, "metadata": true,
	"instance-data": true, "instance-data.ec2.internal": true, "metadata.internal": true,
	"metadata.azure.internal": true, "metadata.platformequinix.com": true,
}

// Target is the first check, before any lookup. A literal that is never
// reachable (special-purpose, metadata, the proxy's own, a denied range) is
// refused as such. A host that a deny pattern matches is refused, whatever
// else matches. Then the port must be listed, and the host allowed: a
// name by a pattern (only then is it looked up: a scope cannot make the
// proxy resolve names it was not granted, so DNS carries nothing out), a
// literal by a pattern or an allow_cidrs prefix.
func (c *Compiled) Target(h Host, port int, g Guard) Decision {
	if h.Name != "" {
		if metadataNames[h.Name] {
			return deny(CodeMetadata, "%s is a cloud metadata service: never reachable", h.Name)
		}
		if h.Name == "localhost" || strings.HasSuffix(h.Name, ".localhost") {
			return deny(CodeSpecialAddress, "%s is a loopback name: never reachable", h.Name)
		}
	} else if d := c.never(h, h.Addr, g); !d.Allow {
		d.Addr = h.Addr
		return d
	}
	for _, p := range c.deny {
		if p.Match(h) {
			return deny(CodeHostDenied, "%s matches %s in this scope's denied hosts", h, p)
		}
	}
	if !c.ports[port] {
		return deny(CodePortNotAllowed, "port %d is not in this scope's allowed ports (%s)", port, c.portList())
	}
	for _, p := range c.patterns {
		if p.Match(h) {
			return Decision{Allow: true, Code: CodeAllowed, Reason: fmt.Sprintf("%s matches %s", h, p)}
		}
	}
	if h.IsLiteral() {
		if p, ok := c.inCIDRs(h.Addr); ok {
			return Decision{Allow: true, Code: CodeAllowed, Reason: fmt.Sprintf("%s is in %s", h, p)}
		}
		return deny(CodeHostNotAllowed, "%s is not in this scope's allowed hosts or CIDRs", h)
	}
	return deny(CodeHostNotAllowed, "%s is not in this scope's allowed hosts", h)
}

func (c *Compiled) portList() string {
	ps := make([]int, 0, len(c.ports))
	for p := range c.ports {
		ps = append(ps, p)
	}
	sort.Ints(ps)
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ", ")
}

// Guard is what the proxy always refuses beyond the special-purpose ranges.
type Guard struct {
	// Deny are prefixes never dialled: the scopes' subnet pool, the
	// gateways of the proxy's networks.
	Deny []netip.Prefix
	// Host reports whether an address is one of the engine's host's (a
	// network's gateway, a next hop of the proxy's routes): never dialled,
	// whatever allow_cidrs says.
	Host func(netip.Addr) bool
	// Own reports whether an address is one of the proxy's own.
	Own func(netip.Addr) bool
	// UnsafeAllowLoopback lets loopback addresses through when they are in
	// an allowed CIDR: for benchmarks on one machine only.
	UnsafeAllowLoopback bool
}

// Addrs is the second check, on every address the host resolved to (or its
// literal): each must be public, or private inside a listed prefix, and
// none may be special-purpose, metadata, denied by the guard or the proxy's
// own. One bad address denies the request.
func (c *Compiled) Addrs(h Host, addrs []netip.Addr, g Guard) Decision {
	if len(addrs) == 0 {
		return deny(CodeDNS, "%s has no addresses", h)
	}
	for _, a := range addrs {
		if d := c.addr(h, a, g); !d.Allow {
			d.Addr = a
			return d
		}
	}
	how := "its addresses are allowed"
	if h.IsLiteral() {
		how = "the address is allowed"
	}
	return Decision{Allow: true, Code: CodeAllowed, Reason: how}
}

func (c *Compiled) inCIDRs(a netip.Addr) (netip.Prefix, bool) {
	for _, p := range c.cidrs {
		if p.Contains(a) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// never refuses what no policy can grant: metadata, special-purpose
// addresses, the guard's ranges, the proxy's own addresses.
func (c *Compiled) never(h Host, a netip.Addr, g Guard) Decision {
	if iprules.IsMetadata(a) {
		if h.IsLiteral() {
			return deny(CodeMetadata, "%s is a cloud metadata or link-local address: never reachable", a)
		}
		return deny(CodeMetadata, "%s resolves to %s, a cloud metadata or link-local address: never reachable", h, a)
	}
	if v := iprules.Classify(a); v.Class == iprules.Never {
		if _, listed := c.inCIDRs(a); !(g.UnsafeAllowLoopback && a.IsLoopback() && listed) {
			return deny(CodeSpecialAddress, "%s is %s: never reachable", a, v)
		}
	}
	for _, p := range g.Deny {
		if p.Contains(a) || p.Contains(a.Unmap()) {
			return deny(CodeDeniedRange, "%s is in %s, which the proxy never dials (sandbox networks and gateways)", a, p)
		}
	}
	if g.Host != nil && g.Host(a.Unmap()) {
		return deny(CodeDeniedRange, "%s is an address of the engine's host (a network gateway): never reachable", a)
	}
	if g.Own != nil && g.Own(a.Unmap()) && !(g.UnsafeAllowLoopback && a.IsLoopback()) {
		return deny(CodeOwnAddress, "%s is an address of the proxy itself", a)
	}
	return Decision{Allow: true}
}

func (c *Compiled) addr(h Host, a netip.Addr, g Guard) Decision {
	if d := c.never(h, a, g); !d.Allow {
		return d
	}
	v := iprules.Classify(a)
	if _, listed := c.inCIDRs(a); v.Class == iprules.Private && !listed {
		return deny(CodePrivateAddress, "%s is %s and not in this scope's allowed CIDRs", a, v)
	}
	return Decision{Allow: true}
}
