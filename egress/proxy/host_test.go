package proxy

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/egress/policy"
)

// wideOpen gives scope "star" every host, every private range and the
// test ports: only the rules no policy can lift stand between it and the
// engine's host.
func wideOpen(e *env, cidrs ...string) {
	e.t.Helper()
	if len(cidrs) == 0 {
		cidrs = []string{"0.0.0.0/0", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"}
	}
	f := testPolicy()
	f.Scopes["star"] = policy.Scope{Token: e.tokens["star"], Rules: policy.Rules{Allow: []string{"*"}, AllowCIDRs: cidrs, AllowPorts: []int{80, 443, 2375, 8080}}}
	if err := policy.WriteAtomic(e.policyFn, f.Marshal(), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// The engine's host, as the plugin lists it (every network's gateway, the
// first address of a subnet without one) or as the proxy's own network
// shows it (its next hop, its subnet's first address): refused as a
// literal, through a name, in every IPv6 form, with allow_cidrs over it;
// nothing dialled, nothing looked up for literals.
func TestEngineHostNeverDialled(t *testing.T) {
	nets := NewNetSnapshot(policy.Networks{Version: 1, Host: []netip.Addr{
		netip.MustParseAddr("172.17.0.1"), netip.MustParseAddr("172.25.0.1"), netip.MustParseAddr("fd00:dead::1"),
	}, Scopes: map[string]netip.Prefix{"star": netip.MustParsePrefix("127.0.0.0/8")}})
	targets := []string{
		"172.17.0.1:443", "172.25.0.1:2375", "[::ffff:172.25.0.1]:443", "[fd00:dead::1]:443", // pushed
		"172.30.0.1:8080", // the proxy's next hop and its subnet's first address
	}
	for _, target := range targets {
		t.Run(target, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.Networks = StaticNets{nets} })
			wideOpen(e, "0.0.0.0/0", "fd00::/8", "172.16.0.0/12")
			resp, body := e.connect("star", target)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "denied") {
				t.Fatalf("CONNECT %s: %d %s", target, resp.StatusCode, body)
			}
			if c := resp.Header.Get("X-Sandbox-Egress-Error"); c != policy.CodeDeniedRange && c != policy.CodeSpecialAddress {
				t.Fatalf("CONNECT %s: code %s", target, c)
			}
			h, _, _ := net.SplitHostPort(target)
			resp, body = e.get("star", "http://"+target+"/")
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("GET %s: %d %s", h, resp.StatusCode, body)
			}
			e.onlyDialed()
		})
	}
	// Through a name that resolves to a gateway (or has one among its
	// answers).
	e := newEnv(t, func(c *Config) { c.Networks = StaticNets{nets} })
	wideOpen(e)
	e.res.answers["gw.test"] = [][]string{{"172.25.0.1"}}
	e.res.answers["mixed.test"] = [][]string{{pubOK, "172.17.0.1"}}
	e.res.answers["hop.test"] = [][]string{{"172.30.0.1"}}
	for _, name := range []string{"gw.test:443", "mixed.test:443", "hop.test:8080"} {
		resp, body := e.connect("star", name)
		wantDenied(t, resp, body, http.StatusForbidden, policy.CodeDeniedRange)
	}
	e.onlyDialed()
	// Neighbours of those addresses are not the host.
	e.dial.routes["172.25.0.9:443"] = e.up.l.Addr().String()
	resp, _ := e.connect("star", "172.25.0.9:443")
	if resp.StatusCode != 200 {
		t.Fatalf("a neighbour of a gateway: %d", resp.StatusCode)
	}
}

