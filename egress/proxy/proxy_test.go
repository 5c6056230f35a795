package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/egress/policy"
)

// Addresses the fake resolver hands out. The fake dialer connects the
// public ones to the test's upstream on loopback and refuses (and records)
// everything else.
const (
	pubOK    = "93.184.216.34" // api.ok.test, *.wild.test
	pubEvil  = "93.184.216.66" // evil.test
	pubOther = "93.184.216.77" // other.test, in no policy
)

type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]string // name -> successive answers (the last repeats)
	calls   map[string]int
	block   bool // never answer (until the context ends)
}

func (f *fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	n := f.calls[host]
	f.calls[host]++
	ans, ok := f.answers[host]
	block := f.block
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, &net.DNSError{Err: "timeout", Name: host, IsTimeout: true}
	}
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	if n >= len(ans) {
		n = len(ans) - 1
	}
	var out []netip.Addr
	for _, s := range ans[n] {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

func (f *fakeResolver) lookups() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.calls {
		out[k] = v
	}
	return out
}

type fakeDialer struct {
	mu     sync.Mutex
	dials  []string
	routes map[string]string // "ip:port" -> real loopback address
	block  bool              // hang until the context ends
}

func (f *fakeDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	f.mu.Lock()
	f.dials = append(f.dials, address)
	real, ok := f.routes[address]
	block := f.block
	f.mu.Unlock()
	if _, err := netip.ParseAddrPort(address); err != nil {
		return nil, fmt.Errorf("test: dial of a non-literal %q", address)
	}
	if block {
		<-ctx.Done()
		return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
	}
	if !ok {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused")}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, real)
}

func (f *fakeDialer) dialed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.dials...)
}

// env is a proxy with a fake resolver and dialer in front of a loopback
// upstream.
type env struct {
	t        testing.TB
	srv      *Server
	addr     string // the proxy's listen address
	res      *fakeResolver
	dial     *fakeDialer
	logBuf   *syncBuffer
	up       *upstream
	tokens   map[string]string
	policyFn string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) records(t *testing.T) []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Record
	for _, line := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if line == "" {
			continue
		}
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// upstream is the test's origin server: HTTP on one listener, and a TCP
// echo-ish HTTP server reached through tunnels.
type upstream struct {
	l       net.Listener
	mu      sync.Mutex
	headers []http.Header
}

func newUpstream(t testing.TB) *upstream {
	u := &upstream{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.l = l
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.headers = append(u.headers, r.Header.Clone())
		u.mu.Unlock()
		fmt.Fprintf(w, "hello %s", r.Host)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		_, _ = io.Copy(w, r.Body)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte("x"), 1<<20))
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return u
}

func (u *upstream) lastHeaders() http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.headers) == 0 {
		return nil
	}
	return u.headers[len(u.headers)-1]
}

// The test policy: scope "s1" (api.ok.test, *.wild.test, ten.ok.test,
// rebind.ok.test; ports 80 and 443), "star" (every host), "s2" (other.test).
func testPolicy() *policy.File {
	return &policy.File{Version: policy.FileVersion, Scopes: map[string]policy.Scope{
		"s1":   {Token: "tok-s1-0123456789abcdef", Rules: policy.Rules{Allow: []string{"api.ok.test", "*.wild.test", "ten.ok.test", "rebind.ok.test"}}},
		"star": {Token: "tok-star-0123456789abcdef", Rules: policy.Rules{Allow: []string{"*"}}},
		"s2":   {Token: "tok-s2-0123456789abcdef", Rules: policy.Rules{Allow: []string{"other.test"}}},
	}}
}

// testLocal is the proxy's own network in these tests: on 172.30.0.0/16
// (its address .2; the engine's host .1, its next hop), nothing else.
var testLocal = &LocalNet{
	Addrs:    []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("172.30.0.2")},
	Prefixes: []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16")},
	Routes: []Route{
		{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("172.30.0.1")},
		{Dst: netip.MustParsePrefix("172.30.0.0/16")},
	},
}

