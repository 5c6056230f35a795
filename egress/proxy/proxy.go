// Package proxy is the egress proxy of docker sandbox, run in the sidecar
// by `sandbox-helper proxy`: an HTTP forward proxy and CONNECT tunnel that
// lets each scope reach exactly what its policy grants.
//
// For every request it authenticates the scope (Proxy-Authorization: Basic,
// user = scope, password = the scope's token), parses the target (never
// matching raw strings), checks host and port against the scope's rules,
// resolves the name exactly once, checks every address (special-purpose
// ranges, metadata, the proxy's own addresses, the sandbox networks), and
// dials only the checked IP literal, so DNS rebinding has no window. It
// never follows redirects, never forwards Proxy-Authorization or hop-by-hop
// headers, bounds every wait (DNS, connect, request headers, idle) and the
// number of concurrent tunnels, and logs one JSON line per decision.
//
// It depends on the standard library only: it runs inside the helper. The
// resolver and the dialer are injectable, for tests.
package proxy

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker-sandbox/docker-sandbox/egress/iprules"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
)

// Resolver looks names up (net.Resolver implements it).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer opens connections (net.Dialer implements it). The proxy only ever
// passes IP literals ("1.2.3.4:443", "[2001:db8::1]:443").
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Config configures a Server. Zero durations and limits take the defaults.
type Config struct {
	Policy   Source
	Resolver Resolver // nil: net.DefaultResolver
	Dialer   Dialer   // nil: a net.Dialer
	// Hosts are static names, looked up before (or, with NoDNS, instead of)
	// the resolver. Keys are normalized names.
	Hosts map[string][]netip.Addr
	NoDNS bool
	// Deny are prefixes never dialled (the sandbox networks' pool, gateways).
	Deny []netip.Prefix
	// Own reports the proxy's own addresses; nil: those of Local.
	Own func(netip.Addr) bool
	// Local is the proxy's own network view (addresses, connected subnets,
	// routes); nil: read from the system, at most once a second. Next hops
	// and the first address of each connected subnet are never dialled.
	Local func() *LocalNet
	// Networks is the engine's network state the plugin pushes (addresses
	// of the engine's host, each scope's subnet); when set, a scope's
	// credential is accepted only from its own subnet.
	Networks NetSource
	// Prober, when set, probes private destinations reached through a
	// router before dialling them (see HostProber).
	Prober HostProber
	// UnsafeAllowLoopback: see policy.Guard (benchmarks only).
	UnsafeAllowLoopback bool
	// Clients limits the client addresses accepted; empty: any.
	Clients []netip.Prefix
	Log     *Logger
	// ErrorLog receives the proxy's own errors (nil: discarded).
	ErrorLog *log.Logger

	DNSTimeout            time.Duration // one lookup (default 5s)
	ConnectTimeout        time.Duration // one TCP connect (default 10s)
	HeaderTimeout         time.Duration // a client's request headers (default 10s)
	ClientIdleTimeout     time.Duration // a keep-alive client connection between requests (default 60s)
	IdleTimeout           time.Duration // a tunnel or body with no bytes either way (default 5m)
	ResponseHeaderTimeout time.Duration // an upstream's response headers (default 60s)
	MaxTunnels            int           // concurrent upstream connections, all scopes (default 1024)
	MaxTunnelsPerScope    int           // per scope (default 256)
	MaxClientConns        int           // concurrent client connections (default 4096)

	Now func() time.Time
}

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.DNSTimeout, 5*time.Second)
	def(&c.ConnectTimeout, 10*time.Second)
	def(&c.HeaderTimeout, 10*time.Second)
	def(&c.ClientIdleTimeout, 60*time.Second)
	def(&c.IdleTimeout, 5*time.Minute)
	def(&c.ResponseHeaderTimeout, 60*time.Second)
	if c.MaxTunnels <= 0 {
		c.MaxTunnels = 1024
	}
	if c.MaxTunnelsPerScope <= 0 {
		c.MaxTunnelsPerScope = 256
	}
	if c.MaxClientConns <= 0 {
		c.MaxClientConns = 4096
	}
	if c.Resolver == nil {
		c.Resolver = net.DefaultResolver
	}
	if c.Dialer == nil {
		c.Dialer = &net.Dialer{KeepAlive: -1} // idle timeouts end dead tunnels
	}
	if c.Log == nil {
		c.Log = NewLogger(nil)
	}
	if c.ErrorLog == nil {
		c.ErrorLog = log.New(io.Discard, "", 0)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Local == nil {
		c.Local = cachedLocalNet()
	}
	if c.Own == nil {
		local := c.Local
		c.Own = func(a netip.Addr) bool { return local().Own(a) }
	}
}