// The plugin's list is re-read when it changes: a gateway added while the
// proxy runs is refused from then on.
func TestEngineHostListReloaded(t *testing.T) {
	path := t.TempDir() + "/networks.json"
	src := &NetFile{Path: path}
	e := newEnv(t, func(c *Config) { c.Networks = src })
	wideOpen(e)
	write := func(hosts ...string) {
		n := policy.Networks{Version: 1, Scopes: map[string]netip.Prefix{"star": netip.MustParsePrefix("127.0.0.0/8")}}
		for _, h := range hosts {
			n.Host = append(n.Host, netip.MustParseAddr(h))
		}
		n, _ = n.Normalized()
		if err := policy.WriteAtomic(path, n.Marshal(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("172.17.0.1")
	e.dial.routes["172.26.0.1:443"] = e.up.l.Addr().String()
	resp, _ := e.connect("star", "172.26.0.1:443")
	if resp.StatusCode != 200 {
		t.Fatalf("before the network existed: %d", resp.StatusCode)
	}
	write("172.17.0.1", "172.26.0.1")
	resp, body := e.connect("star", "172.26.0.1:443")
	wantDenied(t, resp, body, http.StatusForbidden, policy.CodeDeniedRange)
	e.onlyDialed("172.26.0.1:443")
	// A broken file keeps the last good list.
	if err := policy.WriteAtomic(path, []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, body = e.connect("star", "172.26.0.1:443")
	wantDenied(t, resp, body, http.StatusForbidden, policy.CodeDeniedRange)
}

// fakeProber says which addresses answer at one hop.
type fakeProber struct {
	mu      sync.Mutex
	host    map[netip.Addr]bool // answers at once
	late    map[netip.Addr]bool // answers only after Wait gave up
	fail    bool
	started []string
}

type fakeProbe struct {
	p *fakeProber
	a netip.Addr
}

func (f *fakeProber) Start(a, ref netip.Addr) (Probe, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, a.String()+" via "+ref.String())
	if f.fail {
		return nil, fmt.Errorf("no sockets left")
	}
	return &fakeProbe{p: f, a: a}, nil
}

func (p *fakeProbe) Wait(ctx context.Context) bool {
	p.p.mu.Lock()
	defer p.p.mu.Unlock()
	return p.p.host[p.a]
}

func (p *fakeProbe) Answered() bool {
	p.p.mu.Lock()
	defer p.p.mu.Unlock()
	return p.p.host[p.a] || p.p.late[p.a]
}

func (p *fakeProbe) Close() {}

func (f *fakeProber) probed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.started...)
}

// A private address no list names, reached through the proxy's next hop,
// is probed before it is dialled: the engine's host (it answers at one
// hop) is refused and never dialled; another private host is dialled;
// public and on-link addresses are not probed.
func TestHostProbe(t *testing.T) {
	newProbed := func(t *testing.T, fp *fakeProber) *env {
		e := newEnv(t, func(c *Config) { c.Prober = fp })
		wideOpen(e)
		for _, a := range []string{"10.77.0.9:443", "10.77.0.66:443", "172.30.5.5:443", "10.77.0.9:80", "10.77.0.66:80"} {
			e.dial.routes[a] = e.up.l.Addr().String()
		}
		return e
	}
	hostAddr, lateAddr := netip.MustParseAddr("10.77.0.1"), netip.MustParseAddr("10.77.0.66")

	t.Run("host refused before any dial", func(t *testing.T) {
		fp := &fakeProber{host: map[netip.Addr]bool{hostAddr: true}}
		e := newProbed(t, fp)
		resp, body := e.connect("star", "10.77.0.1:443")
		wantDenied(t, resp, body, http.StatusForbidden, policy.CodeDeniedRange)
		resp, body = e.get("star", "http://10.77.0.1/")
		wantDenied(t, resp, body, http.StatusForbidden, policy.CodeDeniedRange)
		e.res.answers["lan-gw.test"] = [][]string{{"10.77.0.1"}}
		resp, body = e.connect("star", "lan-gw.test:443")
		wantDenied(t, resp, body, http.StatusForbidden, policy.CodeDeniedRange)
		e.onlyDialed()
		if d := cmp.Diff([]string{"10.77.0.1 via 172.30.0.1", "10.77.0.1 via 172.30.0.1", "10.77.0.1 via 172.30.0.1"}, fp.probed()); d != "" {
			t.Fatalf("probes: %s", d)
		}
		for _, r := range e.logBuf.records(t) {
			if r.Decision != Deny || r.IP != "10.77.0.1" || r.Code != policy.CodeDeniedRange {
				t.Fatalf("log record %+v", r)
			}
		}
	})
	t.Run("other private hosts dialled", func(t *testing.T) {
		fp := &fakeProber{host: map[netip.Addr]bool{hostAddr: true}}
		e := newProbed(t, fp)
		resp, _ := e.connect("star", "10.77.0.9:443")
		if resp.StatusCode != 200 {
			t.Fatalf("a private host: %d", resp.StatusCode)
		}
		resp, body := e.get("star", "http://10.77.0.9/hello")
		if resp.StatusCode != 200 || body != "hello 10.77.0.9" {
			t.Fatalf("a private host over HTTP: %d %q", resp.StatusCode, body)
		}
		e.onlyDialed("10.77.0.9:443", "10.77.0.9:80")
	})
	t.Run("late answer closes the connection", func(t *testing.T) {
		fp := &fakeProber{late: map[netip.Addr]bool{lateAddr: true}}
		e := newProbed(t, fp)
		resp, body := e.connect("star", "10.77.0.66:443")
		wantDenied(t, resp, body, http.StatusForbidden, policy.CodeDeniedRange)
		resp, body = e.get("star", "http://10.77.0.66/hello")
		wantDenied(t, resp, body, http.StatusForbidden, policy.CodeDeniedRange)
		if got := e.up.lastHeaders(); got != nil {
			t.Fatalf("a request reached the late-answering host: %v", got)
		}
	})
	t.Run("public and on-link not probed", func(t *testing.T) {
		fp := &fakeProber{host: map[netip.Addr]bool{}}
		e := newProbed(t, fp)
		for _, a := range []string{"api.ok.test:443", pubOK + ":443", "172.30.5.5:443"} {
			resp, _ := e.connect("star", a)
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d", a, resp.StatusCode)
			}
		}
		if p := fp.probed(); len(p) != 0 {
			t.Fatalf("probed %v", p)
		}
	})
	t.Run("a probe that cannot start refuses", func(t *testing.T) {
		fp := &fakeProber{fail: true}
		e := newProbed(t, fp)
		resp, body := e.connect("star", "10.77.0.9:443")
		wantDenied(t, resp, body, http.StatusForbidden, policy.CodeDeniedRange)
		e.onlyDialed()
	})
}

