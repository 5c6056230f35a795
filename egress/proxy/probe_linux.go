package proxy

import (
	"context"
	"net/netip"
	"syscall"
	"time"
)

// NewHostProber returns the one-hop prober (Linux), or nil where there is
// none. maxWait bounds one probe when the next hop never answers.
func NewHostProber(maxWait time.Duration) HostProber {
	if maxWait <= 0 {
		maxWait = 250 * time.Millisecond
	}
	return &ttlProber{maxWait: maxWait}
}

type ttlProber struct{ maxWait time.Duration }

const (
	hopPending = iota
	hopAnswered
	hopNotHere // an ICMP error (time exceeded, unreachable) or a local failure
)

// oneHop is a non-blocking TCP connection attempt to port 0 of an address
// with a hop limit of one.
type oneHop struct {
	fd    int
	state int
}

func startOneHop(a netip.Addr) (*oneHop, error) {
	a = a.Unmap()
	if !a.IsValid() {
		return nil, syscall.EINVAL
	}
	family, level, opt := syscall.AF_INET6, syscall.IPPROTO_IPV6, syscall.IPV6_UNICAST_HOPS
	var sa syscall.Sockaddr = &syscall.SockaddrInet6{Port: 0, Addr: a.As16()}
	if a.Is4() {
		family, level, opt = syscall.AF_INET, syscall.IPPROTO_IP, syscall.IP_TTL
		sa = &syscall.SockaddrInet4{Port: 0, Addr: a.As4()}
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.SetsockoptInt(fd, level, opt, 1); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	h := &oneHop{fd: fd}
	switch err := syscall.Connect(fd, sa); err {
	case syscall.EINPROGRESS:
	case nil, syscall.ECONNREFUSED:
		h.state = hopAnswered
	default:
		h.state = hopNotHere
	}
	return h, nil
}

// poll reads the attempt's state from the kernel (an answer is recorded
// there whenever the program looks); the first outcome sticks (reading
// SO_ERROR clears it).
func (h *oneHop) poll() int {
	if h == nil || h.state != hopPending {
		if h == nil {
			return hopNotHere
		}
		return h.state
	}
	e, err := syscall.GetsockoptInt(h.fd, syscall.SOL_SOCKET, syscall.SO_ERROR)
	switch {
	case err != nil:
		h.state = hopNotHere
	case e == 0:
		if _, err := syscall.Getpeername(h.fd); err == nil {
			h.state = hopAnswered
		}
	case syscall.Errno(e) == syscall.ECONNREFUSED:
		h.state = hopAnswered
	default:
		h.state = hopNotHere
	}
	return h.state
}

func (h *oneHop) close() {
	if h != nil && h.fd >= 0 {
		syscall.Close(h.fd)
		h.fd = -1
	}
}

type ttlProbe struct {
	target, ref *oneHop
	start       time.Time
	maxWait     time.Duration
}

func (p *ttlProber) Start(a, ref netip.Addr) (Probe, error) {
	t, err := startOneHop(a)
	if err != nil {
		return nil, err
	}
	pr := &ttlProbe{target: t, start: time.Now(), maxWait: p.maxWait}
	if ref.IsValid() && ref.Unmap() != a.Unmap() {
		if r, err := startOneHop(ref); err == nil {
			pr.ref = r
		}
	}
	return pr, nil
}

func (p *ttlProbe) Wait(ctx context.Context) bool {
	step := 50 * time.Microsecond
	refAt := time.Duration(-1)
	for {
		switch p.target.poll() {
		case hopAnswered:
			return true
		case hopNotHere:
			return false
		}
		el := time.Since(p.start)
		if p.ref != nil && refAt < 0 {
			switch p.ref.poll() {
			case hopAnswered:
				refAt = el
			case hopNotHere:
				p.ref.close()
				p.ref = nil
			}
		}
		// The host answers both within the same round trip: the target
		// staying silent twice as long (and 2 ms more) is not the host.
		if refAt >= 0 && el >= 2*refAt+2*time.Millisecond {
			return false
		}
		if el >= p.maxWait {
			return false
		}
		t := time.NewTimer(step)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		if step < time.Millisecond {
			step *= 2
		}
	}
}

func (p *ttlProbe) Answered() bool { return p.target.poll() == hopAnswered }

func (p *ttlProbe) Close() {
	p.target.close()
	p.ref.close()
}