func newEnv(t testing.TB, mod func(*Config)) *env {
	t.Helper()
	up := newUpstream(t)
	e := &env{t: t, up: up, logBuf: &syncBuffer{}, tokens: map[string]string{}}
	f := testPolicy()
	for n, s := range f.Scopes {
		e.tokens[n] = s.Token
	}
	e.policyFn = filepath.Join(t.TempDir(), "policy.json")
	if err := policy.WriteAtomic(e.policyFn, f.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	e.res = &fakeResolver{answers: map[string][][]string{
		"api.ok.test":         {{pubOK}},
		"a.wild.test":         {{pubOK}},
		"a.b.wild.test":       {{pubOK}},
		"wild.test":           {{pubOK}},
		"badwild.test":        {{pubOK}},
		"wild.test.evil.test": {{pubOK}},
		"evil.test":           {{pubEvil}},
		"other.test":          {{pubOther}},
		"ten.ok.test":         {{"10.0.0.5"}},
		// DNS rebinding: first a public answer, then loopback (TTL 0).
		"rebind.ok.test": {{pubOK}, {"127.0.0.1"}},
	}}
	ua := up.l.Addr().String()
	e.dial = &fakeDialer{routes: map[string]string{
		pubOK + ":80": ua, pubOK + ":443": ua, pubOther + ":80": ua,
	}}
	cfg := Config{
		Policy:   &FileSource{Path: e.policyFn},
		Resolver: e.res,
		Dialer:   e.dial,
		Deny:     []netip.Prefix{netip.MustParsePrefix("10.213.0.0/16")},
		Own:      func(a netip.Addr) bool { return a == netip.MustParseAddr("172.30.0.2") },
		Local:    func() *LocalNet { return testLocal },
		Log:      NewLogger(e.logBuf),
		ErrorLog: log.New(&panicCatcher{t: t}, "", 0),
	}
	if mod != nil {
		mod(&cfg)
	}
	e.srv = New(cfg)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = l.Addr().String()
	go e.srv.Serve(l)
	t.Cleanup(func() { e.srv.Close() })
	return e
}

// panicCatcher fails the test when the HTTP server reports a panic.
type panicCatcher struct{ t testing.TB }

func (p *panicCatcher) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("panic")) {
		p.t.Errorf("server error log: %s", b)
	}
	return len(b), nil
}

// panicFlag records the server's panic reports.
type panicFlag struct {
	mu  sync.Mutex
	msg string
}

func (p *panicFlag) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if bytes.Contains(b, []byte("panic")) {
		p.msg = string(b)
	}
	return len(b), nil
}

func (p *panicFlag) get() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.msg
}

func (e *env) auth(scope string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(scope+":"+e.tokens[scope]))
}

