package policy

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseHost(t *testing.T) {
	tests := []struct {
		in      string
		name    string // normalized name, or
		addr    string // literal
		err     string // substring of the error
		legacy  string // address a legacy IPv4 form means
		wantErr bool
	}{
		{in: "pypi.org", name: "pypi.org"},
		{in: "API.OK.TEST", name: "api.ok.test"},
		{in: "api.ok.test.", name: "api.ok.test"},
		{in: "xn--bcher-kva.example", name: "xn--bcher-kva.example"},
		{in: "under_score.example", name: "under_score.example"},
		{in: "127.0.0.1", addr: "127.0.0.1"},
		{in: "0.0.0.0", addr: "0.0.0.0"},
		{in: "[::1]", addr: "::1"},
		{in: "::1", addr: "::1"},
		{in: "[::ffff:127.0.0.1]", addr: "::ffff:127.0.0.1"},
		{in: "[fd00:ec2::254]", addr: "fd00:ec2::254"},
		{in: "2130706433", wantErr: true, legacy: "127.0.0.1"},
		{in: "0x7f000001", wantErr: true, legacy: "127.0.0.1"},
		{in: "0x7F000001", wantErr: true, legacy: "127.0.0.1"},
		{in: "0177.0.0.1", wantErr: true, legacy: "127.0.0.1"},
		{in: "127.1", wantErr: true, legacy: "127.0.0.1"},
		{in: "127.0.1", wantErr: true, legacy: "127.0.0.1"},
		{in: "0", wantErr: true, legacy: "0.0.0.0"},
		{in: "169.254.43518", wantErr: true, legacy: "169.254.169.254"},
		{in: "1.2.3.4.5", wantErr: true, err: "canonical"},
		{in: "example.123", wantErr: true, err: "canonical"},
		{in: "bücher.example", wantErr: true, err: "punycode"},
		{in: "еxample.com", wantErr: true, err: "non-ASCII"}, // Cyrillic е
		{in: "", wantErr: true},
		{in: ".", wantErr: true},
		{in: "a..b", wantErr: true, err: "empty label"},
		{in: "a.b..", wantErr: true},
		{in: "%31%32%37.0.0.1", wantErr: true},
		{in: "evil.test#", wantErr: true},
		{in: "a b", wantErr: true},
		{in: "[fe80::1%eth0]", wantErr: true, err: "zone"},
		{in: "[127.0.0.1]", wantErr: true},
		{in: "[::1", wantErr: true},
		{in: strings.Repeat("a", 64) + ".test", wantErr: true, err: "label longer"},
		{in: strings.Repeat("abcdefghi.", 26) + "test", wantErr: true, err: "longer than 253"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			h, err := ParseHost(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseHost(%q) = %+v, want an error", tt.in, h)
				}
				if tt.err != "" && !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %q does not mention %q", err, tt.err)
				}
				if tt.legacy != "" {
					var he *HostError
					if !errors.As(err, &he) || he.Legacy.String() != tt.legacy {
						t.Fatalf("error %v: want legacy address %s", err, tt.legacy)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseHost(%q): %v", tt.in, err)
			}
			got := Host{Name: tt.name}
			if tt.addr != "" {
				got = Host{Addr: netip.MustParseAddr(tt.addr)}
			}
			if h != got {
				t.Fatalf("ParseHost(%q) = %+v, want %+v", tt.in, h, got)
			}
		})
	}
}

