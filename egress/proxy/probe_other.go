//go:build !linux

package proxy

import "time"

// NewHostProber returns nil: the one-hop probe is Linux only (the sidecar).
func NewHostProber(maxWait time.Duration) HostProber { return nil }
