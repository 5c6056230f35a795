package proxy

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"
)

// The real one-hop probe on loopback: the local stack answers port 0 with
// a reset, so the address is found to be the host's, and no program
// listening on the address sees a connection.
func TestTTLProbeLoopback(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	for _, a := range []string{"127.0.0.1", "::1"} {
		p, err := NewHostProber(time.Second).Start(netip.MustParseAddr(a), netip.MustParseAddr("127.0.0.1"))
		if err != nil {
			if a == "::1" {
				continue // no IPv6 on this machine
			}
			t.Fatal(err)
		}
		start := time.Now()
		if !p.Wait(context.Background()) || !p.Answered() {
			t.Fatalf("%s did not answer at one hop", a)
		}
		if d := time.Since(start); d > 900*time.Millisecond {
			t.Fatalf("%s: waited %v for a local answer", a, d)
		}
		p.Close()
	}
	l.Close()
	select {
	case <-accepted:
		t.Fatal("the probe made a connection to a listener")
	default:
	}
}
