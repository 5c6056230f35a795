// Package iprules classifies IP addresses for the egress proxy: public
// unicast addresses, private ones that a scope may list (allow_cidrs), and
// those that are never reachable through the proxy whatever a policy says
// (loopback, link-local and cloud metadata, every other IANA special-purpose
// range, multicast, reserved space, and the IPv6 forms that embed an IPv4
// address: IPv4-mapped, IPv4-compatible, NAT64, 6to4 and Teredo).
//
// It depends on the standard library only: the proxy runs inside the
// in-container helper.
package iprules

import (
	"fmt"
	"net/netip"
	"sort"
)

// Class is what the proxy may do with an address.
type Class int

const (
	// Public is a global unicast address: reachable when the host is allowed.
	Public Class = iota
	// Private is an address of a private range (RFC 1918, shared address
	// space, unique local): reachable only inside a listed allow_cidrs prefix.
	Private
	// Never is an address the proxy never dials.
	Never
)

func (c Class) String() string {
	switch c {
	case Public:
		return "public"
	case Private:
		return "private"
	default:
		return "never"
	}
}

// Range is one entry of the table.
type Range struct {
	Prefix netip.Prefix
	Name   string
	Class  Class
	// embed extracts the IPv4 address an IPv6 form carries, if any.
	embed func(a [16]byte) netip.Addr
}

// Verdict is the classification of one address.
type Verdict struct {
	Class Class
	// Range names the range the address lies in ("" for public addresses).
	Range  string
	Prefix netip.Prefix
	// Embedded is the IPv4 address an IPv6 translation form carries
	// (IPv4-mapped, -compatible, NAT64, 6to4, Teredo); invalid otherwise.
	Embedded netip.Addr
	// EmbeddedRange names the range of Embedded ("" when public).
	EmbeddedRange string
}

// String is a short human description, e.g. "loopback (127.0.0.0/8)".
func (v Verdict) String() string {
	if v.Class == Public {
		return "public"
	}
	s := fmt.Sprintf("%s (%s)", v.Range, v.Prefix)
	if v.Embedded.IsValid() {
		er := v.EmbeddedRange
		if er == "" {
			er = "public"
		}
		s += fmt.Sprintf(" embedding %s, %s", v.Embedded, er)
	}
	return s
}

func v4at(a [16]byte, off int) netip.Addr {
	return netip.AddrFrom4([4]byte{a[off], a[off+1], a[off+2], a[off+3]})
}

func last32(a [16]byte) netip.Addr { return v4at(a, 12) }

func sixToFour(a [16]byte) netip.Addr { return v4at(a, 2) }

// teredo: the client's public IPv4 address is the last 32 bits inverted.
func teredo(a [16]byte) netip.Addr {
	return netip.AddrFrom4([4]byte{^a[12], ^a[13], ^a[14], ^a[15]})
}

func r(prefix, name string, c Class) Range {
	return Range{Prefix: netip.MustParsePrefix(prefix), Name: name, Class: c}
}

func re(prefix, name string, embed func([16]byte) netip.Addr) Range {
	x := r(prefix, name, Never)
	x.embed = embed
	return x
}