// raw sends req verbatim on a new connection and reads one response.
func (e *env) raw(req string) (*http.Response, string) {
	e.t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		e.t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var hr *http.Request
	if strings.HasPrefix(req, "CONNECT ") {
		hr = &http.Request{Method: "CONNECT"} // a 200 has no body
	}
	resp, err := http.ReadResponse(br, hr)
	if err != nil {
		e.t.Fatalf("reading the response to %q: %v", req, err)
	}
	if hr != nil && resp.StatusCode == 200 {
		return resp, "" // an open tunnel
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func (e *env) get(scope, rawURL string) (*http.Response, string) {
	return e.raw("GET " + rawURL + " HTTP/1.1\r\nHost: ignored.test\r\nProxy-Authorization: " + e.auth(scope) + "\r\nConnection: close\r\n\r\n")
}

func (e *env) connect(scope, authority string, extra ...string) (*http.Response, string) {
	return e.raw("CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n" + strings.Join(extra, "") + "Proxy-Authorization: " + e.auth(scope) + "\r\n\r\n")
}

// noDials fails if anything but the allowed upstream addresses was dialled.
func (e *env) onlyDialed(want ...string) {
	e.t.Helper()
	got := e.dial.dialed()
	if len(want) == 0 {
		want = nil
	}
	if d := cmp.Diff(want, got); d != "" {
		e.t.Fatalf("dials (-want +got):\n%s", d)
	}
}

func wantDenied(t *testing.T, resp *http.Response, body string, status int, code string) {
	t.Helper()
	if resp.StatusCode != status || resp.Header.Get("X-Sandbox-Egress-Error") != code {
		t.Fatalf("got %d %q (%s), want %d %s", resp.StatusCode, resp.Header.Get("X-Sandbox-Egress-Error"), body, status, code)
	}
	if !strings.Contains(body, code) || len(body) < 20 {
		t.Fatalf("body %q gives no reason", body)
	}
}

func TestHostileConnectLoopback(t *testing.T) {
	for _, target := range []string{"127.0.0.1:443", "[::1]:443", "[::ffff:127.0.0.1]:443", "0.0.0.0:443", "127.0.0.2:443", "[::]:443", "[::127.0.0.1]:443", "[64:ff9b::7f00:1]:443", "[2002:7f00:1::]:443"} {
		t.Run(target, func(t *testing.T) {
			e := newEnv(t, nil)
			resp, body := e.connect("star", target)
			wantDenied(t, resp, body, http.StatusForbidden, policy.CodeSpecialAddress)
			e.onlyDialed()
		})
	}
}

func TestHostileLegacyIPv4(t *testing.T) {
	for _, u := range []string{"http://2130706433/", "http://0x7f000001/", "http://0177.0.0.1/", "http://127.1/", "http://0x7f.1/", "http://017700000001/"} {
		t.Run(u, func(t *testing.T) {
			e := newEnv(t, nil)
			resp, body := e.get("star", u)
			wantDenied(t, resp, body, http.StatusForbidden, policy.CodeBadRequest)
			if !strings.Contains(body, "127.0.0.1") {
				t.Fatalf("body does not say what the form means: %s", body)
			}
			e.onlyDialed()
			if n := len(e.res.lookups()); n != 0 {
				t.Fatalf("%d lookups for a literal", n)
			}
		})
	}
}

func TestHostileMetadata(t *testing.T) {
	tests := []struct{ method, target, code string }{
		{"GET", "http://169.254.169.254/latest/meta-data/", policy.CodeMetadata},
		{"GET", "http://[fd00:ec2::254]:80/latest/meta-data/", policy.CodeMetadata},
		{"CONNECT", "[fd00:ec2::254]:80", policy.CodeMetadata},
		{"GET", "http://metadata.google.internal/computeMetadata/v1/", policy.CodeMetadata},
		{"GET", "http://METADATA.GOOGLE.INTERNAL./", policy.CodeMetadata},
		{"GET", "http://100.100.100.200/", policy.CodeMetadata},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			e := newEnv(t, func(c *Config) {})
			// Even a scope that lists every private range cannot reach them.
			_ = policy.WriteAtomic(e.policyFn, (&policy.File{Version: 1, Scopes: map[string]policy.Scope{
				"star": {Token: e.tokens["star"], Rules: policy.Rules{Allow: []string{"*"}, AllowCIDRs: []string{"169.254.0.0/16", "fc00::/7", "100.64.0.0/10"}}},
			}}).Marshal(), 0o600)
			var resp *http.Response
			var body string
			if tt.method == "CONNECT" {
				resp, body = e.connect("star", tt.target)
			} else {
				resp, body = e.get("star", tt.target)
			}
			wantDenied(t, resp, body, http.StatusForbidden, tt.code)
			e.onlyDialed()
			if n := len(e.res.lookups()); n != 0 {
				t.Fatalf("looked up %v", e.res.lookups())
			}
		})
	}
}

func TestHostilePrivateAnswer(t *testing.T) {
	e := newEnv(t, nil)
	resp, body := e.get("s1", "http://ten.ok.test/")
	wantDenied(t, resp, body, http.StatusForbidden, policy.CodePrivateAddress)
	e.onlyDialed()
	recs := e.logBuf.records(t)
	if len(recs) != 1 || recs[0].IP != "10.0.0.5" || recs[0].Decision != Deny {
		t.Fatalf("log: %+v", recs)
	}
}

func TestHostileRebinding(t *testing.T) {
	e := newEnv(t, nil)
	// One request: one lookup (public), and the dial goes to that literal,
	// although a second lookup would now say 127.0.0.1.
	resp, body := e.get("s1", "http://rebind.ok.test/hello")
	if resp.StatusCode != 200 || body != "hello rebind.ok.test" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if d := cmp.Diff(map[string]int{"rebind.ok.test": 1}, e.res.lookups()); d != "" {
		t.Fatalf("lookups: %s", d)
	}
	e.onlyDialed(pubOK + ":80")
	// The next request gets the rebound answer and is refused: no dial.
	resp, body = e.connect("s1", "rebind.ok.test:443")
	wantDenied(t, resp, body, http.StatusForbidden, policy.CodeSpecialAddress)
	e.onlyDialed(pubOK + ":80")
	if d := cmp.Diff(map[string]int{"rebind.ok.test": 2}, e.res.lookups()); d != "" {
		t.Fatalf("lookups: %s", d)
	}
}

