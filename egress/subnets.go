package egress

import (
	"fmt"
	"hash/fnv"
	"math/big"
	"net/netip"
)

// Layout is how one scope network's subnet is used.
type Layout struct {
	Subnet netip.Prefix
	// Gateway is reserved by the engine's IPAM; nothing answers on it (the
	// bridge carries no address: inhibit_ipv4).
	Gateway netip.Addr
	// Proxy is the sidecar's fixed address on the network.
	Proxy netip.Addr
	// DNS is the sandboxes' configured resolver: an address nothing holds,
	// so that the engine's embedded DNS forwards queries nowhere.
	DNS netip.Addr
	// Range is where the engine allocates the sandboxes' addresses (the
	// upper half), away from the fixed ones.
	Range netip.Prefix
}

// LayoutOf returns the layout of a subnet (IPv4, /16 to /28).
func LayoutOf(subnet netip.Prefix) (Layout, error) {
	subnet = subnet.Masked()
	if !subnet.Addr().Is4() || subnet.Bits() < 16 || subnet.Bits() > 28 {
		return Layout{}, fmt.Errorf("scope subnets must be IPv4 /16 to /28, not %s", subnet)
	}
	base := subnet.Addr()
	upper := addN(base, uint64(1)<<(32-subnet.Bits()-1))
	return Layout{
		Subnet:  subnet,
		Gateway: addN(base, 1),
		Proxy:   addN(base, 2),
		DNS:     addN(base, 3),
		Range:   netip.PrefixFrom(upper, subnet.Bits()+1),
	}, nil
}

func addN(a netip.Addr, n uint64) netip.Addr {
	b := a.As4()
	v := uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
	v += n
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// SubnetCount is how many /bits subnets the pool holds.
func SubnetCount(pool netip.Prefix, bits int) uint64 {
	if bits < pool.Bits() || bits > 32 {
		return 0
	}
	return uint64(1) << (bits - pool.Bits())
}

// CheckPool validates a pool and a subnet size.
func CheckPool(pool netip.Prefix, bits int) error {
	if !pool.IsValid() || !pool.Addr().Is4() {
		return fmt.Errorf("the subnet pool must be an IPv4 prefix, not %s", pool)
	}
	if pool.Masked() != pool {
		return fmt.Errorf("the subnet pool %s is not a network address (use %s)", pool, pool.Masked())
	}
	if bits < 16 || bits > 28 || bits < pool.Bits() {
		return fmt.Errorf("the subnet size /%d must be between /%d and /28", bits, max(16, pool.Bits()))
	}
	return nil
}

// Allocate picks a /bits subnet of pool that overlaps none of used and is
// not in skip. The search starts at a place derived from key (the scope's
// name), so that concurrent first calls of different scopes rarely pick the
// same subnet; the engine refuses an overlap anyway and the caller retries.
func Allocate(pool netip.Prefix, bits int, used []netip.Prefix, skip map[netip.Prefix]bool, key string) (netip.Prefix, error) {
	if err := CheckPool(pool, bits); err != nil {
		return netip.Prefix{}, err
	}
	n := SubnetCount(pool, bits)
	h := fnv.New64a()
	h.Write([]byte(key))
	start := h.Sum64() % n
	step := uint64(1) << (32 - bits)
	for i := uint64(0); i < n; i++ {
		idx := (start + i) % n
		p := netip.PrefixFrom(addN(pool.Addr(), idx*step), bits)
		if skip[p] {
			continue
		}
		free := true
		for _, u := range used {
			if u.Overlaps(p) {
				free = false
				break
			}
		}
		if free {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("no free /%d subnet left in %s (%s subnets in use): remove unused scope networks (docker sandbox egress stop removes those without sandboxes) or start the sidecar with a larger --subnet-pool",
		bits, pool, new(big.Int).SetUint64(n))
}
