package proxy

import (
	"bufio"
	"encoding/hex"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Route is one route of the proxy's own routing table.
type Route struct {
	Dst netip.Prefix
	// Gateway is the next hop; invalid for an on-link route.
	Gateway netip.Addr
}

// LocalNet is the proxy's view of its own network: its addresses, the
// subnets it is connected to, and its routes. In the sidecar, every next hop
// of a route and the first address of every connected subnet are the
// engine's host (Docker puts the bridge's address there), whatever the
// engine's API says about gateways.
type LocalNet struct {
	Addrs    []netip.Addr
	Prefixes []netip.Prefix // connected subnets (not loopback)
	Routes   []Route
}

// Own reports whether a is one of the proxy's own addresses.
func (l *LocalNet) Own(a netip.Addr) bool {
	a = a.Unmap()
	for _, x := range l.Addrs {
		if x == a {
			return true
		}
	}
	return false
}

// OnLink reports whether a is in a connected subnet (reached without a
// router: no one-hop probe can tell the host from a neighbour there).
func (l *LocalNet) OnLink(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range l.Prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// IsHost reports whether a is a next hop of a route, or the first address
// of a connected subnet that is not the proxy's own.
func (l *LocalNet) IsHost(a netip.Addr) bool {
	a = a.Unmap()
	for _, r := range l.Routes {
		if r.Gateway == a {
			return true
		}
	}
	for _, p := range l.Prefixes {
		if p.Bits() < p.Addr().BitLen()-1 && p.Masked().Addr().Next() == a && !l.Own(a) {
			return true
		}
	}
	return false
}

// Gateway returns the next hop the proxy would send a's packets to (the
// most specific route with a gateway); ok is false for on-link or
// unroutable addresses.
func (l *LocalNet) Gateway(a netip.Addr) (netip.Addr, bool) {
	a = a.Unmap()
	best := -1
	var gw netip.Addr
	for _, r := range l.Routes {
		if r.Dst.Contains(a) && r.Dst.Bits() > best {
			best, gw = r.Dst.Bits(), r.Gateway
		}
	}
	return gw, best >= 0 && gw.IsValid()
}

// ReadLocalNet reads the interfaces and, on Linux, the routing tables
// (/proc/net/route, /proc/net/ipv6_route).
func ReadLocalNet() *LocalNet {
	l := &LocalNet{}
	if ifs, err := net.Interfaces(); err == nil {
		for _, ifc := range ifs {
			as, err := ifc.Addrs()
			if err != nil {
				continue
			}
			for _, ia := range as {
				n, ok := ia.(*net.IPNet)
				if !ok {
					continue
				}
				x, ok := netip.AddrFromSlice(n.IP)
				if !ok {
					continue
				}
				x = x.Unmap()
				l.Addrs = append(l.Addrs, x)
				ones, _ := n.Mask.Size()
				if ifc.Flags&net.FlagLoopback == 0 && !x.IsLoopback() && !x.IsLinkLocalUnicast() {
					l.Prefixes = append(l.Prefixes, netip.PrefixFrom(x, ones).Masked())
				}
			}
		}
	}
	if f, err := os.Open("/proc/net/route"); err == nil {
		l.Routes = append(l.Routes, parseRoute4(f)...)
		f.Close()
	}
	if f, err := os.Open("/proc/net/ipv6_route"); err == nil {
		l.Routes = append(l.Routes, parseRoute6(f)...)
		f.Close()
	}
	return l
}

// le32 reads a /proc/net/route field: hexadecimal in host byte order
// (little-endian on the helper's amd64 and arm64).
func le32(s string) (netip.Addr, bool) {
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}), true
}

func parseRoute4(f *os.File) []Route {
	var out []Route
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 8 {
			continue
		}
		dst, ok1 := le32(fs[1])
		gw, ok2 := le32(fs[2])
		mask, ok3 := le32(fs[7])
		if !ok1 || !ok2 || !ok3 {
			continue
		}
		m := mask.As4()
		bits := 0
		for _, b := range m {
			for i := 7; i >= 0 && b&(1<<i) != 0; i-- {
				bits++
			}
		}
		r := Route{Dst: netip.PrefixFrom(dst, bits).Masked()}
		if !gw.IsUnspecified() {
			r.Gateway = gw
		}
		out = append(out, r)
	}
	return out
}

func parseRoute6(f *os.File) []Route {
	var out []Route
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 {
			continue
		}
		dst, err1 := hex.DecodeString(fs[0])
		plen, err2 := strconv.ParseUint(fs[1], 16, 8)
		gw, err3 := hex.DecodeString(fs[4])
		if err1 != nil || err2 != nil || err3 != nil || len(dst) != 16 || len(gw) != 16 || plen > 128 {
			continue
		}
		if fs[9] == "lo" {
			continue // local and multicast entries
		}
		r := Route{Dst: netip.PrefixFrom(netip.AddrFrom16([16]byte(dst)), int(plen)).Masked()}
		if g := netip.AddrFrom16([16]byte(gw)); !g.IsUnspecified() {
			r.Gateway = g
		}
		out = append(out, r)
	}
	return out
}

// cachedLocalNet reads the local view at most once a second (sandbox
// networks are connected to the sidecar while it runs).
func cachedLocalNet() func() *LocalNet {
	var (
		mu  sync.Mutex
		at  time.Time
		cur *LocalNet
	)
	return func() *LocalNet {
		mu.Lock()
		defer mu.Unlock()
		if cur == nil || time.Since(at) > time.Second {
			cur, at = ReadLocalNet(), time.Now()
		}
		return cur
	}
}
