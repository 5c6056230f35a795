// Package policy is the per-scope egress policy of docker sandbox: host
// patterns, ports and CIDRs, the parsing of destination hosts, the decision
// the proxy makes for each request, and the policy file the sidecar reads.
//
// Hosts are parsed, never matched as raw strings: case is folded, one
// trailing dot is dropped, IPv4 literals must be canonical dotted quads (the
// legacy forms 2130706433, 0x7f000001, 0177.0.0.1 and 127.1 are refused and
// reported with the address they mean), IPv6 literals need brackets in an
// authority and may not carry a zone, and percent-encoding, userinfo and
// other URL syntax are refused. The standard library has no IDNA support, so
// a host with non-ASCII characters is refused: give its punycode form
// (xn--...), which is plain ASCII and matched as such.
//
// It depends on the standard library only: the proxy runs inside the
// in-container helper.
package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Host is a parsed destination host: a name or an IP literal.
type Host struct {
	// Name is the normalized name (ASCII lower case, no trailing dot); ""
	// for an IP literal.
	Name string
	// Addr is the IP literal; invalid for a name.
	Addr netip.Addr
}

// IsLiteral reports whether h is an IP literal.
func (h Host) IsLiteral() bool { return h.Addr.IsValid() }

// String is the host as it appears in an authority (IPv6 in brackets).
func (h Host) String() string {
	if !h.Addr.IsValid() {
		return h.Name
	}
	if h.Addr.Is6() {
		return "[" + h.Addr.String() + "]"
	}
	return h.Addr.String()
}

// HostError is a host that cannot be used; Legacy is set when it is a
// legacy IPv4 form, to the address it means.
type HostError struct {
	Host   string
	Msg    string
	Legacy netip.Addr
}

func (e *HostError) Error() string { return fmt.Sprintf("host %q: %s", e.Host, e.Msg) }

func hostErr(h, format string, args ...any) error {
	return &HostError{Host: h, Msg: fmt.Sprintf(format, args...)}
}

const (
	maxName  = 253
	maxLabel = 63
)

// ParseHost parses a host without a port: a DNS name, an IPv4 literal, or
// an IPv6 literal with or without brackets.
func ParseHost(s string) (Host, error) {
	orig := s
	if s == "" {
		return Host{}, hostErr(orig, "empty host")
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return Host{}, hostErr(orig, "non-ASCII host names are refused: use the punycode (xn--) form")
		}
	}
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return Host{}, hostErr(orig, "unterminated IPv6 literal")
		}
		return parseV6(orig, s[1:len(s)-1])
	}
	if strings.Contains(s, ":") {
		return parseV6(orig, s)
	}
	s = strings.ToLower(s)
	s = strings.TrimSuffix(s, ".")
	if s == "" {
		return Host{}, hostErr(orig, "empty host")
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
		return Host{Addr: a}, nil
	}
	labels := strings.Split(s, ".")
	if endsInNumber(labels[len(labels)-1]) {
		e := &HostError{Host: orig, Msg: "not a canonical IPv4 address (use the dotted decimal form a.b.c.d)"}
		if a, ok := parseLegacyIPv4(labels); ok {
			e.Legacy = a
			e.Msg = fmt.Sprintf("legacy IPv4 form of %s refused (use the dotted decimal form)", a)
		}
		return Host{}, e
	}
	if len(s) > maxName {
		return Host{}, hostErr(orig, "name longer than %d characters", maxName)
	}
	for _, l := range labels {
		if l == "" {
			return Host{}, hostErr(orig, "empty label")
		}
		if len(l) > maxLabel {
			return Host{}, hostErr(orig, "label longer than %d characters", maxLabel)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return Host{}, hostErr(orig, "character %q not allowed in a host name", c)
			}
		}
	}
	return Host{Name: s}, nil
}

func parseV6(orig, s string) (Host, error) {
	if strings.Contains(s, "%") {
		return Host{}, hostErr(orig, "IPv6 zones are refused")
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() {
		return Host{}, hostErr(orig, "not an IPv6 address")
	}
	return Host{Addr: a}, nil
}

// endsInNumber is the WHATWG URL rule: a host whose last label is a number
// (decimal, or hexadecimal with 0x) is an IPv4 address, never a name.
func endsInNumber(l string) bool {
	if l == "" {
		return false
	}
	if allDigits(l) {
		return true
	}
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		for i := 2; i < len(l); i++ {
			if !isHex(l[i]) {
				return false
			}
		}
		return true
	}
	return false
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// parseLegacyIPv4 reads the forms inet_aton and the WHATWG URL parser
// accept (1 to 4 parts, each decimal, octal with a leading 0, or hex with
// 0x), only to report what a refused host means.
func parseLegacyIPv4(parts []string) (netip.Addr, bool) {
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		base := 10
		switch {
		case len(p) >= 2 && (p[:2] == "0x" || p[:2] == "0X"):
			base, p = 16, p[2:]
			if p == "" {
				p = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, p = 8, p[1:]
		}
		n, err := strconv.ParseUint(p, base, 64)
		if err != nil {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	last := len(nums) - 1
	for _, n := range nums[:last] {
		if n > 255 {
			return netip.Addr{}, false
		}
	}
	if nums[last] >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v := nums[last]
	for i, n := range nums[:last] {
		v |= n << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// ErrNoPort is returned by SplitHostPort for an authority without a port
// when no default applies.
var ErrNoPort = errors.New("missing port")

// SplitHostPort parses an authority "host[:port]" (IPv6 in brackets).
// defaultPort is used when the port is absent; 0 makes a port required.
// Userinfo ("user@host") and anything but a decimal port are refused.
func SplitHostPort(authority string, defaultPort int) (Host, int, error) {
	if strings.ContainsAny(authority, "@/?#\\ \t\r\n%") {
		return Host{}, 0, hostErr(authority, "not a plain host[:port] (userinfo, paths and escapes are refused)")
	}
	host, portStr := authority, ""
	if strings.HasPrefix(authority, "[") {
		end := strings.Index(authority, "]")
		if end < 0 {
			return Host{}, 0, hostErr(authority, "unterminated IPv6 literal")
		}
		host = authority[:end+1]
		rest := authority[end+1:]
		if rest != "" {
			if rest[0] != ':' {
				return Host{}, 0, hostErr(authority, "junk after the IPv6 literal")
			}
			portStr = rest[1:]
			if portStr == "" {
				return Host{}, 0, hostErr(authority, "empty port")
			}
		}
	} else if i := strings.LastIndexByte(authority, ':'); i >= 0 {
		host, portStr = authority[:i], authority[i+1:]
		if strings.Contains(host, ":") {
			return Host{}, 0, hostErr(authority, "IPv6 literals need brackets")
		}
		if portStr == "" {
			return Host{}, 0, hostErr(authority, "empty port")
		}
	}
	port := defaultPort
	if portStr != "" {
		if !allDigits(portStr) || len(portStr) > 5 {
			return Host{}, 0, hostErr(authority, "bad port %q", portStr)
		}
		port, _ = strconv.Atoi(portStr)
	}
	if port == 0 && defaultPort == 0 && portStr == "" {
		return Host{}, 0, ErrNoPort
	}
	if port < 1 || port > 65535 {
		return Host{}, 0, hostErr(authority, "port %d out of range", port)
	}
	h, err := ParseHost(host)
	if err != nil {
		return Host{}, 0, err
	}
	return h, port, nil
}
