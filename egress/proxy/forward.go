package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker-sandbox/docker-sandbox/egress/policy"
)

// hopHeaders are never forwarded, either way (RFC 9110 7.6.1), with the
// proxy's own credentials.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// cleanHeader copies h without hop-by-hop headers, those named in
// Connection, and the proxy's own.
func cleanHeader(h http.Header) http.Header {
	out := h.Clone()
	for _, v := range h["Connection"] {
		for _, f := range strings.Split(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				out.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		out.Del(k)
	}
	for k := range out {
		if strings.HasPrefix(strings.ToLower(k), "proxy-") {
			delete(out, k)
		}
	}
	return out
}

type dialKey struct{}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// allowedDial is what one forwarded request may dial.
type allowedDial struct {
	addrs map[netip.AddrPort]bool
}

// dialError marks a failure to connect, before anything was sent, so the
// next checked address can be tried.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// dialForTransport is the transport's only way out: it dials an address
// only if the current request checked it.
func (s *Server) dialForTransport(ctx context.Context, network, addr string) (net.Conn, error) {
	ad, _ := ctx.Value(dialKey{}).(*allowedDial)
	ap, err := netip.ParseAddrPort(addr)
	if ad == nil || err != nil || !ad.addrs[ap] {
		return nil, &dialError{fmt.Errorf("refusing to dial unchecked address %q", addr)}
	}
	dctx, cancel := context.WithTimeout(ctx, s.cfg.ConnectTimeout)
	defer cancel()
	c, err := s.dialAddr(dctx, ap)
	if err != nil {
		return nil, &dialError{err}
	}
	return c, nil
}

// countReader counts bytes and renews the idle timer on each read.
type countReader struct {
	r     io.ReadCloser
	n     atomic.Int64
	touch func()
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.n.Add(int64(n))
		c.touch()
	}
	return n, err
}

func (c *countReader) Close() error { return c.r.Close() }

// forward serves an allowed plain-HTTP request: it sends it to the checked
// address (never following redirects) and streams the answer back.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, q *request) {
	// A client that half-closes after its request still gets its answer:
	// the request's own context ends when the client's side reads EOF.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	// Upstreams may answer while the request body still streams.
	if r.Body != nil && r.Body != http.NoBody {
		_ = http.NewResponseController(w).EnableFullDuplex()
	}
	idle := time.AfterFunc(s.cfg.IdleTimeout, cancel)
	defer idle.Stop()
	touch := func() { idle.Reset(s.cfg.IdleTimeout) }

	ad := &allowedDial{addrs: map[netip.AddrPort]bool{}}
	for _, a := range q.addrs {
		ad.addrs[netip.AddrPortFrom(a, uint16(q.port))] = true
	}
	ctx = context.WithValue(ctx, dialKey{}, ad)

	hostHeader := q.host.String()
	if q.port != 80 {
		hostHeader += ":" + strconv.Itoa(q.port)
	}
	// The transport closes a request's body even when it could not
	// connect; the next address needs it open (the server closes it).
	var body io.ReadCloser
	var cr *countReader
	if r.Body != nil && r.Body != http.NoBody {
		cr = &countReader{r: r.Body, touch: touch}
		body = io.NopCloser(cr)
	}
	var (
		resp *http.Response
		err  error
	)
	for i, a := range q.addrs {
		out := &http.Request{
			Method: r.Method,
			URL: &url.URL{Scheme: "http", Host: netip.AddrPortFrom(a, uint16(q.port)).String(),
				Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery},
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:        cleanHeader(r.Header),
			Body:          body,
			ContentLength: r.ContentLength,
			Host:          hostHeader,
		}
		if body == nil {
			out.ContentLength = 0
		}
		if _, ok := r.Header["User-Agent"]; !ok {
			out.Header["User-Agent"] = nil // do not add Go's
		}
		q.rec.IP = a.String()
		resp, err = s.transport.RoundTrip(out.WithContext(ctx))
		var de *dialError
		var he *hostAddrError
		if err == nil || !errors.As(err, &de) || errors.As(err, &he) || i == len(q.addrs)-1 {
			break
		}
	}
	if err != nil {
		var de *dialError
		var he *hostAddrError
		switch {
		case errors.As(err, &he):
			q.rec.IP = he.addr.String()
			s.deny(w, q, http.StatusForbidden, policy.CodeDeniedRange, he.msg)
		case errors.As(err, &de):
			s.fail(w, q, http.StatusBadGateway, policy.CodeConnect, "cannot connect to "+q.rec.Host+": "+dialReason(de.err))
		case isTimeout(err) || strings.Contains(err.Error(), "timeout awaiting response headers"):
			s.fail(w, q, http.StatusGatewayTimeout, policy.CodeUpstream, "the upstream did not answer in time")
		default:
			s.fail(w, q, http.StatusBadGateway, policy.CodeUpstream, "the upstream failed: "+sanitize(trimAddr(err.Error())))
		}
		return
	}
	defer resp.Body.Close()
	touch()
	h := w.Header()
	for k, v := range cleanHeader(resp.Header) {
		h[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	fl, _ := w.(http.Flusher)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var n int64
	for {
		m, rerr := resp.Body.Read(buf)
		if m > 0 {
			touch()
			if _, werr := w.Write(buf[:m]); werr != nil {
				break
			}
			n += int64(m)
			if fl != nil && resp.ContentLength < 0 {
				fl.Flush()
			}
		}
		if rerr != nil {
			break
		}
	}
	q.rec.BytesIn = n
	if cr != nil {
		q.rec.BytesOut = cr.n.Load()
	}
	s.finish(q, Allow, policy.CodeAllowed, resp.StatusCode)
}

// fail answers an allowed request that could not be served (connect or
// upstream failure): like a denial on the wire, logged as allowed with the
// failure's code.
func (s *Server) fail(w http.ResponseWriter, q *request, status int, code, reason string) {
	q.rec.Reason = reason
	h := w.Header()
	h.Set("X-Sandbox-Egress-Error", code)
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Connection", "close")
	body := "docker sandbox egress: " + code + ": " + reason + "\n"
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
	s.finish(q, Allow, code, status)
}

// trimAddr drops the "Get \"http://1.2.3.4:80/...\": " prefix of transport
// errors.
func trimAddr(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}