// Server is the proxy.
type Server struct {
	cfg       Config
	srv       *http.Server
	transport *http.Transport
	guard     policy.Guard

	mu       sync.Mutex
	tunnels  int
	perScope map[string]int
	stats    Stats
	started  time.Time
}

// Stats are the proxy's counters.
type Stats struct {
	Started       time.Time                `json:"started"`
	Allowed       int64                    `json:"allowed"`
	Denied        int64                    `json:"denied"`
	ActiveTunnels int                      `json:"active_tunnels"`
	ByCode        map[string]int64         `json:"by_code"`
	ByScope       map[string]*ScopeCounter `json:"by_scope"`
}

// ScopeCounter counts one scope's decisions.
type ScopeCounter struct {
	Allowed  int64 `json:"allowed"`
	Denied   int64 `json:"denied"`
	BytesIn  int64 `json:"bytes_in"`
	BytesOut int64 `json:"bytes_out"`
	Active   int   `json:"active"`
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	cfg.defaults()
	s := &Server{cfg: cfg, perScope: map[string]int{}, started: cfg.Now()}
	s.stats = Stats{Started: s.started, ByCode: map[string]int64{}, ByScope: map[string]*ScopeCounter{}}
	s.guard = policy.Guard{Deny: cfg.Deny, Own: cfg.Own, Host: s.isHost, UnsafeAllowLoopback: cfg.UnsafeAllowLoopback}
	s.transport = &http.Transport{
		Proxy:                  nil,
		DialContext:            s.dialForTransport,
		DisableCompression:     true,
		ForceAttemptHTTP2:      false,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        30 * time.Second,
		ResponseHeaderTimeout:  cfg.ResponseHeaderTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 1 << 20,
	}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: cfg.HeaderTimeout,
		IdleTimeout:       cfg.ClientIdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          cfg.ErrorLog,
	}
	return s
}

// Serve accepts clients on l until Close.
func (s *Server) Serve(l net.Listener) error {
	return s.srv.Serve(&limitListener{Listener: l, clients: s.cfg.Clients, sem: make(chan struct{}, s.cfg.MaxClientConns)})
}

// Close stops the server and every connection.
func (s *Server) Close() error {
	s.transport.CloseIdleConnections()
	return s.srv.Close()
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.stats
	c.ActiveTunnels = s.tunnels
	c.ByCode = map[string]int64{}
	for k, v := range s.stats.ByCode {
		c.ByCode[k] = v
	}
	c.ByScope = map[string]*ScopeCounter{}
	for k, v := range s.stats.ByScope {
		cp := *v
		cp.Active = s.perScope[k]
		c.ByScope[k] = &cp
	}
	return c
}

// request is the state of one decision.
type request struct {
	rec   Record
	start time.Time
	host  policy.Host
	port  int
	addrs []netip.Addr
}

// ServeHTTP implements http.Handler: every request the proxy gets.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := &request{start: s.cfg.Now()}
	q.rec = Record{Time: q.start.UTC(), Method: r.Method, Client: r.RemoteAddr}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.cfg.ErrorLog.Printf("proxy: panic serving %s %q: %v", r.Method, r.RequestURI, p)
			s.deny(w, q, http.StatusInternalServerError, policy.CodeBadRequest, "internal error")
		}
	}()

	// Which scope: only the credential decides, never the source address.
	snap, err := s.cfg.Policy.Current()
	if err != nil || snap == nil {
		s.deny(w, q, http.StatusServiceUnavailable, policy.CodeBadRequest, "the proxy has no usable policy")
		return
	}
	user, pass, hasAuth := proxyAuth(r.Header.Get("Proxy-Authorization"))
	q.rec.Scope = user
	if !hasAuth {
		w.Header().Set("Proxy-Authenticate", `Basic realm="docker sandbox egress"`)
		s.deny(w, q, http.StatusProxyAuthRequired, policy.CodeAuthRequired, "proxy credentials required (user: the scope, password: its token; sandboxes get them in HTTP_PROXY)")
		return
	}
	if _, ok := snap.File.Authenticate(user, pass); !ok {
		q.rec.Scope = sanitize(user)
		s.deny(w, q, http.StatusForbidden, policy.CodeBadCredentials, "wrong proxy credentials")
		return
	}
	if reason := s.checkSource(user, r.RemoteAddr); reason != "" {
		s.deny(w, q, http.StatusForbidden, policy.CodeBadCredentials, reason)
		return
	}
	rules := snap.Rules(user)

	// What the target is.
	var defPort int
	if r.Method == http.MethodConnect {
		authority := r.RequestURI
		q.rec.Host = sanitize(authority)
		h, p, err := policy.SplitHostPort(authority, 0)
		if err != nil {
			s.denyParse(w, q, err)
			return
		}
		q.host, q.port = h, p
	} else {
		raw := r.RequestURI
		scheme, _, ok := strings.Cut(raw, "://")
		if !ok || strings.HasPrefix(raw, "/") {
			q.rec.Host = sanitize(r.Host)
			s.deny(w, q, http.StatusBadRequest, policy.CodeNotProxyRequest, "this is an egress proxy: send absolute http:// URLs, or CONNECT host:port")
			return
		}
		if !strings.EqualFold(scheme, "http") {
			q.rec.Host = sanitize(raw)
			s.deny(w, q, http.StatusForbidden, policy.CodeScheme, fmt.Sprintf("scheme %q is not allowed: only http:// is forwarded (use CONNECT for https)", sanitize(scheme)))
			return
		}
		if r.URL == nil || strings.ContainsAny(raw, "#\\") || r.URL.User != nil || r.URL.Opaque != "" {
			q.rec.Host = sanitize(raw)
			s.deny(w, q, http.StatusForbidden, policy.CodeBadRequest, "userinfo, fragments and backslashes are refused in proxy URLs")
			return
		}
		defPort = 80
		q.rec.Host = sanitize(r.URL.Host)
		h, p, err := policy.SplitHostPort(r.URL.Host, defPort)
		if err != nil {
			s.denyParse(w, q, err)
			return
		}
		q.host, q.port = h, p
	}
	q.rec.Host, q.rec.Port = q.host.String(), q.port

	// Host and port, before any lookup.
	d := rules.Target(q.host, q.port, s.guard)
	if !d.Allow {
		if d.Addr.IsValid() {
			q.rec.IP = d.Addr.String()
		}
		s.deny(w, q, http.StatusForbidden, d.Code, d.Reason)
		return
	}
	// Exactly one lookup; every address checked; only those dialled.
	// A client's half-close ends r.Context(); lookups and dials have
	// their own bounds.
	ctx := context.WithoutCancel(r.Context())
	addrs, err := s.resolve(ctx, q.host)
	if err != nil {
		s.deny(w, q, http.StatusForbidden, policy.CodeDNS, err.Error())
		return
	}
	d = rules.Addrs(q.host, addrs, s.guard)
	if !d.Allow {
		if d.Addr.IsValid() {
			q.rec.IP = d.Addr.String()
		}
		s.deny(w, q, http.StatusForbidden, d.Code, d.Reason)
		return
	}
	q.addrs = preferIPv4(addrs)
	q.rec.Reason = d.Reason
	for _, a := range q.addrs {
		if iprules.Classify(a).Class == iprules.Private {
			q.rec.PrivateIPs = append(q.rec.PrivateIPs, a.String())
		}
	}
	if !s.acquire(user) {
		w.Header().Set("Retry-After", "1")
		s.deny(w, q, http.StatusTooManyRequests, policy.CodeTooManyTunnels, "too many concurrent connections for this scope or this proxy; retry later")
		return
	}
	defer s.release(user)
	if r.Method == http.MethodConnect {
		s.tunnel(ctx, w, q)
	} else {
		s.forward(w, r, q)
	}
}