// table is every range that is not plain public unicast. Sources: the IANA
// IPv4 and IPv6 Special-Purpose Address Registries, the multicast and
// reserved spaces, and the cloud metadata endpoints. Lookups take the most
// specific prefix, so the metadata entries win over the private ranges that
// contain them.
var table = func() []Range {
	t := []Range{
		// IPv4 (RFC 6890 and successors).
		r("0.0.0.0/8", "this network", Never),
		r("10.0.0.0/8", "private", Private),
		r("100.64.0.0/10", "shared address space", Private),
		r("127.0.0.0/8", "loopback", Never),
		r("169.254.0.0/16", "link-local (cloud metadata)", Never),
		r("172.16.0.0/12", "private", Private),
		r("192.0.0.0/24", "IETF protocol assignments", Never),
		r("192.0.2.0/24", "documentation", Never),
		r("192.31.196.0/24", "AS112", Never),
		r("192.52.193.0/24", "AMT", Never),
		r("192.88.99.0/24", "6to4 relay anycast", Never),
		r("192.168.0.0/16", "private", Private),
		r("192.175.48.0/24", "AS112 direct delegation", Never),
		r("198.18.0.0/15", "benchmarking", Never),
		r("198.51.100.0/24", "documentation", Never),
		r("203.0.113.0/24", "documentation", Never),
		r("224.0.0.0/4", "multicast", Never),
		r("240.0.0.0/4", "reserved", Never),
		r("255.255.255.255/32", "broadcast", Never),
		// Cloud metadata endpoints inside otherwise listable ranges.
		r("100.100.100.200/32", "cloud metadata (Alibaba)", Never),
		r("fd00:ec2::254/128", "cloud metadata (AWS IPv6)", Never),
		r("fd00:ec2::23/128", "cloud DNS (AWS IPv6)", Never),

		// IPv6. Everything outside 2000::/3 and fc00::/7 is not global
		// unicast; the entries below name the parts that matter.
		r("::/0", "not global unicast", Never),
		r("2000::/3", "", Public),
		r("::/128", "unspecified", Never),
		r("::1/128", "loopback", Never),
		re("::ffff:0:0/96", "IPv4-mapped", last32),
		re("::/96", "IPv4-compatible", last32),
		re("::ffff:0:0:0/96", "IPv4-translated", last32),
		re("64:ff9b::/96", "NAT64", last32),
		r("64:ff9b:1::/48", "local-use NAT64", Never),
		r("100::/64", "discard-only", Never),
		r("2001::/23", "IETF protocol assignments", Never),
		re("2001::/32", "Teredo", teredo),
		r("2001:db8::/32", "documentation", Never),
		re("2002::/16", "6to4", sixToFour),
		r("2620:4f:8000::/48", "AS112", Never),
		r("3fff::/20", "documentation", Never),
		r("5f00::/16", "SRv6 SIDs", Never),
		r("fc00::/7", "unique local", Private),
		r("fe80::/10", "link-local", Never),
		r("fec0::/10", "site-local", Never),
		r("ff00::/8", "multicast", Never),
	}
	sort.SliceStable(t, func(i, j int) bool { return t[i].Prefix.Bits() > t[j].Prefix.Bits() })
	return t
}()

// Table returns a copy of the classification table, most specific first.
func Table() []Range { return append([]Range(nil), table...) }

// Classify tells what the proxy may do with a. An address with a zone, an
// invalid address and every special-purpose form are Never; the IPv6 forms
// that carry an IPv4 address are Never whatever they embed (the embedded
// address is reported, for the reason), so that no translation trick reaches
// an address the IPv4 rules refuse.
func Classify(a netip.Addr) Verdict {
	if !a.IsValid() {
		return Verdict{Class: Never, Range: "invalid address"}
	}
	if a.Zone() != "" {
		return Verdict{Class: Never, Range: "scoped address", Prefix: netip.PrefixFrom(a.WithZone(""), a.BitLen())}
	}
	for _, e := range table {
		if e.Prefix.Addr().Is4() != a.Is4() || !e.Prefix.Contains(a) {
			continue
		}
		v := Verdict{Class: e.Class, Range: e.Name, Prefix: e.Prefix}
		if e.embed != nil {
			v.Embedded = e.embed(a.As16())
			if ev := Classify(v.Embedded); ev.Class != Public {
				v.EmbeddedRange = ev.Range
			}
		}
		return v
	}
	// Unreachable for IPv6 (::/0 is in the table); IPv4 outside every
	// special range is public.
	return Verdict{Class: Public}
}

// IsMetadata reports whether a is a cloud metadata endpoint (or lies in
// IPv4 link-local space, where most of them live).
func IsMetadata(a netip.Addr) bool {
	v := Classify(a)
	switch v.Prefix {
	case netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("100.100.100.200/32"),
		netip.MustParsePrefix("fd00:ec2::254/128"), netip.MustParsePrefix("fd00:ec2::23/128"):
		return true
	}
	return false
}
