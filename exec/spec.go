package exec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-units"
)

// Paths inside every sandbox.
const (
	WorkspaceDir = "/opt/workspace"
	UserDir      = "/opt/user"
	HelperDir    = "/opt/sandbox"
	HelperPath   = HelperDir + "/sandbox-helper"
	// SandboxUser is the only identity code runs as.
	SandboxUser = "65532:65532"
)

// Spec is everything that decides how a sandbox container is created. Two
// calls with different Specs for one target conflict (see Hash).
type Spec struct {
	Target
	Image   string // runtime image reference
	Network string // "none", "proxy" or a Docker network's name
	// NetworkAttach is the Docker network a proxy-mode container joins (its
	// scope's internal network); "" means Network itself. Not in Hash.
	NetworkAttach string
	// DNS are the container's resolvers (proxy mode: an address nothing
	// answers on, so that no name resolves inside). Not in Hash.
	DNS        []string
	DNSOptions []string
	// Env is added to the container's environment at create (proxy mode:
	// HTTP_PROXY and friends). Not in Hash.
	Env     []string
	Memory  int64 // bytes; swap is set equal
	CPUs    float64
	Pids    int64
	Nofile  int64
	TmpSize int64
	IdleTTL time.Duration
	Runtime string // "" = engine default
	// HelperID identifies the embedded helper binaries (part of Hash).
	HelperID string
	// HelperVolume is the volume holding the helper binary for the image's
	// architecture; it is known once the image has been inspected.
	HelperVolume string
	Version      string
}

// Hash identifies the Spec's settings (not its target). The helper compares
// it with the one PID 1 was started with, so a call with other settings is
// told instead of silently running under the old ones.
func (s Spec) Hash() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%g\x00%d\x00%d\x00%d\x00%s\x00%s\x00%s\x00%s",
		s.Image, s.Network, s.Memory, s.CPUs, s.Pids, s.Nofile, s.TmpSize, s.IdleTTL, s.Runtime, s.HelperID, s.Version)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Describe is a short human description of the settings, for mismatch errors.
func (s Spec) Describe() string {
	rt := s.Runtime
	if rt == "" {
		rt = "default"
	}
	return fmt.Sprintf("image %s, network %s, memory %s, cpus %g, pids %d, runtime %s, idle-ttl %s",
		s.Image, s.Network, units.BytesSize(float64(s.Memory)), s.CPUs, s.Pids, rt, s.IdleTTL)
}

func (s Spec) labels() map[string]string {
	l := BaseLabels(KindSandbox)
	l[LabelScope] = s.Scope
	l[LabelSession] = s.Session
	l[LabelVersion] = s.Version
	l[LabelSpec] = s.Hash()
	l[LabelIdleTTL] = s.IdleTTL.String()
	l[LabelNetwork] = s.Network
	l[LabelImage] = s.Image
	l[LabelRuntime] = s.Runtime
	return l
}

// ContainerConfig returns the hardened create request for the sandbox.
func (s Spec) ContainerConfig() (*container.Config, *container.HostConfig) {
	cfg := &container.Config{
		Image:      s.Image,
		User:       SandboxUser,
		WorkingDir: WorkspaceDir,
		Entrypoint: []string{HelperPath, "init", "--idle-ttl", s.IdleTTL.String(), "--spec", s.Hash()},
		Cmd:        nil,
		Env:        append([]string{"HOME=" + UserDir, "TMPDIR=/tmp"}, s.Env...),
		Labels:     s.labels(),
		// No stdin, no TTY: the container is only a home for execs.
		AttachStdin: false, OpenStdin: false, Tty: false,
		StopSignal: "SIGTERM",
	}
	stopTimeout := 2
	cfg.StopTimeout = &stopTimeout
	pids := s.Pids
	netMode := s.Network
	if s.NetworkAttach != "" {
		netMode = s.NetworkAttach
	}
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(netMode),
		DNS:            s.DNS,
		DNSOptions:     s.DNSOptions,
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		Privileged:     false,
		IpcMode:        container.IpcMode("private"),
		CgroupnsMode:   container.CgroupnsModePrivate,
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
		AutoRemove:     true,
		LogConfig:      container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "1m", "max-file": "1"}},
		Tmpfs:          map[string]string{"/tmp": "rw,nosuid,nodev,size=" + strconv.FormatInt(s.TmpSize, 10) + ",mode=1777"},
		Runtime:        s.Runtime,
		Resources: container.Resources{
			Memory:     s.Memory,
			MemorySwap: s.Memory,
			NanoCPUs:   int64(s.CPUs * 1e9),
			PidsLimit:  &pids,
			Ulimits:    []*container.Ulimit{{Name: "nofile", Soft: s.Nofile, Hard: s.Nofile}},
		},
		Mounts: s.mounts(),
	}
	return cfg, hc
}

func (s Spec) mounts() []mount.Mount {
	ws := mount.Mount{Type: mount.TypeVolume, Source: s.WorkspaceVolume(), Target: WorkspaceDir}
	user := mount.Mount{Type: mount.TypeVolume, Source: s.UserVolume(), Target: UserDir}
	helper := mount.Mount{Type: mount.TypeVolume, Source: s.HelperVolume, Target: HelperDir, ReadOnly: true}
	return []mount.Mount{ws, user, helper}
}

// seederMounts are the mounts of the never-started container that creates
// and fills the volumes from the helper image (owners 65532, the helper).
func (s Spec) seederMounts() []mount.Mount {
	vol := func(name, target string, l map[string]string) mount.Mount {
		return mount.Mount{Type: mount.TypeVolume, Source: name, Target: target,
			VolumeOptions: &mount.VolumeOptions{Labels: l}}
	}
	userL := BaseLabels(KindUser)
	userL[LabelScope] = s.Scope
	ms := []mount.Mount{vol(s.UserVolume(), UserDir, userL)}
	if s.Session != "" {
		wsL := BaseLabels(KindWorkspace)
		wsL[LabelScope] = s.Scope
		wsL[LabelSession] = s.Session
		ms = append(ms, vol(s.WorkspaceVolume(), WorkspaceDir, wsL))
	}
	hl := BaseLabels(KindHelper)
	ms = append(ms, vol(s.HelperVolume, HelperDir, hl))
	return ms
}

// ResolveWorkdir maps --workdir to an absolute path inside the workspace.
func ResolveWorkdir(w string) (string, error) {
	if w == "" {
		return WorkspaceDir, nil
	}
	p := w
	if !path.IsAbs(p) {
		p = path.Join(WorkspaceDir, p)
	}
	p = path.Clean(p)
	for _, root := range []string{WorkspaceDir, UserDir} {
		if p == root || strings.HasPrefix(p, root+"/") {
			return p, nil
		}
	}
	return "", Errorf(CodeBadFlag, "invalid --workdir %q: it must lie inside %s (relative paths are taken from there) or %s", w, WorkspaceDir, UserDir)
}