func TestSplitHostPort(t *testing.T) {
	tests := []struct {
		in      string
		def     int
		host    string
		port    int
		wantErr bool
	}{
		{"api.ok.test:443", 0, "api.ok.test", 443, false},
		{"API.OK.TEST:443", 0, "api.ok.test", 443, false},
		{"api.ok.test.:443", 0, "api.ok.test", 443, false},
		{"api.ok.test", 80, "api.ok.test", 80, false},
		{"[::1]:443", 0, "[::1]", 443, false},
		{"[::ffff:127.0.0.1]:443", 0, "[::ffff:127.0.0.1]", 443, false},
		{"127.0.0.1:443", 0, "127.0.0.1", 443, false},
		{"api.ok.test", 0, "", 0, true},
		{"api.ok.test:", 0, "", 0, true},
		{"api.ok.test:0", 0, "", 0, true},
		{"api.ok.test:65536", 0, "", 0, true},
		{"api.ok.test:+443", 0, "", 0, true},
		{"api.ok.test:0x1bb", 0, "", 0, true},
		{"api.ok.test@evil.test:443", 0, "", 0, true},
		{"evil.test:443/path", 0, "", 0, true},
		{"::1:443", 0, "", 0, true},
		{"[::1]443", 0, "", 0, true},
		{"[::1]:", 0, "", 0, true},
		{"2130706433:80", 0, "", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			h, p, err := SplitHostPort(tt.in, tt.def)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("SplitHostPort(%q) = %v %d, want an error", tt.in, h, p)
				}
				return
			}
			if err != nil || h.String() != tt.host || p != tt.port {
				t.Fatalf("SplitHostPort(%q) = %v %d %v, want %s %d", tt.in, h, p, err, tt.host, tt.port)
			}
		})
	}
}

func TestPatternMatch(t *testing.T) {
	tests := []struct {
		pattern string
		host    string
		want    bool
	}{
		{"api.ok.test", "api.ok.test", true},
		{"api.ok.test", "API.OK.TEST", true},
		{"api.ok.test", "api.ok.test.", true},
		{"API.OK.TEST.", "api.ok.test", true},
		{"api.ok.test", "x.api.ok.test", false},
		{"api.ok.test", "ok.test", false},
		{"*.wild.test", "a.wild.test", true},
		{"*.wild.test", "a.b.wild.test", true},
		{"*.wild.test", "A.WILD.TEST.", true},
		{"*.wild.test", "wild.test", false},
		{"*.wild.test", "badwild.test", false},
		{"*.wild.test", "wild.test.evil.test", false},
		{"*.wild.test", "awild.test", false},
		{"*", "anything.example", true},
		{"*", "8.8.8.8", true},
		{"10.1.2.3", "10.1.2.3", true},
		{"10.1.2.3", "10.1.2.4", false},
		{"[2001:4860::1]", "2001:4860:0::1", true},
		{"example.com", "93.184.216.34", false},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+"~"+tt.host, func(t *testing.T) {
			p, err := ParsePattern(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			h, err := ParseHost(tt.host)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Match(h); got != tt.want {
				t.Fatalf("%s.Match(%s) = %v, want %v", tt.pattern, tt.host, got, tt.want)
			}
		})
	}
}

func TestParsePatternErrors(t *testing.T) {
	for _, s := range []string{"", "**", "*.*.test", "a.*.test", "*test", "*.", "*.1.2.3.4", "bücher.example", "a/b", "*.[::1]"} {
		if _, err := ParsePattern(s); err == nil {
			t.Errorf("ParsePattern(%q): want an error", s)
		}
	}
}