// dialFrom connects to the proxy from a given loopback address.
func (e *env) rawFrom(from, req string) (*http.Response, string) {
	e.t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufioReader(c), &http.Request{Method: "CONNECT"})
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode == 200 {
		return resp, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// A scope's credential works only from the scope's own subnet: another
// scope's sandbox that learnt it (or any other address) is refused, and
// nothing is dialled.
func TestCredentialOnlyFromScopeSubnet(t *testing.T) {
	nets := NewNetSnapshot(policy.Networks{Version: 1, Scopes: map[string]netip.Prefix{
		"s1": netip.MustParsePrefix("127.0.0.0/30"), // 127.0.0.1
		"s2": netip.MustParsePrefix("127.0.0.4/30"), // 127.0.0.5
	}})
	e := newEnv(t, func(c *Config) { c.Networks = StaticNets{nets} })
	connect := func(from, scope string) (*http.Response, string) {
		auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(scope+":"+e.tokens[scope]))
		return e.rawFrom(from, "CONNECT api.ok.test:443 HTTP/1.1\r\nHost: api.ok.test:443\r\nProxy-Authorization: "+auth+"\r\n\r\n")
	}
	if resp, body := connect("127.0.0.1", "s1"); resp.StatusCode != 200 {
		t.Fatalf("s1 from its subnet: %d %s", resp.StatusCode, body)
	}
	e.onlyDialed(pubOK + ":443")
	// s1's credential from s2's subnet, from elsewhere; a scope with no
	// network ("star").
	for _, c := range [][2]string{{"127.0.0.5", "s1"}, {"127.0.0.9", "s1"}, {"127.0.0.1", "star"}, {"127.0.0.1", "s2"}} {
		resp, body := connect(c[0], c[1])
		wantDenied(t, resp, body, http.StatusForbidden, policy.CodeBadCredentials)
	}
	e.onlyDialed(pubOK + ":443")
	// No networks file yet: every credential refused.
	e2 := newEnv(t, func(c *Config) { c.Networks = StaticNets{nil} })
	resp, body := e2.connect("s1", "api.ok.test:443")
	wantDenied(t, resp, body, http.StatusForbidden, policy.CodeBadCredentials)
	e2.onlyDialed()
}

// The local view: next hops and first addresses of connected subnets
// are the host; the proxy's own address and on-link neighbours are not.
func TestLocalNet(t *testing.T) {
	l := &LocalNet{
		Addrs:    []netip.Addr{netip.MustParseAddr("172.30.0.2"), netip.MustParseAddr("10.213.0.2")},
		Prefixes: []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16"), netip.MustParsePrefix("10.213.0.0/26")},
		Routes: []Route{
			{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("172.30.5.1")},
			{Dst: netip.MustParsePrefix("172.30.0.0/16")},
			{Dst: netip.MustParsePrefix("10.213.0.0/26")},
		},
	}
	for a, want := range map[string]bool{"172.30.5.1": true, "172.30.0.1": true, "10.213.0.1": true, "::ffff:172.30.5.1": true,
		"172.30.0.2": false, "172.30.0.3": false, "10.213.0.3": false, "8.8.8.8": false} {
		if got := l.IsHost(netip.MustParseAddr(a)); got != want {
			t.Errorf("IsHost(%s) = %v", a, got)
		}
	}
	if gw, ok := l.Gateway(netip.MustParseAddr("10.77.0.1")); !ok || gw != netip.MustParseAddr("172.30.5.1") {
		t.Errorf("Gateway: %v %v", gw, ok)
	}
	if _, ok := l.Gateway(netip.MustParseAddr("172.30.9.9")); ok || !l.OnLink(netip.MustParseAddr("172.30.9.9")) {
		t.Errorf("on-link address routed through a gateway")
	}
	// This machine's own view parses (whatever it holds).
	_ = ReadLocalNet()
}

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }
