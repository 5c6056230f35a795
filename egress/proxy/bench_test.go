package proxy

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/docker-sandbox/docker-sandbox/egress/policy"
)

// benchEnv is a real proxy (real dialer, file policy, file log) in front of
// a loopback upstream.
func benchEnv(b *testing.B) (proxyURL *url.URL, upstream string) {
	up := newUpstream(b)
	dir := b.TempDir()
	pf := filepath.Join(dir, "policy.json")
	f := &policy.File{Version: 1, Scopes: map[string]policy.Scope{"bench": {Token: "tok-bench-0123456789abcdef",
		Rules: policy.Rules{Allow: []string{"127.0.0.1"}, AllowCIDRs: []string{"127.0.0.1/32"}, AllowPorts: []int{up.l.Addr().(*net.TCPAddr).Port}}}}}
	if err := policy.WriteAtomic(pf, f.Marshal(), 0o600); err != nil {
		b.Fatal(err)
	}
	lf := &RotatingFile{Path: filepath.Join(dir, "egress.log"), Max: 64 << 20}
	b.Cleanup(func() { lf.Close() })
	srv := New(Config{Policy: &FileSource{Path: pf}, Log: NewLogger(lf), UnsafeAllowLoopback: true,
		Own: func(netip.Addr) bool { return false }})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(l)
	b.Cleanup(func() { srv.Close() })
	u, _ := url.Parse("http://bench:tok-bench-0123456789abcdef@" + l.Addr().String())
	return u, up.l.Addr().String()
}

func BenchmarkForwardSmallGET(b *testing.B) {
	pu, up := benchEnv(b)
	tr := &http.Transport{Proxy: http.ProxyURL(pu), MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Get("http://" + up + "/hello")
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

func BenchmarkConnectSetup(b *testing.B) {
	pu, up := benchEnv(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := net.Dial("tcp", pu.Host)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.WriteString(c, "CONNECT "+up+" HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic YmVuY2g6dG9rLWJlbmNoLTAxMjM0NTY3ODlhYmNkZWY=\r\n\r\n")
		buf := make([]byte, 64)
		if _, err := c.Read(buf); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

func BenchmarkDirectSmallGET(b *testing.B) {
	_, up := benchEnv(b)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Get("http://" + up + "/hello")
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