func TestNormalize(t *testing.T) {
	r := Rules{Allow: []string{"B.test.", "a.test", "b.test", "*.W.test"}, AllowPorts: []int{443, 80, 443}, AllowCIDRs: []string{"10.1.2.3/16", "10.1.0.0/16", "192.168.1.1"}}
	got, err := r.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	want := Rules{Allow: []string{"*.w.test", "a.test", "b.test"}, AllowPorts: []int{80, 443}, AllowCIDRs: []string{"10.1.0.0/16", "192.168.1.1/32"}, Deny: []string{}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
	if _, err := (Rules{AllowPorts: []int{0}}).Normalize(); err == nil {
		t.Fatal("port 0 accepted")
	}
	if _, err := (Rules{AllowCIDRs: []string{"::ffff:10.0.0.0/104"}}).Normalize(); err == nil {
		t.Fatal("IPv4-mapped prefix accepted")
	}
}

// decide runs both checks the proxy makes, with a fixed resolver.
func decide(t *testing.T, r Rules, g Guard, host string, port int, addrs ...string) Decision {
	t.Helper()
	c, err := r.Compile()
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseHost(host)
	if err != nil {
		return Decision{Code: CodeBadRequest, Reason: err.Error()}
	}
	d := c.Target(h, port, g)
	if !d.Allow {
		return d
	}
	var as []netip.Addr
	if h.IsLiteral() {
		as = []netip.Addr{h.Addr}
	}
	for _, a := range addrs {
		as = append(as, netip.MustParseAddr(a))
	}
	return c.Addrs(h, as, g)
}

// A deny pattern refuses a host whatever else matches (a pattern, "*", an
// allow_cidrs prefix), with the syntax of allow; what it does not match
// is decided as without it.
func TestDeny(t *testing.T) {
	r := Rules{Allow: []string{"*", "db.corp.test"}, AllowCIDRs: []string{"10.9.0.0/16"}, Deny: []string{"*.Internal.Example", "db.corp.test", "10.9.1.1"}}
	for _, tc := range []struct {
		host  string
		addrs []string
		code  string
	}{
		{"a.internal.example", []string{"93.184.216.1"}, CodeHostDenied},
		{"b.a.internal.example", []string{"93.184.216.1"}, CodeHostDenied},
		{"internal.example", []string{"93.184.216.1"}, CodeAllowed}, // *.x does not match the apex
		{"db.corp.test", []string{"93.184.216.1"}, CodeHostDenied},  // an exact allow too
		{"10.9.1.1", nil, CodeHostDenied},                           // in an allowed CIDR
		{"10.9.1.2", nil, CodeAllowed},
		{"pypi.org", []string{"151.101.0.223"}, CodeAllowed},
	} {
		if d := decide(t, r, Guard{}, tc.host, 443, tc.addrs...); d.Code != tc.code {
			t.Errorf("%s: %s (%s), want %s", tc.host, d.Code, d.Reason, tc.code)
		}
	}
	n, err := r.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"*.internal.example", "10.9.1.1", "db.corp.test"}, n.Deny); d != "" {
		t.Errorf("normalized deny (-want +got):\n%s", d)
	}
	if _, err := (Rules{Deny: []string{"a.*.b"}}).Normalize(); err == nil || !strings.Contains(err.Error(), "deny: bad host pattern") {
		t.Errorf("bad deny pattern: %v", err)
	}
	if n, _ := (Rules{}).Normalize(); n.Deny == nil || (Rules{}).Lists().Deny == nil {
		t.Error("an empty deny list is null, not []")
	}
}