func TestHostNormalizationAndWildcards(t *testing.T) {
	allowed := []string{"API.OK.TEST:443", "api.ok.test.:443", "a.wild.test:443", "a.b.wild.test:443"}
	for _, a := range allowed {
		t.Run(a, func(t *testing.T) {
			e := newEnv(t, nil)
			resp, _ := e.connect("s1", a)
			if resp.StatusCode != 200 {
				t.Fatalf("CONNECT %s: %d %s", a, resp.StatusCode, resp.Header.Get("X-Sandbox-Egress-Error"))
			}
			e.onlyDialed(pubOK + ":443")
		})
	}
	denied := []string{"wild.test:443", "badwild.test:443", "wild.test.evil.test:443", "evil.test:443"}
	for _, a := range denied {
		t.Run(a, func(t *testing.T) {
			e := newEnv(t, nil)
			resp, body := e.connect("s1", a)
			wantDenied(t, resp, body, http.StatusForbidden, policy.CodeHostNotAllowed)
			e.onlyDialed()
			if n := len(e.res.lookups()); n != 0 {
				t.Fatalf("denied host looked up: %v", e.res.lookups())
			}
		})
	}
}

func TestHostileURLConfusion(t *testing.T) {
	tests := []struct{ name, req, code string }{
		{"userinfo", "GET http://api.ok.test@evil.test/ HTTP/1.1\r\nHost: api.ok.test\r\n", policy.CodeBadRequest},
		{"fragment at", "GET http://evil.test#@api.ok.test/ HTTP/1.1\r\nHost: api.ok.test\r\n", ""},
		{"connect host header", "CONNECT evil.test:443 HTTP/1.1\r\nHost: api.ok.test:443\r\n", policy.CodeHostNotAllowed},
		{"absolute url wins over host", "GET http://evil.test/ HTTP/1.1\r\nHost: api.ok.test\r\n", policy.CodeHostNotAllowed},
		{"backslash", "GET http://evil.test\\@api.ok.test/ HTTP/1.1\r\nHost: api.ok.test\r\n", ""},
		{"encoded", "GET http://api.ok.test%2eevil.test/ HTTP/1.1\r\nHost: x\r\n", ""},
		{"connect userinfo", "CONNECT api.ok.test@evil.test:443 HTTP/1.1\r\nHost: x\r\n", policy.CodeBadRequest},
		{"connect no port", "CONNECT api.ok.test HTTP/1.1\r\nHost: x\r\n", policy.CodeBadRequest},
		{"connect path", "CONNECT api.ok.test:443/x HTTP/1.1\r\nHost: x\r\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			req := strings.Replace(tt.req, "\r\n", "\r\nProxy-Authorization: "+e.auth("s1")+"\r\n", 1) + "Connection: close\r\n\r\n"
			resp, body := e.raw(req)
			if resp.StatusCode < 400 {
				t.Fatalf("allowed: %d %s", resp.StatusCode, body)
			}
			if tt.code != "" && resp.Header.Get("X-Sandbox-Egress-Error") != tt.code {
				t.Fatalf("code %q (%s), want %s", resp.Header.Get("X-Sandbox-Egress-Error"), body, tt.code)
			}
			e.onlyDialed()
			if n := e.res.lookups()["evil.test"]; n != 0 {
				t.Fatalf("evil.test looked up")
			}
		})
	}
}

