package iprules

import (
	"net/netip"
	"testing"
)

// tableCase is one hand-written expectation: an address, the class and
// range it must get, and the IPv4 address an IPv6 translation form embeds.
type tableCase struct {
	addr     string
	class    Class
	rng      string
	embedded string
}

const (
	ngu   = "not global unicast"
	priv  = "private"
	ula   = "unique local"
	cgnat = "shared address space"
)

// alwaysDenied holds, for EVERY entry of the classification table, an
// address inside (its first and last address where that matters) and the
// addresses just outside on each side, with what they must be. Nothing here
// is computed from the table under test: a removed, shifted or widened
// entry fails one of these.
var alwaysDenied = []tableCase{
	// 0.0.0.0/8 this network
	{"0.0.0.0", Never, "this network", ""},
	{"0.255.255.255", Never, "this network", ""},
	{"1.0.0.0", Public, "", ""},
	// 10.0.0.0/8 private
	{"9.255.255.255", Public, "", ""},
	{"10.0.0.0", Private, priv, ""},
	{"10.255.255.255", Private, priv, ""},
	{"11.0.0.0", Public, "", ""},
	// 100.64.0.0/10 shared address space
	{"100.63.255.255", Public, "", ""},
	{"100.64.0.0", Private, cgnat, ""},
	{"100.127.255.255", Private, cgnat, ""},
	{"100.128.0.0", Public, "", ""},
	// 100.100.100.200/32 Alibaba metadata, inside the shared space
	{"100.100.100.199", Private, cgnat, ""},
	{"100.100.100.200", Never, "cloud metadata (Alibaba)", ""},
	{"100.100.100.201", Private, cgnat, ""},
	// 127.0.0.0/8 loopback
	{"126.255.255.255", Public, "", ""},
	{"127.0.0.0", Never, "loopback", ""},
	{"127.255.255.255", Never, "loopback", ""},
	{"128.0.0.0", Public, "", ""},
	// 169.254.0.0/16 link-local and metadata
	{"169.253.255.255", Public, "", ""},
	{"169.254.0.0", Never, "link-local (cloud metadata)", ""},
	{"169.254.169.254", Never, "link-local (cloud metadata)", ""},
	{"169.254.255.255", Never, "link-local (cloud metadata)", ""},
	{"169.255.0.0", Public, "", ""},
	// 172.16.0.0/12 private
	{"172.15.255.255", Public, "", ""},
	{"172.16.0.0", Private, priv, ""},
	{"172.31.255.255", Private, priv, ""},
	{"172.32.0.0", Public, "", ""},
	// 192.0.0.0/24 IETF protocol assignments
	{"191.255.255.255", Public, "", ""},
	{"192.0.0.0", Never, "IETF protocol assignments", ""},
	{"192.0.0.255", Never, "IETF protocol assignments", ""},
	{"192.0.1.0", Public, "", ""},
	// 192.0.2.0/24 documentation
	{"192.0.1.255", Public, "", ""},
	{"192.0.2.0", Never, "documentation", ""},
	{"192.0.2.255", Never, "documentation", ""},
	{"192.0.3.0", Public, "", ""},
	// 192.31.196.0/24 AS112
	{"192.31.195.255", Public, "", ""},
	{"192.31.196.0", Never, "AS112", ""},
	{"192.31.196.255", Never, "AS112", ""},
	{"192.31.197.0", Public, "", ""},
	// 192.52.193.0/24 AMT
	{"192.52.192.255", Public, "", ""},
	{"192.52.193.0", Never, "AMT", ""},
	{"192.52.193.255", Never, "AMT", ""},
	{"192.52.194.0", Public, "", ""},
	// 192.88.99.0/24 6to4 relay anycast
	{"192.88.98.255", Public, "", ""},
	{"192.88.99.0", Never, "6to4 relay anycast", ""},
	{"192.88.99.255", Never, "6to4 relay anycast", ""},
	{"192.88.100.0", Public, "", ""},
	// 192.168.0.0/16 private
	{"192.167.255.255", Public, "", ""},
	{"192.168.0.0", Private, priv, ""},
	{"192.168.255.255", Private, priv, ""},
	{"192.169.0.0", Public, "", ""},
	// 192.175.48.0/24 AS112 direct delegation
	{"192.175.47.255", Public, "", ""},
	{"192.175.48.0", Never, "AS112 direct delegation", ""},
	{"192.175.48.255", Never, "AS112 direct delegation", ""},
	{"192.175.49.0", Public, "", ""},
	// 198.18.0.0/15 benchmarking
	{"198.17.255.255", Public, "", ""},
	{"198.18.0.0", Never, "benchmarking", ""},
	{"198.19.255.255", Never, "benchmarking", ""},
	{"198.20.0.0", Public, "", ""},
	// 198.51.100.0/24 documentation
	{"198.51.99.255", Public, "", ""},
	{"198.51.100.0", Never, "documentation", ""},
	{"198.51.100.255", Never, "documentation", ""},
	{"198.51.101.0", Public, "", ""},
	// 203.0.113.0/24 documentation
	{"203.0.112.255", Public, "", ""},
	{"203.0.113.0", Never, "documentation", ""},
	{"203.0.113.255", Never, "documentation", ""},
	{"203.0.114.0", Public, "", ""},
	// 224.0.0.0/4 multicast
	{"223.255.255.255", Public, "", ""},
	{"224.0.0.0", Never, "multicast", ""},
	{"239.255.255.255", Never, "multicast", ""},
	// 240.0.0.0/4 reserved, 255.255.255.255/32 broadcast
	{"240.0.0.0", Never, "reserved", ""},
	{"255.255.255.254", Never, "reserved", ""},
	{"255.255.255.255", Never, "broadcast", ""},

	// IPv6: ::/0 outside 2000::/3 and fc00::/7, and its named parts.
	{"::", Never, "unspecified", ""},
	{"::1", Never, "loopback", ""},
	// ::/96 IPv4-compatible (beyond :: and ::1)
	{"::2", Never, "IPv4-compatible", "0.0.0.2"},
	{"::127.0.0.1", Never, "IPv4-compatible", "127.0.0.1"},
	{"::8.8.8.8", Never, "IPv4-compatible", "8.8.8.8"},
	{"::255.255.255.255", Never, "IPv4-compatible", "255.255.255.255"},
	{"::1:0:0", Never, ngu, ""},
	// ::ffff:0:0/96 IPv4-mapped
	{"::fffe:ffff:ffff", Never, ngu, ""},
	{"::ffff:0.0.0.0", Never, "IPv4-mapped", "0.0.0.0"},
	{"::ffff:127.0.0.1", Never, "IPv4-mapped", "127.0.0.1"},
	{"::ffff:8.8.8.8", Never, "IPv4-mapped", "8.8.8.8"},
	{"::ffff:169.254.169.254", Never, "IPv4-mapped", "169.254.169.254"},
	{"::ffff:255.255.255.255", Never, "IPv4-mapped", "255.255.255.255"},
	{"::1:0:0:0", Never, ngu, ""},
	// ::ffff:0:0:0/96 IPv4-translated
	{"::fffe:ffff:ffff:ffff", Never, ngu, ""},
	{"::ffff:0:0.0.0.0", Never, "IPv4-translated", "0.0.0.0"},
	{"::ffff:0:10.0.0.1", Never, "IPv4-translated", "10.0.0.1"},
	{"::ffff:0:255.255.255.255", Never, "IPv4-translated", "255.255.255.255"},
	{"::ffff:1:0:0", Never, ngu, ""},
	// 64:ff9b::/96 NAT64
	{"64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", Never, ngu, ""},
	{"64:ff9b::", Never, "NAT64", "0.0.0.0"},
	{"64:ff9b::7f00:1", Never, "NAT64", "127.0.0.1"},
	{"64:ff9b::a9fe:a9fe", Never, "NAT64", "169.254.169.254"},
	{"64:ff9b::808:808", Never, "NAT64", "8.8.8.8"},
	{"64:ff9b::ffff:ffff", Never, "NAT64", "255.255.255.255"},
	{"64:ff9b::1:0:0", Never, ngu, ""},
	// 64:ff9b:1::/48 local-use NAT64
	{"64:ff9b:0:ffff:ffff:ffff:ffff:ffff", Never, ngu, ""},
	{"64:ff9b:1::", Never, "local-use NAT64", ""},
	{"64:ff9b:1:ffff:ffff:ffff:ffff:ffff", Never, "local-use NAT64", ""},
	{"64:ff9b:2::", Never, ngu, ""},
	// 100::/64 discard-only
	{"ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Never, ngu, ""},
	{"100::", Never, "discard-only", ""},
	{"100::ffff:ffff:ffff:ffff", Never, "discard-only", ""},
	{"100:0:0:1::", Never, ngu, ""},
	// 2000::/3 global unicast, and its edges
	{"1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Never, ngu, ""},
	{"2000::", Public, "", ""},
	{"2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Public, "", ""},
	{"3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Public, "", ""},
	{"4000::", Never, ngu, ""},
	// 2001::/23 IETF protocol assignments, with 2001::/32 Teredo inside
	{"2001::", Never, "Teredo", "255.255.255.255"},
	{"2001:0:4136:e378:8000:63bf:80ff:fffe", Never, "Teredo", "127.0.0.1"},
	{"2001:0:0:0:0:0:f5ff:fffe", Never, "Teredo", "10.0.0.1"},
	{"2001:0:0:0:0:0:f7f7:f7f7", Never, "Teredo", "8.8.8.8"},
	{"2001:0:ffff:ffff:ffff:ffff:ffff:ffff", Never, "Teredo", "0.0.0.0"},
	{"2001:1::", Never, "IETF protocol assignments", ""},
	{"2001:2::1", Never, "IETF protocol assignments", ""},
	{"2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", Never, "IETF protocol assignments", ""},
	{"2001:200::", Public, "", ""},
	// 2001:db8::/32 documentation
	{"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", Public, "", ""},
	{"2001:db8::", Never, "documentation", ""},
	{"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", Never, "documentation", ""},
	{"2001:db9::", Public, "", ""},
	// 2002::/16 6to4
	{"2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Public, "", ""},
	{"2002::", Never, "6to4", "0.0.0.0"},
	{"2002:7f00:1::1", Never, "6to4", "127.0.0.1"},
	{"2002:a9fe:a9fe::", Never, "6to4", "169.254.169.254"},
	{"2002:808:808::1", Never, "6to4", "8.8.8.8"},
	{"2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Never, "6to4", "255.255.255.255"},
	{"2003::", Public, "", ""},
	// 2620:4f:8000::/48 AS112
	{"2620:4f:7fff:ffff:ffff:ffff:ffff:ffff", Public, "", ""},
	{"2620:4f:8000::", Never, "AS112", ""},
	{"2620:4f:8000:ffff:ffff:ffff:ffff:ffff", Never, "AS112", ""},
	{"2620:4f:8001::", Public, "", ""},
	// 3fff::/20 documentation
	{"3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Public, "", ""},
	{"3fff::", Never, "documentation", ""},
	{"3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", Never, "documentation", ""},
	{"3fff:1000::", Public, "", ""},
	// 5f00::/16 SRv6 SIDs
	{"5eff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Never, ngu, ""},
	{"5f00::", Never, "SRv6 SIDs", ""},
	{"5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Never, "SRv6 SIDs", ""},
	{"5f01::", Never, ngu, ""},
	// fc00::/7 unique local, with the AWS metadata and DNS inside
	{"fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Never, ngu, ""},
	{"fc00::", Private, ula, ""},
	{"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Private, ula, ""},
	{"fd00:ec2::22", Private, ula, ""},
	{"fd00:ec2::23", Never, "cloud DNS (AWS IPv6)", ""},
	{"fd00:ec2::24", Private, ula, ""},
	{"fd00:ec2::253", Private, ula, ""},
	{"fd00:ec2::254", Never, "cloud metadata (AWS IPv6)", ""},
	{"fd00:ec2::255", Private, ula, ""},
	{"fe00::", Never, ngu, ""},
	// fe80::/10 link-local
	{"fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Never, ngu, ""},
	{"fe80::", Never, "link-local", ""},
	{"febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Never, "link-local", ""},
	// fec0::/10 site-local
	{"fec0::", Never, "site-local", ""},
	{"feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Never, "site-local", ""},
	// ff00::/8 multicast
	{"ff00::", Never, "multicast", ""},
	{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Never, "multicast", ""},
}

func TestAlwaysDeniedTable(t *testing.T) {
	for _, tt := range alwaysDenied {
		a := netip.MustParseAddr(tt.addr)
		v := Classify(a)
		got := ""
		if v.Embedded.IsValid() {
			got = v.Embedded.String()
		}
		if v.Class != tt.class || v.Range != tt.rng || got != tt.embedded {
			t.Errorf("Classify(%s) = %v %q embedding %q, want %v %q embedding %q", tt.addr, v.Class, v.Range, got, tt.class, tt.rng, tt.embedded)
		}
	}
}

// Every entry of the table has at least one hand-written expectation above
// inside it, so that an entry added later cannot go untested.
func TestAlwaysDeniedCoversTable(t *testing.T) {
	for _, e := range Table() {
		covered := false
		for _, tt := range alwaysDenied {
			a := netip.MustParseAddr(tt.addr)
			if a.Is4() == e.Prefix.Addr().Is4() && e.Prefix.Contains(a) && tt.rng == e.Name {
				covered = true
				break
			}
		}
		if !covered && e.Class != Public {
			t.Errorf("table entry %s (%s) has no hand-written expectation in alwaysDenied", e.Prefix, e.Name)
		}
	}
}