func TestDecisions(t *testing.T) {
	base := Rules{Allow: []string{"api.ok.test", "*.wild.test", "ten.ok.test"}}
	cidr := Rules{Allow: []string{"api.ok.test"}, AllowCIDRs: []string{"10.9.0.0/16", "fd00:9::/32"}}
	star := Rules{Allow: []string{"*"}}
	pool := netip.MustParsePrefix("10.213.0.0/16")
	own := netip.MustParseAddr("172.20.0.2")
	guard := Guard{Deny: []netip.Prefix{pool}, Own: func(a netip.Addr) bool { return a == own }}
	pub := "93.184.216.34"
	tests := []struct {
		name  string
		rules Rules
		host  string
		port  int
		addrs []string
		code  string
	}{
		{"exact", base, "api.ok.test", 443, []string{pub}, CodeAllowed},
		{"upper case", base, "API.OK.TEST", 443, []string{pub}, CodeAllowed},
		{"trailing dot", base, "api.ok.test.", 443, []string{pub}, CodeAllowed},
		{"wildcard one level", base, "a.wild.test", 443, []string{pub}, CodeAllowed},
		{"wildcard two levels", base, "a.b.wild.test", 80, []string{pub}, CodeAllowed},
		{"wildcard apex", base, "wild.test", 443, []string{pub}, CodeHostNotAllowed},
		{"wildcard suffix trick", base, "badwild.test", 443, []string{pub}, CodeHostNotAllowed},
		{"wildcard as prefix", base, "wild.test.evil.test", 443, []string{pub}, CodeHostNotAllowed},
		{"other host", base, "evil.test", 443, []string{pub}, CodeHostNotAllowed},
		{"port 22", base, "api.ok.test", 22, []string{pub}, CodePortNotAllowed},
		{"port 25", base, "api.ok.test", 25, []string{pub}, CodePortNotAllowed},
		{"port 6379", base, "api.ok.test", 6379, []string{pub}, CodePortNotAllowed},
		{"allowed name to private", base, "ten.ok.test", 443, []string{"10.0.0.5"}, CodePrivateAddress},
		{"allowed name to loopback", base, "api.ok.test", 443, []string{"127.0.0.1"}, CodeSpecialAddress},
		{"allowed name, one bad address", base, "api.ok.test", 443, []string{pub, "127.0.0.1"}, CodeSpecialAddress},
		{"allowed name to metadata", base, "api.ok.test", 80, []string{"169.254.169.254"}, CodeMetadata},
		{"allowed name to mapped loopback", base, "api.ok.test", 443, []string{"::ffff:127.0.0.1"}, CodeSpecialAddress},
		{"allowed name to nat64 metadata", base, "api.ok.test", 443, []string{"64:ff9b::a9fe:a9fe"}, CodeSpecialAddress},
		{"allowed name to 6to4", base, "api.ok.test", 443, []string{"2002:7f00:1::1"}, CodeSpecialAddress},
		{"allowed name to teredo", base, "api.ok.test", 443, []string{"2001:0:4136:e378:8000:63bf:80ff:fffe"}, CodeSpecialAddress},
		{"allowed name to pool", cidr, "api.ok.test", 443, []string{"10.213.0.7"}, CodeDeniedRange},
		{"allowed name to proxy", base, "api.ok.test", 443, []string{"172.20.0.2"}, CodeOwnAddress},
		{"no addresses", base, "api.ok.test", 443, nil, CodeDNS},
		{"metadata name", star, "metadata.google.internal", 80, []string{pub}, CodeMetadata},
		{"metadata name upper", star, "METADATA.google.internal.", 80, []string{pub}, CodeMetadata},
		{"localhost name", star, "localhost", 80, []string{"127.0.0.1"}, CodeSpecialAddress},
		{"star public", star, "anything.example", 443, []string{pub}, CodeAllowed},
		{"star public literal", star, pub, 443, nil, CodeAllowed},
		{"star private", star, "anything.example", 443, []string{"192.168.1.1"}, CodePrivateAddress},
		{"star loopback literal", star, "127.0.0.1", 443, nil, CodeSpecialAddress},
		{"loopback literal before port", base, "127.0.0.1", 3128, nil, CodeSpecialAddress},
		{"pool literal before pattern", base, "10.213.0.9", 8000, nil, CodeDeniedRange},
		{"star v6 loopback", star, "[::1]", 443, nil, CodeSpecialAddress},
		{"star mapped", star, "[::ffff:127.0.0.1]", 443, nil, CodeSpecialAddress},
		{"star zero", star, "0.0.0.0", 443, nil, CodeSpecialAddress},
		{"star metadata literal", star, "169.254.169.254", 80, nil, CodeMetadata},
		{"star aws v6 metadata", star, "[fd00:ec2::254]", 80, nil, CodeMetadata},
		{"star legacy form", star, "2130706433", 80, nil, CodeBadRequest},
		{"star hex form", star, "0x7f000001", 80, nil, CodeBadRequest},
		{"star octal form", star, "0177.0.0.1", 80, nil, CodeBadRequest},
		{"star short form", star, "127.1", 80, nil, CodeBadRequest},
		{"cidr literal", cidr, "10.9.1.2", 443, nil, CodeAllowed},
		{"cidr literal outside", cidr, "10.8.1.2", 443, nil, CodeHostNotAllowed},
		// A prefix does not grant names: they need a pattern (no lookup
		// of names a scope was not granted).
		{"cidr name inside", cidr, "db.corp.test", 443, []string{"10.9.3.4"}, CodeHostNotAllowed},
		{"cidr pattern private outside", cidr, "api.ok.test", 443, []string{"10.8.3.4"}, CodePrivateAddress},
		{"cidr v6 ula", cidr, "[fd00:9::5]", 443, nil, CodeAllowed},
		{"cidr pattern to private listed", cidr, "api.ok.test", 443, []string{"10.9.0.1"}, CodeAllowed},
		{"cidr cannot unlock metadata", Rules{AllowCIDRs: []string{"169.254.0.0/16"}}, "169.254.169.254", 80, nil, CodeMetadata},
		{"cidr cannot unlock loopback", Rules{AllowCIDRs: []string{"127.0.0.0/8"}}, "127.0.0.1", 80, nil, CodeSpecialAddress},
		{"cidr cannot unlock alibaba", Rules{AllowCIDRs: []string{"100.64.0.0/10"}}, "100.100.100.200", 80, nil, CodeMetadata},
		{"cidr cannot unlock pool", Rules{AllowCIDRs: []string{"10.0.0.0/8"}}, "10.213.0.67", 443, nil, CodeDeniedRange},
		{"cidr cannot unlock own", Rules{AllowCIDRs: []string{"172.16.0.0/12"}}, "172.20.0.2", 443, nil, CodeOwnAddress},
		{"empty policy", Rules{}, "api.ok.test", 443, []string{pub}, CodeHostNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decide(t, tt.rules, guard, tt.host, tt.port, tt.addrs...)
			if d.Code != tt.code {
				t.Fatalf("%s:%d %v: got %s (%s), want %s", tt.host, tt.port, tt.addrs, d.Code, d.Reason, tt.code)
			}
			if d.Allow != (tt.code == CodeAllowed) {
				t.Fatalf("Allow = %v for code %s", d.Allow, d.Code)
			}
			if d.Reason == "" {
				t.Fatal("no reason")
			}
		})
	}
}

