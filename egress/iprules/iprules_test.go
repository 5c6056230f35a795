package iprules

import (
	"net/netip"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		addr     string
		class    Class
		rng      string
		embedded string // "" = none
	}{
		// Public.
		{"8.8.8.8", Public, "", ""},
		{"1.1.1.1", Public, "", ""},
		{"93.184.216.34", Public, "", ""},
		{"2606:4700:4700::1111", Public, "", ""},
		{"2a00:1450:4001:82a::200e", Public, "", ""},
		// Private: listable.
		{"10.0.0.5", Private, "private", ""},
		{"172.16.0.1", Private, "private", ""},
		{"172.31.255.255", Private, "private", ""},
		{"192.168.1.1", Private, "private", ""},
		{"100.64.0.1", Private, "shared address space", ""},
		{"fd12:3456::1", Private, "unique local", ""},
		{"fc00::1", Private, "unique local", ""},
		// Edges of the private ranges.
		{"172.15.255.255", Public, "", ""},
		{"172.32.0.0", Public, "", ""},
		{"100.63.255.255", Public, "", ""},
		{"100.128.0.0", Public, "", ""},
		// Never: loopback, this network, link-local, metadata.
		{"127.0.0.1", Never, "loopback", ""},
		{"127.255.255.254", Never, "loopback", ""},
		{"0.0.0.0", Never, "this network", ""},
		{"0.1.2.3", Never, "this network", ""},
		{"169.254.169.254", Never, "link-local (cloud metadata)", ""},
		{"169.254.170.2", Never, "link-local (cloud metadata)", ""},
		{"100.100.100.200", Never, "cloud metadata (Alibaba)", ""},
		{"fd00:ec2::254", Never, "cloud metadata (AWS IPv6)", ""},
		{"::1", Never, "loopback", ""},
		{"::", Never, "unspecified", ""},
		{"fe80::1", Never, "link-local", ""},
		{"fec0::1", Never, "site-local", ""},
		// Other IPv4 special-purpose ranges.
		{"192.0.0.8", Never, "IETF protocol assignments", ""},
		{"192.0.0.170", Never, "IETF protocol assignments", ""},
		{"192.0.2.1", Never, "documentation", ""},
		{"198.51.100.7", Never, "documentation", ""},
		{"203.0.113.9", Never, "documentation", ""},
		{"198.18.0.1", Never, "benchmarking", ""},
		{"198.19.255.255", Never, "benchmarking", ""},
		{"192.88.99.1", Never, "6to4 relay anycast", ""},
		{"192.31.196.1", Never, "AS112", ""},
		{"192.52.193.1", Never, "AMT", ""},
		{"192.175.48.1", Never, "AS112 direct delegation", ""},
		{"224.0.0.1", Never, "multicast", ""},
		{"239.255.255.250", Never, "multicast", ""},
		{"240.0.0.1", Never, "reserved", ""},
		{"255.255.255.255", Never, "broadcast", ""},
		// IPv6 forms that embed IPv4: never, whatever they carry.
		{"::ffff:127.0.0.1", Never, "IPv4-mapped", "127.0.0.1"},
		{"::ffff:8.8.8.8", Never, "IPv4-mapped", "8.8.8.8"},
		{"::ffff:169.254.169.254", Never, "IPv4-mapped", "169.254.169.254"},
		{"::127.0.0.1", Never, "IPv4-compatible", "127.0.0.1"},
		{"::ffff:0:10.0.0.1", Never, "IPv4-translated", "10.0.0.1"},
		{"64:ff9b::7f00:1", Never, "NAT64", "127.0.0.1"},
		{"64:ff9b::a9fe:a9fe", Never, "NAT64", "169.254.169.254"},
		{"64:ff9b::808:808", Never, "NAT64", "8.8.8.8"},
		{"64:ff9b:1::1", Never, "local-use NAT64", ""},
		{"2002:7f00:1::1", Never, "6to4", "127.0.0.1"},
		{"2002:a9fe:a9fe::", Never, "6to4", "169.254.169.254"},
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", Never, "Teredo", "127.0.0.1"},
		{"2001:0:0:0:0:0:f5ff:fffe", Never, "Teredo", "10.0.0.1"},
		{"2001:2::1", Never, "IETF protocol assignments", ""},
		{"2001:db8::1", Never, "documentation", ""},
		{"3fff::1", Never, "documentation", ""},
		{"100::1", Never, "discard-only", ""},
		{"ff02::1", Never, "multicast", ""},
		{"5f00::1", Never, "SRv6 SIDs", ""},
		{"4000::1", Never, "not global unicast", ""},
		{"::2", Never, "IPv4-compatible", "0.0.0.2"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			v := Classify(netip.MustParseAddr(tt.addr))
			if v.Class != tt.class || v.Range != tt.rng {
				t.Fatalf("Classify(%s) = %v %q, want %v %q", tt.addr, v.Class, v.Range, tt.class, tt.rng)
			}
			got := ""
			if v.Embedded.IsValid() {
				got = v.Embedded.String()
			}
			if got != tt.embedded {
				t.Fatalf("Classify(%s).Embedded = %q, want %q", tt.addr, got, tt.embedded)
			}
			if v.Class != Public && v.String() == "" {
				t.Fatalf("empty description")
			}
		})
	}
}