func TestHostileSchemesAndPorts(t *testing.T) {
	for _, u := range []string{"ftp://api.ok.test/file", "gopher://api.ok.test:70/", "file:///etc/passwd", "https://api.ok.test/", "FTP://api.ok.test/"} {
		t.Run(u, func(t *testing.T) {
			e := newEnv(t, nil)
			resp, body := e.get("s1", u)
			if !strings.HasPrefix(u, "file") {
				wantDenied(t, resp, body, http.StatusForbidden, policy.CodeScheme)
			} else if resp.StatusCode < 400 {
				t.Fatalf("file:// allowed: %d", resp.StatusCode)
			}
			e.onlyDialed()
		})
	}
	for _, port := range []string{"22", "25", "6379", "8080"} {
		t.Run("port "+port, func(t *testing.T) {
			e := newEnv(t, nil)
			resp, body := e.connect("s1", "api.ok.test:"+port)
			wantDenied(t, resp, body, http.StatusForbidden, policy.CodePortNotAllowed)
			resp, body = e.get("s1", "http://api.ok.test:"+port+"/")
			wantDenied(t, resp, body, http.StatusForbidden, policy.CodePortNotAllowed)
			e.onlyDialed()
		})
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	e := newEnv(t, nil)
	resp, _ := e.get("s1", "http://api.ok.test/redirect")
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "http://169.254.169.254/latest/meta-data/" {
		t.Fatalf("got %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	e.onlyDialed(pubOK + ":80")
	// A client that follows it asks the proxy again, and is refused.
	resp, body := e.get("s1", resp.Header.Get("Location"))
	wantDenied(t, resp, body, http.StatusForbidden, policy.CodeMetadata)
	e.onlyDialed(pubOK + ":80")
}

func TestHostileProtocolAbuse(t *testing.T) {
	t.Run("http2 preface", func(t *testing.T) {
		e := newEnv(t, nil)
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04\x00\x00\x00\x00\x00")
		b, _ := io.ReadAll(c)
		if bytes.HasPrefix(b, []byte("HTTP/1.1 2")) {
			t.Fatalf("HTTP/2 preface accepted: %q", b)
		}
		e.onlyDialed()
	})
	t.Run("half close after request", func(t *testing.T) {
		e := newEnv(t, nil)
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(c, "GET http://api.ok.test/hello HTTP/1.1\r\nHost: api.ok.test\r\nProxy-Authorization: "+e.auth("s1")+"\r\n\r\n")
		_ = c.(*net.TCPConn).CloseWrite()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no answer after half-close: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != "hello api.ok.test" {
			t.Fatalf("got %d %q", resp.StatusCode, b)
		}
		e.onlyDialed(pubOK + ":80")
	})
	t.Run("half close in a tunnel", func(t *testing.T) {
		e := newEnv(t, nil)
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(c, "CONNECT api.ok.test:443 HTTP/1.1\r\nHost: api.ok.test:443\r\nProxy-Authorization: "+e.auth("s1")+"\r\n\r\n"+
			"GET /hello HTTP/1.1\r\nHost: api.ok.test\r\nConnection: close\r\n\r\n")
		_ = c.(*net.TCPConn).CloseWrite()
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		resp, err = http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer through the half-closed tunnel: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "hello api.ok.test" {
			t.Fatalf("got %q", b)
		}
	})
	t.Run("headers trickled", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.HeaderTimeout = 300 * time.Millisecond })
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req := "GET http://api.ok.test/hello HTTP/1.1\r\nHost: api.ok.test\r\nProxy-Authorization: " + e.auth("s1") + "\r\n\r\n"
		start := time.Now()
		var werr error
		for i := 0; i < len(req) && werr == nil; i++ {
			_, werr = c.Write([]byte{req[i]})
			time.Sleep(20 * time.Millisecond) // the trickle itself, not synchronisation
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, _ := io.ReadAll(c)
		if bytes.Contains(b, []byte("hello")) {
			t.Fatalf("trickled request served")
		}
		if time.Since(start) > 4*time.Second {
			t.Fatalf("connection not closed by the header timeout")
		}
		e.onlyDialed()
	})
	t.Run("not a proxy request", func(t *testing.T) {
		e := newEnv(t, nil)
		resp, body := e.raw("GET / HTTP/1.1\r\nHost: " + e.addr + "\r\nProxy-Authorization: " + e.auth("s1") + "\r\n\r\n")
		wantDenied(t, resp, body, http.StatusBadRequest, policy.CodeNotProxyRequest)
		e.onlyDialed()
	})
	t.Run("garbage", func(t *testing.T) {
		e := newEnv(t, nil)
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write([]byte("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n"))
		_, _ = io.ReadAll(c)
		e.onlyDialed()
	})
}

func TestAuth(t *testing.T) {
	e := newEnv(t, nil)
	resp, body := e.raw("GET http://api.ok.test/hello HTTP/1.1\r\nHost: api.ok.test\r\n\r\n")
	wantDenied(t, resp, body, http.StatusProxyAuthRequired, policy.CodeAuthRequired)
	if !strings.HasPrefix(resp.Header.Get("Proxy-Authenticate"), "Basic ") {
		t.Fatalf("no Proxy-Authenticate: %v", resp.Header)
	}
	bad := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	for _, a := range []string{
		bad("s1", "wrong"), bad("s1", ""), bad("s1", e.tokens["s2"]), // s1 with s2's token
		bad("nosuch", e.tokens["s1"]), "Bearer " + e.tokens["s1"], "Basic !!!", "Basic " + base64.StdEncoding.EncodeToString([]byte("s1")),
	} {
		resp, body := e.raw("CONNECT api.ok.test:443 HTTP/1.1\r\nHost: api.ok.test:443\r\nProxy-Authorization: " + a + "\r\n\r\n")
		if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusProxyAuthRequired {
			t.Fatalf("credential %q: %d %s", a, resp.StatusCode, body)
		}
	}
	// A scope's valid credential does not grant another scope's hosts.
	resp, body = e.connect("s2", "api.ok.test:443")
	wantDenied(t, resp, body, http.StatusForbidden, policy.CodeHostNotAllowed)
	e.onlyDialed()
}

func TestHeadersNotForwarded(t *testing.T) {
	e := newEnv(t, nil)
	resp, body := e.raw("GET http://api.ok.test/hello HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: " + e.auth("s1") +
		"\r\nProxy-Connection: keep-alive\r\nConnection: close, X-Hop\r\nX-Hop: secret\r\nKeep-Alive: 300\r\nTE: trailers\r\nUpgrade: websocket\r\nX-Keep: yes\r\n\r\n")
	if resp.StatusCode != 200 || body != "hello api.ok.test" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	h := e.up.lastHeaders()
	for _, k := range []string{"Proxy-Authorization", "Proxy-Connection", "X-Hop", "Keep-Alive", "Te", "Upgrade"} {
		if v := h.Get(k); v != "" {
			t.Errorf("%s forwarded: %q", k, v)
		}
	}
	if h.Get("X-Keep") != "yes" {
		t.Errorf("end-to-end header dropped: %v", h)
	}
	if strings.Contains(fmt.Sprint(h), e.tokens["s1"]) {
		t.Errorf("token forwarded: %v", h)
	}
}

func TestPolicyReload(t *testing.T) {
	e := newEnv(t, nil)
	resp, _ := e.connect("s2", "api.ok.test:443")
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("before: %d", resp.StatusCode)
	}
	if _, err := policy.Update(e.policyFn, func(f *policy.File) error {
		s := f.Scopes["s2"]
		s.Allow = append(s.Allow, "api.ok.test")
		f.Scopes["s2"] = s
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	resp, _ = e.connect("s2", "api.ok.test:443")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after the change: %d %s", resp.StatusCode, resp.Header.Get("X-Sandbox-Egress-Error"))
	}
	// A broken file keeps the last good policy (and Update refuses it).
	if err := os.WriteFile(e.policyFn, []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, _ = e.connect("s2", "api.ok.test:443")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after a broken write: %d", resp.StatusCode)
	}
	if _, err := policy.Update(e.policyFn, func(*policy.File) error { return nil }); err == nil {
		t.Fatal("Update of a broken file succeeded")
	}
	// Removing a scope revokes its credential.
	f := testPolicy()
	delete(f.Scopes, "s2")
	if err := policy.WriteAtomic(e.policyFn, f.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, body := e.connect("s2", "api.ok.test:443")
	wantDenied(t, resp, body, http.StatusForbidden, policy.CodeBadCredentials)
}

func TestTunnelCap(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxTunnelsPerScope = 2 })
	var conns []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		_, _ = io.WriteString(c, "CONNECT api.ok.test:443 HTTP/1.1\r\nHost: x\r\nProxy-Authorization: "+e.auth("s1")+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "CONNECT"})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("tunnel %d: %v %v", i, resp, err)
		}
	}
	resp, body := e.connect("s1", "api.ok.test:443")
	wantDenied(t, resp, body, http.StatusTooManyRequests, policy.CodeTooManyTunnels)
	if resp.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	// Another scope is not starved.
	resp, _ = e.get("s2", "http://other.test/hello")
	if resp.StatusCode != 200 {
		t.Fatalf("other scope: %d", resp.StatusCode)
	}
	if st := e.srv.Stats(); st.ActiveTunnels != 2 || st.ByScope["s1"].Active != 2 {
		t.Fatalf("stats: %+v", st)
	}
	for _, c := range conns {
		c.Close()
	}
	poll(t, func() bool { return e.srv.Stats().ActiveTunnels == 0 })
	resp, _ = e.connect("s1", "api.ok.test:443")
	if resp.StatusCode != 200 {
		t.Fatalf("after closing: %d", resp.StatusCode)
	}
}