func TestUnsafeAllowLoopback(t *testing.T) {
	r := Rules{Allow: []string{"*"}, AllowCIDRs: []string{"127.0.0.1/32"}, AllowPorts: []int{8080}}
	if d := decide(t, r, Guard{UnsafeAllowLoopback: true}, "127.0.0.1", 8080); !d.Allow {
		t.Fatalf("benchmark loopback: %+v", d)
	}
	if d := decide(t, r, Guard{UnsafeAllowLoopback: true}, "127.0.0.2", 8080); d.Allow {
		t.Fatalf("loopback outside the listed prefix allowed")
	}
	if d := decide(t, r, Guard{}, "127.0.0.1", 8080); d.Allow {
		t.Fatalf("loopback allowed without the unsafe switch")
	}
}

func TestFileRoundTripAndAuth(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.json")
	f, err := Update(path, func(f *File) error {
		f.Scopes["s1"] = Scope{Token: NewToken(), Rules: Rules{Allow: []string{"pypi.org"}}}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	g, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(f, g); d != "" {
		t.Fatal(d)
	}
	tok := g.Scopes["s1"].Token
	if _, ok := g.Authenticate("s1", tok); !ok {
		t.Fatal("right token refused")
	}
	for _, c := range [][2]string{{"s1", tok + "x"}, {"s1", ""}, {"s2", tok}, {"", ""}} {
		if _, ok := g.Authenticate(c[0], c[1]); ok {
			t.Fatalf("Authenticate(%q, %q) accepted", c[0], c[1])
		}
	}
	if r := g.Redacted(); r.Scopes["s1"].Token != "" || g.Scopes["s1"].Token == "" {
		t.Fatal("Redacted")
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode: %v %v", fi.Mode(), err)
	}
}

func TestParseRejects(t *testing.T) {
	for _, s := range []string{
		`{"version":2,"scopes":{}}`,
		`{"version":1,"scopes":{"bad name":{"token":"0123456789abcdef0123"}}}`,
		`{"version":1,"scopes":{"s":{"token":"short"}}}`,
		`{"version":1,"scopes":{"s":{"token":"0123456789abcdef0123","allow":["**"]}}}`,
		`{"version":1,"unknown":1}`,
		`not json`,
	} {
		if _, err := Parse([]byte(s)); err == nil {
			t.Errorf("Parse(%s): want an error", s)
		}
	}
}

// Concurrent updates of different scopes lose nothing.
func TestUpdateConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.json")
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name := "s" + string(rune('a'+i))
			if _, err := Update(path, func(f *File) error {
				f.Scopes[name] = Scope{Token: NewToken()}
				return nil
			}); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Scopes) != 20 {
		t.Fatalf("%d scopes, want 20", len(f.Scopes))
	}
}

