// Command testupstream is the upstream server of the egress tests and
// benchmarks: a static HTTP and HTTPS server that records every connection
// it gets, so that a test can tell which connections reached it, and from
// where. It is built by the tests (CGO_ENABLED=0) and run as a FROM scratch
// image on an internal network, or on loopback by scripts/bench-egress.sh.
//
//	testupstream [--http :80] [--https :443 --cert FILE --key FILE] [--canary PORT,...]
//
// Routes: /hello (a greeting naming the Host header), /redirect (302 to the
// cloud metadata address), /headers (the request's headers as JSON),
// /bytes?n=N (N bytes), /simple/ (a PEP 503 index of one package,
// egress-probe 1.0, whose wheel is made at start: `import egress_probe;
// egress_probe.VALUE` is 42) and /files/ (the wheel). A canary port
// accepts connections, logs them and closes them: nothing should ever
// reach one. Every connection and request is one line on stdout.
package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	httpAddr := flag.String("http", ":80", "HTTP address (\"\": none)")
	httpsAddr := flag.String("https", "", "HTTPS address (\"\": none)")
	cert := flag.String("cert", "/cert.pem", "TLS certificate")
	key := flag.String("key", "/key.pem", "TLS key")
	canary := flag.String("canary", "", "comma-separated ports that must never be reached")
	quiet := flag.Bool("quiet", false, "do not log requests (benchmarks)")
	flag.Parse()
	logger := log.New(os.Stdout, "", 0)
	say := func(format string, args ...any) {
		if !*quiet {
			logger.Printf(format, args...)
		}
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from upstream, host %s\n", r.Host)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(r.Header)
	})
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		buf := make([]byte, 256<<10)
		for n > 0 {
			m := int64(len(buf))
			if n < m {
				m = n
			}
			if _, err := w.Write(buf[:m]); err != nil {
				return
			}
			n -= m
		}
	})
	wheel := probeWheel()
	wheelSum := sha256.Sum256(wheel)
	mux.HandleFunc("/simple/", func(w http.ResponseWriter, r *http.Request) {
		switch strings.Trim(r.URL.Path, "/") {
		case "simple":
			fmt.Fprint(w, "<!DOCTYPE html><html><body><a href=\"/simple/egress-probe/\">egress-probe</a></body></html>\n")
		case "simple/egress-probe":
			fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/files/%s#sha256=%s\">%[1]s</a></body></html>\n", wheelName, hex.EncodeToString(wheelSum[:]))
		default:
			http.NotFound(w, r)
		}
	})
	mux.HandleFunc("/files/"+wheelName, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(wheel)
	})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		say("REQ %s %s %s %s from %s", r.Method, r.Host, r.URL.RequestURI(), r.Proto, r.RemoteAddr)
		mux.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(c net.Conn, s http.ConnState) {
			if s == http.StateNew {
				say("CONN %s from %s", c.LocalAddr(), c.RemoteAddr())
			}
		}}
	errc := make(chan error, 4)
	if *httpAddr != "" {
		l, err := net.Listen("tcp", *httpAddr)
		if err != nil {
			logger.Fatal(err)
		}
		go func() { errc <- srv.Serve(l) }()
	}
	if *httpsAddr != "" {
		c, err := tls.LoadX509KeyPair(*cert, *key)
		if err != nil {
			logger.Fatal(err)
		}
		l, err := tls.Listen("tcp", *httpsAddr, &tls.Config{Certificates: []tls.Certificate{c}})
		if err != nil {
			logger.Fatal(err)
		}
		go func() { errc <- srv.Serve(l) }()
	}
	for _, p := range strings.Split(*canary, ",") {
		if p == "" {
			continue
		}
		l, err := net.Listen("tcp", ":"+p)
		if err != nil {
			logger.Fatal(err)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					errc <- err
					return
				}
				logger.Printf("CANARY %s from %s", c.LocalAddr(), c.RemoteAddr())
				_, _ = io.WriteString(c, "canary\n")
				c.Close()
			}
		}()
	}
	say("READY")
	logger.Fatal(<-errc)
}

const wheelName = "egress_probe-1.0-py3-none-any.whl"

// probeWheel is the wheel of egress-probe 1.0: one module, egress_probe,
// with VALUE = 42, and the metadata pip checks (RECORD with hashes).
func probeWheel() []byte {
	files := []struct{ name, data string }{
		{"egress_probe/__init__.py", "VALUE = 42\n"},
		{"egress_probe-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: egress-probe\nVersion: 1.0\nSummary: the egress tests' package\n"},
		{"egress_probe-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: testupstream\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			panic(err)
		}
		_, _ = io.WriteString(w, f.data)
		sum := sha256.Sum256([]byte(f.data))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.data))
	}
	record.WriteString("egress_probe-1.0.dist-info/RECORD,,\n")
	w, err := zw.Create("egress_probe-1.0.dist-info/RECORD")
	if err != nil {
		panic(err)
	}
	_, _ = io.WriteString(w, record.String())
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}
