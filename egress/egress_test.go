package egress

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLayout(t *testing.T) {
	got, err := LayoutOf(netip.MustParsePrefix("10.213.4.64/26"))
	if err != nil {
		t.Fatal(err)
	}
	want := Layout{
		Subnet:  netip.MustParsePrefix("10.213.4.64/26"),
		Gateway: netip.MustParseAddr("10.213.4.65"),
		Proxy:   netip.MustParseAddr("10.213.4.66"),
		DNS:     netip.MustParseAddr("10.213.4.67"),
		Range:   netip.MustParsePrefix("10.213.4.96/27"),
	}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Fatal(d)
	}
	for _, bad := range []string{"10.0.0.0/8", "10.0.0.0/29", "fd00::/64"} {
		if _, err := LayoutOf(netip.MustParsePrefix(bad)); err == nil {
			t.Errorf("LayoutOf(%s) accepted", bad)
		}
	}
	// The fixed addresses are outside the range the engine hands out.
	for _, bits := range []int{16, 20, 24, 26, 28} {
		l, err := LayoutOf(netip.PrefixFrom(netip.MustParseAddr("10.213.0.0"), bits))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range []netip.Addr{l.Gateway, l.Proxy, l.DNS} {
			if l.Range.Contains(a) || !l.Subnet.Contains(a) {
				t.Errorf("/%d: %s in the dynamic range %s", bits, a, l.Range)
			}
		}
	}
}

// At least 200 scopes fit with the defaults, with no overlap, and
// allocation avoids every subnet already used on the engine.
func TestAllocateManyScopes(t *testing.T) {
	used := []netip.Prefix{netip.MustParsePrefix("172.17.0.0/16"), netip.MustParsePrefix("10.213.7.0/24")}
	seen := map[netip.Prefix]string{}
	for i := 0; i < 1000; i++ {
		scope := fmt.Sprintf("scope-%d", i)
		p, err := Allocate(DefaultPool, DefaultBits, used, nil, scope)
		if err != nil {
			t.Fatalf("scope %d: %v", i, err)
		}
		if !DefaultPool.Contains(p.Addr()) || p.Bits() != DefaultBits {
			t.Fatalf("scope %d: %s outside the pool", i, p)
		}
		for _, u := range used {
			if u.Overlaps(p) {
				t.Fatalf("scope %d: %s overlaps %s (held by %s)", i, p, u, seen[u])
			}
		}
		seen[p] = scope
		used = append(used, p)
	}
	if len(seen) != 1000 {
		t.Fatalf("%d distinct subnets", len(seen))
	}
	// 1024 /26 in the pool, 4 of them under the /24 in use: 20 more fit,
	// then none.
	for i := 0; i < 20; i++ {
		p, err := Allocate(DefaultPool, DefaultBits, used, nil, fmt.Sprint("more", i))
		if err != nil {
			t.Fatalf("allocation %d: %v", 1000+i, err)
		}
		used = append(used, p)
	}
	if _, err := Allocate(DefaultPool, DefaultBits, used, nil, "one-too-many"); err == nil || !strings.Contains(err.Error(), "no free") {
		t.Fatalf("full pool: %v", err)
	}
}

func TestAllocateSkip(t *testing.T) {
	p1, _ := Allocate(DefaultPool, 28, nil, nil, "x")
	p2, err := Allocate(DefaultPool, 28, nil, map[netip.Prefix]bool{p1: true}, "x")
	if err != nil || p2 == p1 {
		t.Fatalf("skip ignored: %s %s %v", p1, p2, err)
	}
	if _, err := Allocate(netip.MustParsePrefix("10.213.0.0/16"), 30, nil, nil, "x"); err == nil {
		t.Fatal("/30 accepted")
	}
	if _, err := Allocate(netip.MustParsePrefix("10.213.1.0/16"), 26, nil, nil, "x"); err == nil {
		t.Fatal("unmasked pool accepted")
	}
}