// FuzzParseHost: whatever the input, an accepted host is canonical and
// unambiguous: a name holds only [a-z0-9_-] labels of 1 to 63 characters,
// at most 253 in all, and its last label is not a number (no parser could
// take it for an IPv4 address); a literal has no zone; parsing is
// idempotent, case-blind and ignores one trailing dot.
func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"api.ok.test", "[::1]", "2130706433", "0x7f.1", "a..b", "xn--x", "1.2.3.4.5", "0x", "00", "A.B.", "[::ffff:127.0.0.1]", "1.2.3.04", "a.0x1g"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHost(s)
		if err != nil {
			var he *HostError
			if errors.As(err, &he) && he.Legacy.IsValid() && !he.Legacy.Is4() {
				t.Fatalf("ParseHost(%q): legacy form of a non-IPv4 %v", s, he.Legacy)
			}
			return
		}
		if (h.Name != "") == h.IsLiteral() {
			t.Fatalf("ParseHost(%q) = %+v: neither or both of a name and a literal", s, h)
		}
		h2, err := ParseHost(h.String())
		if err != nil || h2 != h {
			t.Fatalf("ParseHost(%q) = %v, reparsed %v %v", s, h, h2, err)
		}
		if h.IsLiteral() {
			if h.Addr.Zone() != "" {
				t.Fatalf("ParseHost(%q): zone kept", s)
			}
			return
		}
		if len(h.Name) > 253 {
			t.Fatalf("ParseHost(%q): %d characters", s, len(h.Name))
		}
		labels := strings.Split(h.Name, ".")
		for _, l := range labels {
			if len(l) < 1 || len(l) > 63 {
				t.Fatalf("ParseHost(%q): label %q", s, l)
			}
			for _, c := range l {
				if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
					t.Fatalf("ParseHost(%q): character %q", s, c)
				}
			}
		}
		last := labels[len(labels)-1]
		// The WHATWG rule: a last label of decimal digits, or 0x and hex
		// digits, makes the host an IPv4 address.
		hexNum := strings.HasPrefix(last, "0x") && strings.Trim(last[2:], "0123456789abcdef") == ""
		if strings.Trim(last, "0123456789") == "" || hexNum {
			t.Fatalf("ParseHost(%q) = name %q whose last label is a number", s, h.Name)
		}
		if _, err := netip.ParseAddr(h.Name); err == nil {
			t.Fatalf("ParseHost(%q) = name %q that is an address", s, h.Name)
		}
		for _, v := range []string{strings.ToUpper(s), h.Name + "."} {
			if hv, err := ParseHost(v); err != nil || hv != h {
				t.Fatalf("ParseHost(%q) = %v %v, want %v like %q", v, hv, err, h, s)
			}
		}
	})
}