// resolve returns the addresses of h: its literal, its static entry, or
// one lookup bounded by the DNS timeout.
func (s *Server) resolve(ctx context.Context, h policy.Host) ([]netip.Addr, error) {
	if h.IsLiteral() {
		return []netip.Addr{h.Addr}, nil
	}
	if as, ok := s.cfg.Hosts[h.Name]; ok {
		return as, nil
	}
	if s.cfg.NoDNS {
		return nil, fmt.Errorf("%s: no such host (this proxy resolves only its static hosts)", h.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DNSTimeout)
	defer cancel()
	as, err := s.cfg.Resolver.LookupNetIP(ctx, "ip", h.Name)
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) {
			switch {
			case de.IsNotFound:
				return nil, fmt.Errorf("%s: no such host", h.Name)
			case de.IsTimeout:
				return nil, fmt.Errorf("%s: DNS lookup timed out after %s", h.Name, s.cfg.DNSTimeout)
			}
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: DNS lookup timed out after %s", h.Name, s.cfg.DNSTimeout)
		}
		return nil, fmt.Errorf("%s: DNS lookup failed", h.Name)
	}
	if len(as) == 0 {
		return nil, fmt.Errorf("%s: no addresses", h.Name)
	}
	return as, nil
}

func preferIPv4(as []netip.Addr) []netip.Addr {
	out := append([]netip.Addr(nil), as...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Is4() && !out[j].Is4() })
	return out
}

func (s *Server) acquire(scope string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tunnels >= s.cfg.MaxTunnels || s.perScope[scope] >= s.cfg.MaxTunnelsPerScope {
		return false
	}
	s.tunnels++
	s.perScope[scope]++
	return true
}

func (s *Server) release(scope string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tunnels--
	if s.perScope[scope]--; s.perScope[scope] <= 0 {
		delete(s.perScope, scope)
	}
}

// dial connects to the first reachable checked address. It refuses
// anything that is not one of them, so no code path can dial a name. An
// address found to be the engine's host refuses the request.
func (s *Server) dial(ctx context.Context, addrs []netip.Addr, port int) (net.Conn, netip.Addr, error) {
	var last error
	for _, a := range addrs {
		dctx, cancel := context.WithTimeout(ctx, s.cfg.ConnectTimeout)
		c, err := s.dialAddr(dctx, netip.AddrPortFrom(a, uint16(port)))
		cancel()
		if err == nil {
			return c, a, nil
		}
		var he *hostAddrError
		if errors.As(err, &he) {
			return nil, a, err
		}
		last = err
	}
	return nil, netip.Addr{}, last
}

// dialAddr dials one checked address. A private address reached through a
// router is probed first (see HostProber): the engine's host is refused
// even when no list names that address yet.
func (s *Server) dialAddr(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	a := ap.Addr().Unmap()
	if s.cfg.Prober != nil && iprules.Classify(a).Class == iprules.Private {
		local := s.cfg.Local()
		if gw, ok := local.Gateway(a); ok && !local.OnLink(a) {
			p, err := s.cfg.Prober.Start(a, gw)
			if err != nil {
				return nil, &hostAddrError{addr: a, msg: fmt.Sprintf("cannot tell whether %s is an address of the engine's host (%v): refused", a, err)}
			}
			defer p.Close()
			if p.Wait(ctx) {
				return nil, errHost(a)
			}
			c, err := s.cfg.Dialer.DialContext(ctx, "tcp", ap.String())
			if p.Answered() {
				if c != nil {
					c.Close()
				}
				return nil, errHost(a)
			}
			return c, err
		}
	}
	return s.cfg.Dialer.DialContext(ctx, "tcp", ap.String())
}

// isHost reports whether a is an address of the engine's host: pushed by
// the plugin, or a next hop or subnet gateway of the proxy's own network.
func (s *Server) isHost(a netip.Addr) bool {
	if s.cfg.Networks != nil {
		if n, _ := s.cfg.Networks.Current(); n.IsHost(a) {
			return true
		}
	}
	return s.cfg.Local().IsHost(a)
}

