package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sort"
)

// NetworksVersion is the version of the networks file format.
const NetworksVersion = 1

// Networks is what the plugin tells the sidecar about the engine's networks
// (the sidecar has no Engine API access): the addresses of the engine's
// host it must never dial, and each scope's subnet, the only place that
// scope's credential is accepted from. The plugin recomputes it from the
// engine's network list and pushes it when it changed.
type Networks struct {
	Version int `json:"version"`
	// Host are addresses of the engine's host: every network's gateway,
	// or the first address of a subnet with no gateway recorded, and the
	// auxiliary addresses networks reserve.
	Host []netip.Addr `json:"host"`
	// Scopes maps a scope to its network's subnet.
	Scopes map[string]netip.Prefix `json:"scopes"`
}

// Normalized returns n sorted and without duplicates, addresses unmapped
// and prefixes masked, and validates it.
func (n Networks) Normalized() (Networks, error) {
	out := Networks{Version: NetworksVersion, Host: []netip.Addr{}, Scopes: map[string]netip.Prefix{}}
	seen := map[netip.Addr]bool{}
	for _, a := range n.Host {
		if !a.IsValid() || a.Zone() != "" {
			return Networks{}, fmt.Errorf("networks: bad host address %v", a)
		}
		a = a.Unmap()
		if !seen[a] {
			seen[a] = true
			out.Host = append(out.Host, a)
		}
	}
	sort.Slice(out.Host, func(i, j int) bool { return out.Host[i].Less(out.Host[j]) })
	for s, p := range n.Scopes {
		if !ValidScope(s) {
			return Networks{}, fmt.Errorf("networks: bad scope name %q", s)
		}
		if !p.IsValid() || p.Addr().Zone() != "" {
			return Networks{}, fmt.Errorf("networks: scope %s: bad subnet %v", s, p)
		}
		out.Scopes[s] = p.Masked()
	}
	return out, nil
}

// Marshal returns the canonical JSON of n (the plugin compares it with
// what the sidecar holds).
func (n Networks) Marshal() []byte {
	b, _ := json.Marshal(n)
	return append(b, '\n')
}

// ParseNetworks reads and validates a networks file.
func ParseNetworks(b []byte) (Networks, error) {
	var n Networks
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&n); err != nil {
		return Networks{}, fmt.Errorf("networks file: %w", err)
	}
	if n.Version != NetworksVersion {
		return Networks{}, fmt.Errorf("networks file: version %d, want %d", n.Version, NetworksVersion)
	}
	return n.Normalized()
}

// LoadNetworks reads the networks file at path; ok is false when it does
// not exist.
func LoadNetworks(path string) (n Networks, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Networks{}, false, nil
	}
	if err != nil {
		return Networks{}, false, err
	}
	n, err = ParseNetworks(b)
	return n, err == nil, err
}