func poll(t *testing.T, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTimeouts(t *testing.T) {
	t.Run("dns", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.DNSTimeout = 100 * time.Millisecond })
		e.res.block = true
		resp, body := e.connect("s1", "api.ok.test:443")
		wantDenied(t, resp, body, http.StatusForbidden, policy.CodeDNS)
		if !strings.Contains(body, "timed out") {
			t.Fatalf("body: %s", body)
		}
		e.onlyDialed()
	})
	t.Run("connect", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.ConnectTimeout = 100 * time.Millisecond })
		e.dial.block = true
		resp, body := e.connect("s1", "api.ok.test:443")
		wantDenied(t, resp, body, http.StatusBadGateway, policy.CodeConnect)
		resp, body = e.get("s1", "http://api.ok.test/hello")
		wantDenied(t, resp, body, http.StatusBadGateway, policy.CodeConnect)
	})
	t.Run("tunnel idle", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.IdleTimeout = 200 * time.Millisecond })
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "CONNECT api.ok.test:443 HTTP/1.1\r\nHost: x\r\nProxy-Authorization: "+e.auth("s1")+"\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		_, err = br.ReadByte()
		if err == nil || time.Since(start) > 3*time.Second {
			t.Fatalf("idle tunnel not closed: %v after %s", err, time.Since(start))
		}
	})
}

