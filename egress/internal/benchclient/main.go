// Command benchclient measures the egress proxy for scripts/bench-egress.sh:
// the throughput of one large download, small GETs per second, and the
// time to set up a CONNECT tunnel, directly and through one or more proxies.
//
//	benchclient --upstream 127.0.0.1:18080 [--proxy NAME=http://user:pass@host:port]...
//	            [--size BYTES] [--gets N] [--conc C] [--connects N] [--runs R]
//
// It prints one JSON object per measurement on stdout.
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type result struct {
	Via    string  `json:"via"`
	Test   string  `json:"test"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Detail string  `json:"detail,omitempty"`
}

type proxyFlag []string

func (p *proxyFlag) String() string     { return strings.Join(*p, ",") }
func (p *proxyFlag) Set(v string) error { *p = append(*p, v); return nil }

func main() {
	upstream := flag.String("upstream", "127.0.0.1:18080", "the upstream's address")
	var proxies proxyFlag
	flag.Var(&proxies, "proxy", "NAME=URL of a proxy to measure (repeatable)")
	size := flag.Int64("size", 256<<20, "download size")
	gets := flag.Int("gets", 20000, "small GETs per run")
	conc := flag.Int("conc", 8, "concurrent clients for small GETs")
	connects := flag.Int("connects", 2000, "CONNECT setups to time")
	runs := flag.Int("runs", 3, "runs per measurement (the best is kept)")
	flag.Parse()
	enc := json.NewEncoder(os.Stdout)
	emit := func(r result) { _ = enc.Encode(r) }

	type via struct {
		name string
		u    *url.URL
	}
	vias := []via{{name: "direct"}}
	for _, p := range proxies {
		name, raw, ok := strings.Cut(p, "=")
		u, err := url.Parse(raw)
		if !ok || err != nil {
			log.Fatalf("bad --proxy %q", p)
		}
		vias = append(vias, via{name, u})
	}
	for _, v := range vias {
		best := 0.0
		for i := 0; i < *runs; i++ {
			mbps, err := download(*upstream, v.u, *size, false)
			if err != nil {
				log.Fatalf("%s download: %v", v.name, err)
			}
			best = max(best, mbps)
		}
		emit(result{Via: v.name, Test: "download (forward)", Value: best, Unit: "MiB/s", Detail: fmt.Sprintf("%d MiB, best of %d", *size>>20, *runs)})
		if v.u != nil {
			best = 0
			for i := 0; i < *runs; i++ {
				mbps, err := download(*upstream, v.u, *size, true)
				if err != nil {
					log.Fatalf("%s tunnel download: %v", v.name, err)
				}
				best = max(best, mbps)
			}
			emit(result{Via: v.name, Test: "download (CONNECT tunnel)", Value: best, Unit: "MiB/s", Detail: fmt.Sprintf("%d MiB, best of %d", *size>>20, *runs)})
		}
		best = 0
		for i := 0; i < *runs; i++ {
			rps, err := smallGets(*upstream, v.u, *gets, *conc)
			if err != nil {
				log.Fatalf("%s small GETs: %v", v.name, err)
			}
			best = max(best, rps)
		}
		emit(result{Via: v.name, Test: "small GETs", Value: best, Unit: "req/s", Detail: fmt.Sprintf("%d GETs, %d keep-alive clients, best of %d", *gets, *conc, *runs)})
		if v.u != nil {
			p50, p99, err := connectLatency(*upstream, v.u, *connects)
			if err != nil {
				log.Fatalf("%s CONNECT: %v", v.name, err)
			}
			emit(result{Via: v.name, Test: "CONNECT setup p50", Value: p50, Unit: "ms", Detail: fmt.Sprintf("%d sequential setups", *connects)})
			emit(result{Via: v.name, Test: "CONNECT setup p99", Value: p99, Unit: "ms"})
		}
	}
}

func authHeader(u *url.URL) string {
	if u.User == nil {
		return ""
	}
	pass, _ := u.User.Password()
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pass))
}

// tunnel opens a CONNECT tunnel to target through the proxy.
func tunnel(proxy *url.URL, target string) (net.Conn, *bufio.Reader, error) {
	c, err := net.Dial("tcp", proxy.Host)
	if err != nil {
		return nil, nil, err
	}
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if a := authHeader(proxy); a != "" {
		req += "Proxy-Authorization: " + a + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		c.Close()
		return nil, nil, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	if resp.StatusCode != 200 {
		c.Close()
		return nil, nil, fmt.Errorf("CONNECT %s: %s", target, resp.Status)
	}
	return c, br, nil
}

func download(upstream string, proxy *url.URL, size int64, viaTunnel bool) (float64, error) {
	path := fmt.Sprintf("/bytes?n=%d", size)
	start := time.Now()
	var body io.Reader
	if viaTunnel {
		c, br, err := tunnel(proxy, upstream)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: "+upstream+"\r\nConnection: close\r\n\r\n"); err != nil {
			return 0, err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return 0, err
		}
		body = resp.Body
	} else {
		tr := &http.Transport{DisableCompression: true}
		if proxy != nil {
			tr.Proxy = http.ProxyURL(proxy)
		}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get("http://" + upstream + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("status %s", resp.Status)
		}
		body = resp.Body
	}
	buf := make([]byte, 256<<10)
	n, err := io.CopyBuffer(io.Discard, body, buf)
	if err != nil {
		return 0, err
	}
	if n != size {
		return 0, fmt.Errorf("got %d bytes, want %d", n, size)
	}
	return float64(n) / (1 << 20) / time.Since(start).Seconds(), nil
}

func smallGets(upstream string, proxy *url.URL, n, conc int) (float64, error) {
	tr := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc}
	if proxy != nil {
		tr.Proxy = http.ProxyURL(proxy)
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				resp, err := client.Get("http://" + upstream + "/hello")
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					firstErr.CompareAndSwap(nil, fmt.Errorf("status %s", resp.Status))
					return
				}
			}
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return 0, e.(error)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func connectLatency(upstream string, proxy *url.URL, n int) (p50, p99 float64, err error) {
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		c, _, err := tunnel(proxy, upstream)
		if err != nil {
			return 0, 0, err
		}
		ds = append(ds, time.Since(start))
		c.Close()
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return ms(ds[len(ds)/2]), ms(ds[len(ds)*99/100]), nil
}
