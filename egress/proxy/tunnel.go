package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker-sandbox/docker-sandbox/egress/policy"
)

// tunnel serves an allowed CONNECT: dial the checked address, answer 200,
// then copy bytes both ways until both sides are done or the tunnel idles.
func (s *Server) tunnel(ctx context.Context, w http.ResponseWriter, q *request) {
	up, ip, err := s.dial(ctx, q.addrs, q.port)
	var he *hostAddrError
	if errors.As(err, &he) {
		q.rec.IP = he.addr.String()
		s.deny(w, q, http.StatusForbidden, policy.CodeDeniedRange, he.msg)
		return
	}
	if err != nil {
		q.rec.IP = q.addrs[0].String()
		s.fail(w, q, http.StatusBadGateway, policy.CodeConnect, "cannot connect to "+q.rec.Host+": "+dialReason(err))
		return
	}
	q.rec.IP = ip.String()
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		s.fail(w, q, http.StatusInternalServerError, policy.CodeUpstream, "cannot take over the connection")
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		s.finish(q, Allow, policy.CodeUpstream, 0)
		return
	}
	defer conn.Close()
	defer up.Close()
	_ = conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		s.finish(q, Allow, policy.CodeUpstream, http.StatusOK)
		return
	}
	// Bytes the client sent right after its CONNECT request (a pipelined
	// TLS ClientHello) are in the server's buffer.
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			s.finish(q, Allow, policy.CodeUpstream, http.StatusOK)
			return
		}
		q.rec.BytesOut += int64(n)
	}
	raw := conn
	if rc, ok := conn.(*releaseConn); ok {
		raw = rc.Conn // the *net.TCPConn itself (CloseWrite)
	}
	toUp, toClient := pipe(raw, up, s.cfg.IdleTimeout)
	q.rec.BytesOut += toUp
	q.rec.BytesIn += toClient
	s.finish(q, Allow, policy.CodeAllowed, http.StatusOK)
}

// Tunnel copies go through user space: on loopback and bridges, read and
// write with a large buffer beat splice(2) here. A tunnel starts with a
// small buffer and takes a large one once it moved bulkAfter bytes, so
// that many quiet tunnels cost little memory.
const (
	smallBuf  = 32 << 10
	largeBuf  = 256 << 10
	bulkAfter = 1 << 20
)

var (
	smallPool = sync.Pool{New: func() any { b := make([]byte, smallBuf); return &b }}
	largePool = sync.Pool{New: func() any { b := make([]byte, largeBuf); return &b }}
)

// pipe copies a→b and b→a. A side that ends (EOF) half-closes the other;
// an error or idleness (no byte either way for idle) closes both.
func pipe(a, b net.Conn, idle time.Duration) (aToB, bToA int64) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			a.Close()
			b.Close()
		})
	}
	one := func(dst, src net.Conn, n *int64) {
		var err error
		*n, err = copyIdle(dst, src, idle, &last)
		if err != nil {
			closeBoth()
			return
		}
		closeWrite(dst)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		one(b, a, &aToB)
	}()
	one(a, b, &bToA) // the other direction in this goroutine
	wg.Wait()
	return aToB, bToA
}

func copyIdle(dst, src net.Conn, idle time.Duration, last *atomic.Int64) (int64, error) {
	pool := &smallPool
	bp := pool.Get().(*[]byte)
	defer func() { pool.Put(bp) }()
	var total int64
	for {
		if total >= bulkAfter && pool == &smallPool {
			pool.Put(bp)
			pool = &largePool
			bp = pool.Get().(*[]byte)
		}
		buf := *bp
		_ = src.SetReadDeadline(time.Now().Add(idle))
		n, err := src.Read(buf)
		if n > 0 {
			last.Store(time.Now().UnixNano())
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return total, werr
			}
			total += int64(n)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return total, nil
			}
			if isTimeout(err) && time.Since(time.Unix(0, last.Load())) < idle {
				continue // the other direction is busy
			}
			return total, err
		}
	}
}

func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	c.Close()
}

// dialReason is a short, address-free description of a dial error.
func dialReason(err error) string {
	switch {
	case err == nil:
		return ""
	case isTimeout(err):
		return "connection timed out"
	case strings.Contains(err.Error(), "refused"):
		return "connection refused"
	case strings.Contains(err.Error(), "unreachable"):
		return "network unreachable"
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return sanitize(oe.Err.Error())
	}
	return sanitize(err.Error())
}