func TestLogRecords(t *testing.T) {
	e := newEnv(t, nil)
	e.get("s1", "http://api.ok.test/big")
	e.connect("s1", "evil.test:443")
	recs := e.logBuf.records(t)
	if len(recs) != 2 {
		t.Fatalf("%d records: %+v", len(recs), recs)
	}
	a, d := recs[0], recs[1]
	if a.Scope != "s1" || a.Method != "GET" || a.Host != "api.ok.test" || a.Port != 80 || a.IP != pubOK ||
		a.Decision != Allow || a.Status != 200 || a.BytesIn != 1<<20 || a.Reason == "" || a.Time.IsZero() {
		t.Fatalf("allow record: %+v", a)
	}
	if d.Scope != "s1" || d.Method != "CONNECT" || d.Host != "evil.test" || d.Port != 443 || d.Decision != Deny ||
		d.Code != policy.CodeHostNotAllowed || d.Status != 403 {
		t.Fatalf("deny record: %+v", d)
	}
	st := e.srv.Stats()
	if st.Allowed != 1 || st.Denied != 1 || st.ByScope["s1"].BytesIn != 1<<20 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestForwardBodyAndClient(t *testing.T) {
	e := newEnv(t, nil)
	pu, _ := url.Parse("http://s1:" + e.tokens["s1"] + "@" + e.addr)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	payload := strings.Repeat("p", 100000)
	resp, err := client.Post("http://api.ok.test/echo", "text/plain", strings.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != payload {
		t.Fatalf("echo: %d bytes", len(b))
	}
	// Keep-alive: a second request on the same client connection.
	resp, err = client.Get("http://a.wild.test/hello")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hello a.wild.test" {
		t.Fatalf("got %q", b)
	}
	recs := e.logBuf.records(t)
	if recs[0].BytesOut != int64(len(payload)) {
		t.Fatalf("bytes_out %d", recs[0].BytesOut)
	}
}

func TestClientsPrefix(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Clients = []netip.Prefix{netip.MustParsePrefix("10.213.0.0/16")} })
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "CONNECT api.ok.test:443 HTTP/1.1\r\nHost: x\r\nProxy-Authorization: "+e.auth("s1")+"\r\n\r\n")
	b, _ := io.ReadAll(c)
	if len(b) != 0 {
		t.Fatalf("client outside the accepted prefixes got %q", b)
	}
	e.onlyDialed()
}

// pubNever is a public address the fake resolver gives names that must be
// refused before any lookup (localhost, metadata names): a dial to it means
// a name rule was skipped.
const pubNever = "93.184.216.99"

