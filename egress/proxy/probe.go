package proxy

import (
	"context"
	"fmt"
	"net/netip"
)

// HostProber finds, at dial time, addresses of the proxy's first hop (in
// the sidecar: the engine's host) that no list names: an address of a
// network created while a program runs, or the host's own LAN address. It
// sends a TCP SYN with a hop limit of one to port 0 of the address, and at
// the same time to ref, the next hop itself. A packet with one hop left is
// delivered only by the first hop's own stack (a router drops it, and may
// say so with an ICMP "time exceeded"): an answer (a reset, since nothing
// listens on port 0, so no program on the host ever sees a connection)
// means the address is the host's. No answer while the next hop has
// answered twice as long ago, or an ICMP error, means it is not.
type HostProber interface {
	Start(a, ref netip.Addr) (Probe, error)
}

// Probe is one address being probed.
type Probe interface {
	// Wait reports whether the address answered at one hop (it is the
	// host's), waiting at most until the decision can be made.
	Wait(ctx context.Context) bool
	// Answered reports whether the address has answered by now (checked
	// again after the real connection was made: a late answer still
	// refuses it).
	Answered() bool
	Close()
}

// hostAddrError is a dial refused because the address is the engine's
// host's.
type hostAddrError struct {
	addr netip.Addr
	msg  string
}

func (e *hostAddrError) Error() string { return e.msg }

func errHost(a netip.Addr) *hostAddrError {
	return &hostAddrError{addr: a, msg: fmt.Sprintf("%s answered at one hop: it is an address of the engine's host, never reachable", a)}
}