// FuzzSplitHostPort: an accepted authority has a port in range and a host
// ParseHost accepts; it holds none of the characters that make URL
// parsers disagree; host:port rebuilt from the result parses the same; and
// the default port applies exactly when no port is written.
func FuzzSplitHostPort(f *testing.F) {
	for _, s := range []string{"a:1", "[::1]:443", "x@y:1", "[:", "]:", "a:99999", "a.test", "[::1]", "a:0443", "A.TEST.:80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, def := range []int{0, 80} {
			h, p, err := SplitHostPort(s, def)
			if err != nil {
				continue
			}
			if p < 1 || p > 65535 || (h.Name == "" && !h.Addr.IsValid()) {
				t.Fatalf("SplitHostPort(%q, %d) = %v %d", s, def, h, p)
			}
			if strings.ContainsAny(s, "@/?#\\ \t\r\n%") {
				t.Fatalf("SplitHostPort(%q) accepted URL syntax", s)
			}
			if hh, err := ParseHost(h.String()); err != nil || hh != h {
				t.Fatalf("SplitHostPort(%q): host %v does not reparse: %v", s, h, err)
			}
			h2, p2, err := SplitHostPort(h.String()+":"+strconv.Itoa(p), 0)
			if err != nil || h2 != h || p2 != p {
				t.Fatalf("SplitHostPort(%q) = %v %d, rebuilt %v %d %v", s, h, p, h2, p2, err)
			}
			hasPort := strings.Contains(s[strings.LastIndex(s, "]")+1:], ":")
			if def != 0 && !hasPort && p != def {
				t.Fatalf("SplitHostPort(%q, %d): port %d without a written port", s, def, p)
			}
			if def == 0 && !hasPort {
				t.Fatalf("SplitHostPort(%q, 0) accepted an authority without a port", s)
			}
		}
	})
}

// Loopback and metadata names are refused before any lookup: here the
// names would resolve to a public address, so only that rule can refuse
// them (the address check would let them through).
func TestNamesRefusedBeforeLookup(t *testing.T) {
	star := Rules{Allow: []string{"*"}}
	pub := "93.184.216.34"
	for _, tt := range []struct {
		host string
		code string
	}{
		{"localhost", CodeSpecialAddress},
		{"LOCALHOST", CodeSpecialAddress},
		{"localhost.", CodeSpecialAddress},
		{"a.localhost", CodeSpecialAddress},
		{"x.y.LocalHost.", CodeSpecialAddress},
		{"metadata.google.internal", CodeMetadata},
		{"metadata", CodeMetadata},
		{"instance-data", CodeMetadata},
		{"instance-data.ec2.internal", CodeMetadata},
		{"metadata.azure.internal", CodeMetadata},
	} {
		c, err := star.Compile()
		if err != nil {
			t.Fatal(err)
		}
		h, err := ParseHost(tt.host)
		if err != nil {
			t.Fatal(err)
		}
		d := c.Target(h, 80, Guard{})
		if d.Allow || d.Code != tt.code {
			t.Errorf("%s before any lookup: %+v, want %s", tt.host, d, tt.code)
		}
		// And both checks together, with a public answer.
		if d := decide(t, star, Guard{}, tt.host, 80, pub); d.Allow || d.Code != tt.code {
			t.Errorf("%s answering %s: %+v, want %s", tt.host, pub, d, tt.code)
		}
	}
	// Names that only look alike are ordinary names.
	for _, h := range []string{"localhost.example", "notlocalhost", "localhostx.test", "metadata.example"} {
		if d := decide(t, star, Guard{}, h, 80, pub); !d.Allow {
			t.Errorf("%s refused: %+v", h, d)
		}
	}
}

// An address of the engine's host is refused whatever the policy says, as
// a literal or among a name's answers, allow_cidrs included.
func TestEngineHostRefused(t *testing.T) {
	host := netip.MustParseAddr("172.25.0.1")
	g := Guard{Host: func(a netip.Addr) bool { return a == host }}
	wide := Rules{Allow: []string{"*"}, AllowCIDRs: []string{"0.0.0.0/0", "172.25.0.0/16", "172.25.0.1/32"}, AllowPorts: []int{80, 443, 8080}}
	for _, tt := range []struct {
		host  string
		addrs []string
	}{
		{"172.25.0.1", nil},
		{"[::ffff:172.25.0.1]", nil},
		{"gw.test", []string{"172.25.0.1"}},
		{"gw.test", []string{"93.184.216.34", "172.25.0.1"}},
	} {
		d := decide(t, wide, g, tt.host, 8080, tt.addrs...)
		if d.Allow || (d.Code != CodeDeniedRange && d.Code != CodeSpecialAddress) {
			t.Errorf("%s %v: %+v", tt.host, tt.addrs, d)
		}
	}
	if d := decide(t, wide, g, "172.25.0.2", 8080); !d.Allow {
		t.Errorf("a neighbour of the host's address refused: %+v", d)
	}
}