// TestLoopbackNamesNoLookup: loopback and metadata names are refused
// before any lookup; here they would resolve to a public address, so the
// address checks could not hide a missing name rule.
func TestLoopbackNamesNoLookup(t *testing.T) {
	e := newEnv(t, nil)
	names := []string{"localhost", "LOCALHOST.", "a.localhost", "x.y.localhost", "metadata.google.internal", "metadata", "instance-data"}
	for _, n := range names {
		e.res.answers[strings.ToLower(strings.TrimSuffix(n, "."))] = [][]string{{pubNever}}
	}
	e.dial.routes[pubNever+":443"] = e.up.l.Addr().String()
	e.dial.routes[pubNever+":80"] = e.up.l.Addr().String()
	for _, n := range names {
		resp, body := e.connect("star", n+":443")
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("CONNECT %s: %d %s", n, resp.StatusCode, body)
		}
		resp, body = e.get("star", "http://"+n+"/")
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s: %d %s", n, resp.StatusCode, body)
		}
	}
	e.onlyDialed()
	if l := e.res.lookups(); len(l) != 0 {
		t.Fatalf("looked up %v", l)
	}
}

// FuzzProxyRequest: whatever a client sends, the proxy does not panic,
// dials only the public addresses its resolver gave for names (never the
// one loopback and metadata names would resolve to, never a literal that
// is not public), answers every refusal with its error header and a
// reason, never echoes the credential, and opens a tunnel only after a
// dial.
func FuzzProxyRequest(f *testing.F) {
	for _, s := range []string{
		"GET http://api.ok.test/hello HTTP/1.1\r\nHost: x\r\n\r\n",
		"CONNECT api.ok.test:443 HTTP/1.1\r\n\r\n",
		"CONNECT [::1]:443 HTTP/1.1\r\n\r\n",
		"GET http://2130706433/ HTTP/1.1\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"GET http://a@b/ HTTP/1.1\r\n\r\n",
		"GET ftp://x/ HTTP/1.0\r\n\r\n",
		"CONNECT localhost:443 HTTP/1.1\r\n\r\n",
		"GET http://metadata/ HTTP/1.1\r\n\r\n",
		"CONNECT 10.0.0.5:443 HTTP/1.1\r\n\r\n",
		"GET http://evil.test/ HTTP/1.1\r\nHost: x\r\n\r\nGET http://api.ok.test/hello HTTP/1.1\r\nHost: y\r\n\r\n",
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	var panics panicFlag
	e := newEnv(f, func(c *Config) {
		c.HeaderTimeout = 200 * time.Millisecond
		c.ErrorLog = log.New(&panics, "", 0)
	})
	for _, n := range []string{"localhost", "a.localhost", "metadata", "metadata.google.internal", "instance-data"} {
		e.res.answers[n] = [][]string{{pubNever}}
	}
	token := e.tokens["star"]
	f.Fuzz(func(t *testing.T, req string, withAuth bool) {
		if withAuth {
			if i := strings.Index(req, "\r\n"); i >= 0 {
				req = req[:i+2] + "Proxy-Authorization: " + e.auth("star") + "\r\n" + req[i+2:]
			}
		}
		before := len(e.dial.dialed())
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = io.WriteString(c, req)
		_ = c.(*net.TCPConn).CloseWrite()
		out, _ := io.ReadAll(c)
		c.Close()
		if msg := panics.get(); msg != "" {
			t.Fatalf("panic for %q: %s", req, msg)
		}
		dials := e.dial.dialed()[before:]
		for _, d := range dials {
			ap, err := netip.ParseAddrPort(d)
			if err != nil || ap.Addr().String() == pubNever {
				t.Fatalf("dialled %s for %q", d, req)
			}
			switch ap.Addr().String() {
			case pubOK, pubEvil, pubOther:
				continue
			}
			if !ap.Addr().IsGlobalUnicast() || ap.Addr().IsPrivate() || ap.Addr().Is4In6() {
				t.Fatalf("dialled %s for %q", d, req)
			}
		}
		if strings.Contains(string(out), token) {
			t.Fatalf("the credential was echoed for %q", req)
		}
		br := bufio.NewReader(bytes.NewReader(out))
		for {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			switch resp.StatusCode {
			case 403, 407, 429, 502, 504:
				if resp.Header.Get("X-Sandbox-Egress-Error") == "" || !strings.Contains(string(body), "docker sandbox egress") {
					t.Fatalf("%d without a reason for %q: %v %q", resp.StatusCode, req, resp.Header, body)
				}
			case 200:
				if len(dials) == 0 && strings.HasPrefix(resp.Status, "200 Connection established") {
					t.Fatalf("a tunnel without a dial for %q", req)
				}
			}
			if resp.StatusCode == 200 && strings.Contains(resp.Status, "established") {
				break // tunnel: the rest is the upstream's
			}
		}
	})
}