func TestClassifyZoneAndInvalid(t *testing.T) {
	if v := Classify(netip.MustParseAddr("fe80::1%eth0")); v.Class != Never {
		t.Fatalf("zoned address: %v", v)
	}
	if v := Classify(netip.MustParseAddr("2606:4700::1%eth0")); v.Class != Never || v.Range != "scoped address" {
		t.Fatalf("zoned public address: %v", v)
	}
	if v := Classify(netip.Addr{}); v.Class != Never {
		t.Fatalf("invalid address: %v", v)
	}
}

func TestEmbeddedRangeReported(t *testing.T) {
	v := Classify(netip.MustParseAddr("::ffff:127.0.0.1"))
	if v.EmbeddedRange != "loopback" {
		t.Fatalf("EmbeddedRange = %q", v.EmbeddedRange)
	}
	if s := v.String(); s != "IPv4-mapped (::ffff:0.0.0.0/96) embedding 127.0.0.1, loopback" {
		t.Fatalf("String() = %q", s)
	}
}

func TestIsMetadata(t *testing.T) {
	for _, s := range []string{"169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254"} {
		if !IsMetadata(netip.MustParseAddr(s)) {
			t.Errorf("%s is metadata", s)
		}
	}
	for _, s := range []string{"10.0.0.1", "8.8.8.8", "fd00::1", "127.0.0.1"} {
		if IsMetadata(netip.MustParseAddr(s)) {
			t.Errorf("%s is not metadata", s)
		}
	}
}

// FuzzClassify checks properties that hold for any address, from rules
// written independently of the table: the IPv6 forms that carry an IPv4
// address are never reachable and report the address they carry; what the
// standard library calls loopback, link-local, multicast, unspecified or
// private is never public; a public IPv6 address is global unicast; a
// private one is RFC 1918, shared address space or unique local.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "::ffff:1.2.3.4", "2002::1", "2001::1", "8.8.8.8", "64:ff9b::1", "fd00:ec2::23", "100.100.100.200"} {
		b := netip.MustParseAddr(s).As16()
		f.Add(b[:])
	}
	f.Add([]byte{10, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var a netip.Addr
		switch len(b) {
		case 4:
			a = netip.AddrFrom4([4]byte(b))
		case 16:
			a = netip.AddrFrom16([16]byte(b))
		default:
			return
		}
		v := Classify(a)
		if v.Class != Public && (v.Range == "" || v.String() == "") {
			t.Fatalf("%s: %v with no range", a, v.Class)
		}
		if v.Class == Public && (v.Range != "" || v.Embedded.IsValid()) {
			t.Fatalf("%s: public with range %q", a, v.Range)
		}
		if a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsMulticast() || a.IsUnspecified() || a.IsInterfaceLocalMulticast() {
			if v.Class != Never {
				t.Fatalf("%s classified %v", a, v.Class)
			}
		}
		if a.IsPrivate() && v.Class == Public {
			t.Fatalf("private %s classified public", a)
		}
		if v.Class == Public && (!a.IsGlobalUnicast() || (a.Is6() && a.As16()[0]&0xe0 != 0x20)) {
			t.Fatalf("%s is public but not global unicast in 2000::/3", a)
		}
		if v.Class == Private {
			cgnat := netip.MustParsePrefix("100.64.0.0/10")
			if !a.IsPrivate() && !cgnat.Contains(a) {
				t.Fatalf("%s is private but neither RFC 1918, shared address space nor unique local", a)
			}
		}
		// Every IPv6 form of an IPv4 address is never reachable, and
		// carries that address, whatever it is.
		if a.Is4() {
			four := a.As4()
			forms := map[string]netip.Addr{
				"IPv4-mapped":     netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: four[0], 13: four[1], 14: four[2], 15: four[3]}),
				"NAT64":           netip.AddrFrom16([16]byte{0: 0, 1: 0x64, 2: 0xff, 3: 0x9b, 12: four[0], 13: four[1], 14: four[2], 15: four[3]}),
				"6to4":            netip.AddrFrom16([16]byte{0: 0x20, 1: 0x02, 2: four[0], 3: four[1], 4: four[2], 5: four[3], 15: 1}),
				"Teredo":          netip.AddrFrom16([16]byte{0: 0x20, 1: 0x01, 12: ^four[0], 13: ^four[1], 14: ^four[2], 15: ^four[3]}),
				"IPv4-translated": netip.AddrFrom16([16]byte{8: 0xff, 9: 0xff, 12: four[0], 13: four[1], 14: four[2], 15: four[3]}),
			}
			if a.As4()[0] != 0 || a.As4()[1] != 0 || a.As4()[2] != 0 || a.As4()[3] > 1 {
				forms["IPv4-compatible"] = netip.AddrFrom16([16]byte{12: four[0], 13: four[1], 14: four[2], 15: four[3]})
			}
			for name, x := range forms {
				xv := Classify(x)
				if xv.Class != Never || xv.Range != name || xv.Embedded != a {
					t.Fatalf("%s form %s of %s: %v %q embedding %v", name, x, a, xv.Class, xv.Range, xv.Embedded)
				}
				if want := Classify(a); want.Class != Public && xv.EmbeddedRange != want.Range {
					t.Fatalf("%s form %s: embedded range %q, want %q", name, x, xv.EmbeddedRange, want.Range)
				}
			}
		}
	})
}