// checkSource returns why a scope's credential is refused from this
// client address ("" when it is accepted): with Networks, only the scope's
// own subnet may use it.
func (s *Server) checkSource(scope, remote string) string {
	if s.cfg.Networks == nil {
		return ""
	}
	n, _ := s.cfg.Networks.Current()
	if n == nil {
		return "the proxy does not know the scope networks yet: retry in a moment"
	}
	sub, ok := n.Scopes[scope]
	if !ok {
		return fmt.Sprintf("scope %s has no network on this engine: its credential is accepted from nowhere", scope)
	}
	ap, err := netip.ParseAddrPort(remote)
	if err != nil || !sub.Contains(ap.Addr().Unmap()) {
		return fmt.Sprintf("the credential of scope %s is accepted only from its own network %s, not from %s", scope, sub, sanitize(remote))
	}
	return ""
}

// finish logs q's record with its outcome.
func (s *Server) finish(q *request, decision, code string, status int) {
	q.rec.Decision, q.rec.Code, q.rec.Status = decision, code, status
	q.rec.DurationMS = float64(s.cfg.Now().Sub(q.start).Microseconds()) / 1000
	s.mu.Lock()
	sc := s.stats.ByScope[q.rec.Scope]
	if sc == nil && q.rec.Scope != "" && len(s.stats.ByScope) < 10000 {
		sc = &ScopeCounter{}
		s.stats.ByScope[q.rec.Scope] = sc
	}
	if decision == Allow {
		s.stats.Allowed++
	} else {
		s.stats.Denied++
	}
	s.stats.ByCode[code]++
	if sc != nil {
		if decision == Allow {
			sc.Allowed++
		} else {
			sc.Denied++
		}
		sc.BytesIn += q.rec.BytesIn
		sc.BytesOut += q.rec.BytesOut
	}
	s.mu.Unlock()
	s.cfg.Log.Log(&q.rec)
}

// deny answers with status, the reason in the body and the code in
// X-Sandbox-Egress-Error, and logs the decision.
func (s *Server) deny(w http.ResponseWriter, q *request, status int, code, reason string) {
	q.rec.Reason = reason
	h := w.Header()
	h.Set("X-Sandbox-Egress-Error", code)
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Connection", "close")
	body := "docker sandbox egress: denied (" + code + "): " + reason + "\n"
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
	s.finish(q, Deny, code, status)
}

func (s *Server) denyParse(w http.ResponseWriter, q *request, err error) {
	var he *policy.HostError
	if errors.As(err, &he) && he.Legacy.IsValid() {
		q.rec.IP = he.Legacy.String()
	}
	s.deny(w, q, http.StatusForbidden, policy.CodeBadRequest, "bad target: "+sanitize(err.Error()))
}

// proxyAuth decodes "Basic base64(user:password)".
func proxyAuth(v string) (user, pass string, ok bool) {
	scheme, cred, found := strings.Cut(strings.TrimSpace(v), " ")
	if !found || !strings.EqualFold(scheme, "basic") {
		return "", "", false
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", "", false
	}
	user, pass, found = strings.Cut(string(b), ":")
	if !found {
		return "", "", false
	}
	return user, pass, true
}

// sanitize bounds and cleans client-controlled text for logs and bodies.
func sanitize(s string) string {
	if len(s) > 256 {
		s = s[:256] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// limitListener drops clients outside the accepted prefixes and caps the
// number of client connections.
type limitListener struct {
	net.Listener
	clients []netip.Prefix
	sem     chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if len(l.clients) > 0 && !l.accepted(c.RemoteAddr()) {
			c.Close()
			continue
		}
		select {
		case l.sem <- struct{}{}:
			return &releaseConn{Conn: c, release: func() { <-l.sem }}, nil
		default:
			c.Close()
		}
	}
}

func (l *limitListener) accepted(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return false
	}
	for _, p := range l.clients {
		if p.Contains(ap.Addr().Unmap()) {
			return true
		}
	}
	return false
}

type releaseConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *releaseConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// CloseWrite half-closes when the connection supports it.
func (c *releaseConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