func TestSettings(t *testing.T) {
	s, err := Settings{Hosts: []string{"B.test.=10.0.0.2", "a.test=10.0.0.1,fd00::1"}}.Normalized()
	if err != nil {
		t.Fatal(err)
	}
	if s.OutboundNetwork != "bridge" || s.Pool != DefaultPool || s.Bits != 26 {
		t.Fatalf("defaults: %+v", s)
	}
	if d := cmp.Diff([]string{"a.test=10.0.0.1,fd00::1", "b.test=10.0.0.2"}, s.Hosts); d != "" {
		t.Fatal(d)
	}
	back := settingsFromLabels(s.labels())
	back.Pool = s.Pool
	if back.Hash() != s.Hash() {
		t.Fatalf("labels round trip: %+v vs %+v", back, s)
	}
	for _, bad := range []Settings{
		{Hosts: []string{"noequals"}}, {Hosts: []string{"1.2.3.4=1.2.3.4"}}, {Hosts: []string{"a=notip"}},
		{Pool: netip.MustParsePrefix("10.213.0.0/24")}, // too small for 200 scopes
		{Bits: 30}, {Pool: netip.MustParsePrefix("fd00::/48")},
	} {
		if _, err := bad.Normalized(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestSummarize(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	line := func(scope, host string, port int, decision, code, ip string, dt int) string {
		return fmt.Sprintf(`{"time":%q,"scope":%q,"method":"CONNECT","host":%q,"port":%d,"ip":%q,"decision":%q,"code":%q}`,
			t0.Add(time.Duration(dt)*time.Second).Format(time.RFC3339), scope, host, port, ip, decision, code)
	}
	log := strings.Join([]string{
		line("s1", "pypi.org", 443, "allow", "allowed", "151.101.0.223", 0),
		line("s1", "pypi.org", 443, "allow", "allowed", "151.101.64.223", 5),
		line("s1", "files.pythonhosted.org", 443, "allow", "allowed", "151.101.1.63", 1),
		line("s1", "git.example", 9418, "allow", "connect_failed", "93.184.216.1", 2),
		line("s1", "10.0.0.5", 443, "deny", "private_address_not_listed", "10.0.0.5", 3),
		line("s2", "evil.test", 443, "deny", "host_not_allowed", "", 4),
		"not json", `{"other":1}`,
	}, "\n")
	s, err := Summarize(strings.NewReader(log), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Allowed) != 3 || s.Allowed[2].Host != "pypi.org" || s.Allowed[2].Count != 2 || len(s.Allowed[2].IPs) != 2 || !s.Allowed[2].Last.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("allowed: %+v", s.Allowed)
	}
	if len(s.Denied) != 2 || s.Denied[1].Scope != "s2" {
		t.Fatalf("denied: %+v", s.Denied)
	}
	want := "docker sandbox egress policy s1 --allow files.pythonhosted.org --allow git.example --allow pypi.org --allow-port 443 --allow-port 9418"
	if s.Suggested["s1"] != want {
		t.Fatalf("suggested %q", s.Suggested["s1"])
	}
	if _, ok := s.Suggested["s2"]; ok {
		t.Fatal("suggestion for a scope that reached nothing")
	}
	only, _ := Summarize(strings.NewReader(log), "s2")
	if len(only.Allowed) != 0 || len(only.Denied) != 1 {
		t.Fatalf("--scope s2: %+v", only)
	}

	// Learned under --allow '*' --deny: a denied host was not used, and the
	// suggestion (which lists what was used) does not grant it.
	log = strings.Join([]string{
		line("s3", "pypi.org", 443, "allow", "allowed", "151.101.0.223", 0),
		line("s3", "db.internal.example", 443, "deny", "host_denied", "", 1),
	}, "\n")
	s, _ = Summarize(strings.NewReader(log), "s3")
	if want := "docker sandbox egress policy s3 --allow pypi.org --allow-port 443"; s.Suggested["s3"] != want {
		t.Fatalf("suggested %q, want %q", s.Suggested["s3"], want)
	}
	if len(s.Denied) != 1 || s.Denied[0].Codes[0] != "host_denied" {
		t.Fatalf("denied: %+v", s.Denied)
	}
}
