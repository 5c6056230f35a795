package core

import "time"

// Settings are a sandbox's container settings: the configuration's keys of
// the sandbox group (plugin/config's key table, FlagsSandbox) and the part of
// exec.Spec they become, one struct embedded in both. A new container
// setting is a field here, its key row in plugin/config/keys.go and its use
// in exec/spec.go (the container's settings, the Spec's hash).
type Settings struct {
	// Image is the image to run in. In the configuration "" means the
	// built-in runtime image; in a Spec it is the resolved reference.
	Image   string
	Network string // "none", "proxy" or a Docker network's name
	Runtime string // "" = the engine's default

	Memory  int64 // bytes; swap is set equal
	CPUs    float64
	Pids    int64
	Nofile  int64
	TmpSize int64 // bytes
	// Disk is the bytes /opt/workspace and /opt/user may hold together
	// (0: no limit).
	Disk    int64
	IdleTTL time.Duration // 0: never
	// MaxLifetime ends the sandbox at that age, even while busy (0: none).
	MaxLifetime time.Duration
}
