package proxy

import (
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/docker-sandbox/docker-sandbox/egress/policy"
)

// NetSnapshot is one version of the networks file.
type NetSnapshot struct {
	policy.Networks
	host map[netip.Addr]bool
}

// NewNetSnapshot indexes n.
func NewNetSnapshot(n policy.Networks) *NetSnapshot {
	s := &NetSnapshot{Networks: n, host: map[netip.Addr]bool{}}
	for _, a := range n.Host {
		s.host[a.Unmap()] = true
	}
	return s
}

// IsHost reports whether a is listed as an address of the engine's host.
func (s *NetSnapshot) IsHost(a netip.Addr) bool { return s != nil && s.host[a.Unmap()] }

// NetSource gives the proxy the engine's networks as the plugin last
// pushed them. A nil snapshot (no file yet) refuses every credential.
type NetSource interface {
	Current() (*NetSnapshot, error)
}

// StaticNets is a fixed NetSource (tests).
type StaticNets struct{ S *NetSnapshot }

// Current implements NetSource.
func (s StaticNets) Current() (*NetSnapshot, error) { return s.S, nil }

// NetFile reads the networks file and re-reads it when it changes (looked
// at with a stat at most every Every). A file that no longer parses leaves
// the previous snapshot in force.
type NetFile struct {
	Path    string
	Every   time.Duration
	OnError func(error)

	mu  sync.Mutex
	cur *NetSnapshot
	fi  os.FileInfo
	at  time.Time
}

// Current implements NetSource.
func (f *NetFile) Current() (*NetSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fi != nil && f.Every > 0 && time.Since(f.at) < f.Every {
		return f.cur, nil
	}
	f.at = time.Now()
	fi, err := os.Stat(f.Path)
	if err != nil {
		if os.IsNotExist(err) && f.cur == nil {
			return nil, nil
		}
		return f.cur, nil
	}
	if f.fi != nil && os.SameFile(f.fi, fi) && f.fi.Size() == fi.Size() && f.fi.ModTime().Equal(fi.ModTime()) {
		return f.cur, nil
	}
	f.fi = fi
	n, ok, err := policy.LoadNetworks(f.Path)
	if err != nil || !ok {
		if f.OnError != nil && err != nil {
			f.OnError(fmt.Errorf("networks %s: %w (keeping the previous state)", f.Path, err))
		}
		return f.cur, nil
	}
	f.cur = NewNetSnapshot(n)
	return f.cur, nil
}
