package exec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-units"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// Spec is everything that decides how a sandbox container is created. Two
// calls with different Specs for one target conflict (see Hash).
type Spec struct {
	core.Target
	// Settings are the container settings (core.Settings: the image, its
	// network, limits and runtime).
	core.Settings
	// NetworkAttach is the Docker network a proxy-mode container joins (its
	// scope's internal network); "" means Network itself. Not in Hash.
	NetworkAttach string
	// DNS are the container's resolvers (proxy mode: an address nothing
	// answers on, so that no name resolves inside). Not in Hash.
	DNS        []string
	DNSOptions []string
	// Env is added to the container's environment at create (proxy mode:
	// HTTP_PROXY and friends). Not in Hash.
	Env []string
	// HelperID identifies the embedded helper binaries (part of Hash).
	HelperID string
	// HelperVolume is the volume holding the helper binary for the image's
	// architecture; it is known once the image has been inspected.
	HelperVolume string
	Version      string
	// ImageVolumes are the image's VOLUME paths (known once the image has
	// been inspected): each gets an empty read-only tmpfs instead of a
	// writable anonymous volume. Not in Hash (the image is).
	ImageVolumes []string
	// Podman: the engine is Podman's Docker-compatible API (podman.go);
	// known on a create. Not in Hash (a sandbox lives on one engine).
	Podman bool
	// first, when set, asks the call's create to attach to the container
	// before it starts it, for its first program (Run; firstAttach). Not
	// in Hash.
	first *firstAttach
	// ImageEnv is the image's environment (known once the image has been
	// inspected): a session's sandbox gets every variable of it that names
	// a place under /opt/user with that place moved to the session's home
	// (homeEnv). Not in Hash (the image is).
	ImageEnv []string
}

// Hash identifies the Spec's settings (not its target). The helper compares
// it with the one PID 1 was started with, so a call with other settings is
// told instead of silently running under the old ones.
func (s Spec) Hash() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%g\x00%d\x00%d\x00%d\x00%s\x00%s\x00%s\x00%s",
		s.Image, s.Network, s.Memory, s.CPUs, s.Pids, s.Nofile, s.TmpSize, s.IdleTTL, s.Runtime, s.HelperID, s.Version)
	if s.MaxLifetime != 0 || s.Disk != 0 {
		fmt.Fprintf(h, "\x00%s\x00%d", s.MaxLifetime, s.Disk)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Describe is a short human description of the settings, for mismatch errors.
func (s Spec) Describe() string {
	rt := s.Runtime
	if rt == "" {
		rt = "default"
	}
	disk, life := "none", "none"
	if s.Disk > 0 {
		disk = units.BytesSize(float64(s.Disk))
	}
	if s.MaxLifetime > 0 {
		life = s.MaxLifetime.String()
	}
	return fmt.Sprintf("image %s, network %s, memory %s, cpus %g, pids %d, nofile %d, tmp-size %s, runtime %s, idle-ttl %s, disk %s, max-lifetime %s",
		s.Image, s.Network, units.BytesSize(float64(s.Memory)), s.CPUs, s.Pids, s.Nofile, units.BytesSize(float64(s.TmpSize)), rt, s.IdleTTL, disk, life)
}

// ownLabelKeys are every sandbox label the plugin reads: each is set on
// every sandbox container (empty when it has no value), so that a label of
// the same key in the image (containers inherit the image's labels) never
// shows through.
var ownLabelKeys = []string{core.LabelManaged, core.LabelKind, core.LabelScope, core.LabelSession, core.LabelVersion, core.LabelSpec, core.LabelIdleTTL,
	core.LabelNetwork, core.LabelImage, core.LabelRuntime, core.LabelTestRun}

func (s Spec) labels() map[string]string {
	l := map[string]string{}
	for _, k := range ownLabelKeys {
		l[k] = ""
	}
	for k, v := range core.BaseLabels(core.KindSandbox) {
		l[k] = v
	}
	l[core.LabelScope] = s.Scope
	l[core.LabelSession] = s.Session
	l[core.LabelVersion] = s.Version
	l[core.LabelSpec] = s.Hash()
	l[core.LabelIdleTTL] = s.IdleTTL.String()
	l[core.LabelNetwork] = s.Network
	l[core.LabelImage] = s.Image
	l[core.LabelRuntime] = s.Runtime
	return l
}

// ContainerConfig returns the hardened create request for the sandbox.
func (s Spec) ContainerConfig() (*container.Config, *container.HostConfig) {
	cfg := &container.Config{
		Image:      s.Image,
		User:       core.SandboxUser,
		WorkingDir: core.WorkspaceDir,
		Entrypoint: s.initCommand(false),
		Cmd:        nil,
		Env:        append(append(append(s.homeEnv(), "TMPDIR=/tmp"), core.HelperEnv...), s.Env...),
		Labels:     s.labels(),
		// No stdin, no TTY: the container is only a home for execs.
		AttachStdin: false, OpenStdin: false, Tty: false,
		StopSignal: "SIGTERM",
		// The image's HEALTHCHECK would run image code outside any exec,
		// with no timeout, keeping the sandbox busy: never.
		Healthcheck: &container.HealthConfig{Test: []string{"NONE"}},
		// Nothing is exposed or published (the image's EXPOSE only
		// documents; PublishAllPorts stays off).
		ExposedPorts: nil,
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
		Tmpfs:          s.tmpfs(),
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
	if s.Podman {
		hc.Resources.Ulimits = podmanUlimits(s.Nofile)
		for _, p := range podmanReadOnlyTmpfs {
			if _, ok := hc.Tmpfs[p]; !ok {
				hc.Tmpfs[p] = podmanTmpfsRO
			}
		}
	}
	return cfg, hc
}

// initCommand is PID 1's command line: the helper's init, which the other
// helper commands read back from /proc/1/cmdline (--target, --spec).
// serveStdin: AttachedConfig's.
func (s Spec) initCommand(serveStdin bool) []string {
	a := wire.InitArgs{IdleTTL: s.IdleTTL, MaxLifetime: s.MaxLifetime, Disk: s.Disk, Target: s.Target.String(), Spec: s.Hash(), ServeStdin: serveStdin}
	return append([]string{core.HelperPath}, a.Argv()...)
}

// AttachedConfig is ContainerConfig for a container the creating call
// attaches to before it starts it (as `docker run -i` does): PID 1 serves
// that call's run on the container's stdin and stdout (init
// --serve-stdin), and the engine closes the stdin once the call detaches
// (StdinOnce). Its stdout carries the first program's output, which the
// engine must not keep: no log.
func (s Spec) AttachedConfig() (*container.Config, *container.HostConfig) {
	cfg, hc := s.ContainerConfig()
	cfg.Entrypoint = s.initCommand(true)
	cfg.AttachStdin, cfg.AttachStdout, cfg.AttachStderr = true, true, true
	cfg.OpenStdin, cfg.StdinOnce = true, true
	hc.LogConfig = container.LogConfig{Type: "none"}
	return cfg, hc
}

// tmpfs is /tmp, plus an empty read-only tmpfs over each of the image's
// VOLUME paths: an image cannot give the sandbox writable storage outside
// the workspace, /opt/user and /tmp (anonymous volumes would also escape
// the disk limit).
func (s Spec) tmpfs() map[string]string {
	t := map[string]string{"/tmp": "rw,nosuid,nodev,noexec,size=" + strconv.FormatInt(s.TmpSize, 10) + ",mode=1777"}
	for _, v := range s.ImageVolumes {
		p := path.Clean("/" + v)
		if _, ok := t[p]; ok || p == core.WorkspaceDir || p == core.UserDir || p == core.HelperDir || p == "/" {
			continue // ours already: our mount at that path takes the image's place (CheckImage refuses paths under them)
		}
		t[p] = "ro,nosuid,nodev,noexec,size=4k,mode=0755"
	}
	return t
}

// mounts are the sandbox container's volumes. NoCopy: the seeder filled
// them from the helper image (owner 65532); without it the engine copies
// the sandbox image's content at those paths into a volume it finds empty,
// and with it the owner of the image's directory (root, or the root-owned
// directory the engine makes for a path the image lacks): a scope's volume
// would then hold what an image planted, and its owner would be root
// (TestImageCannotSeedVolumes).
func (s Spec) mounts() []mount.Mount {
	noCopy := &mount.VolumeOptions{NoCopy: true}
	ws := mount.Mount{Type: mount.TypeVolume, Source: s.WorkspaceVolume(), Target: core.WorkspaceDir, VolumeOptions: noCopy}
	user := mount.Mount{Type: mount.TypeVolume, Source: s.UserVolume(), Target: core.UserDir, VolumeOptions: noCopy}
	helper := mount.Mount{Type: mount.TypeVolume, Source: s.HelperVolume, Target: core.HelperDir, ReadOnly: true, VolumeOptions: noCopy}
	return []mount.Mount{ws, user, helper}
}

// seederMounts are the mounts of the never-started container that creates
// and fills the volumes from the helper image (owners 65532, the helper).
func (s Spec) seederMounts() []mount.Mount {
	vol := func(name, target string, l map[string]string) mount.Mount {
		return mount.Mount{Type: mount.TypeVolume, Source: name, Target: target,
			VolumeOptions: &mount.VolumeOptions{Labels: l}}
	}
	userL := core.BaseLabels(core.KindUser)
	userL[core.LabelScope] = s.Scope
	ms := []mount.Mount{vol(s.UserVolume(), core.UserDir, userL)}
	if s.Session != "" {
		wsL := core.BaseLabels(core.KindWorkspace)
		wsL[core.LabelScope] = s.Scope
		wsL[core.LabelSession] = s.Session
		ms = append(ms, vol(s.WorkspaceVolume(), core.WorkspaceDir, wsL))
	}
	hl := core.BaseLabels(core.KindHelper)
	ms = append(ms, vol(s.HelperVolume, core.HelperDir, hl))
	return ms
}

// ResolveWorkdir maps --workdir to an absolute path inside the workspace.
func ResolveWorkdir(w string) (string, error) {
	if w == "" {
		return core.WorkspaceDir, nil
	}
	p := w
	if !path.IsAbs(p) {
		p = path.Join(core.WorkspaceDir, p)
	}
	p = path.Clean(p)
	for _, root := range []string{core.WorkspaceDir, core.UserDir} {
		if p == root || strings.HasPrefix(p, root+"/") {
			return p, nil
		}
	}
	return "", core.Errorf(core.CodeBadFlag, "invalid --workdir %q: it must lie inside %s (relative paths are taken from there) or %s", w, core.WorkspaceDir, core.UserDir)
}

// homeEnv is where the sandbox's programs find their home and commands.
// Without a session that is the scope's long-term volume (HOME=/opt/user:
// `pip install --user` and the image's PATH entry /opt/user/.local/bin keep
// what the scope installs). A session's sandbox shares /opt/user with every
// other sandbox of its scope, so nothing there may be found on its own:
// its HOME is its private workspace (python's user site, usercustomize and
// .pth files, node's ~/.node_modules, shell rc files, ~/.config all live
// there), every PATH entry of the image under /opt/user moves to the same
// place under the workspace (SessionPath), and so does every absolute path
// under /opt/user that any other variable of the image names
// (SessionValue: PYTHONUSERBASE, BASH_ENV, ENV, NODE_OPTIONS's --require,
// PYTHONSTARTUP, LD_PRELOAD, ...). Code of one session cannot then plant a
// program or a start-up file that another session runs.
func (s Spec) homeEnv() []string {
	if s.Session == "" {
		return []string{"HOME=" + core.UserDir}
	}
	env := []string{"HOME=" + core.WorkspaceDir}
	for _, kv := range s.ImageEnv {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "HOME" {
			continue
		}
		moved := SessionValue(v)
		if k == "PATH" {
			moved = SessionPath(v)
		}
		if moved != v {
			env = append(env, k+"="+moved)
		}
	}
	return env
}

// pathToken is a run of characters that can be part of a path in an
// environment variable's value: it ends at a list separator (: ; ,),
// white space, quotes and '=' (--require=/opt/user/x).
var pathToken = regexp.MustCompile(`[^:;,\s"'=]+`)

// SessionValue is an environment variable's value with every absolute
// path in it that lies under /opt/user (after lexical cleaning: //opt/user,
// /opt/./user, /opt/x/../user) moved to the same place under
// /opt/workspace. Relative paths, links and what the image's programs
// expand or decode (${X}, %75) are not followed: an image that reaches
// /opt/user through them does so on purpose, and an image runs code of its
// choosing in every session anyway (README, Model).
func SessionValue(v string) string {
	return pathToken.ReplaceAllStringFunc(v, func(tok string) string {
		if tok[0] != '/' {
			return tok
		}
		if rest, ok := strings.CutPrefix(path.Clean(tok), core.UserDir); ok && (rest == "" || rest[0] == '/') {
			return core.WorkspaceDir + rest
		}
		return tok
	})
}

// SessionPath is PATH with every entry under /opt/user (after lexical
// cleaning) moved to the same place under /opt/workspace, and relative or
// empty entries (the current folder, which may be /opt/user) dropped.
func SessionPath(list string) string {
	var out []string
	for _, e := range strings.Split(list, ":") {
		if e == "" || !path.IsAbs(e) {
			continue
		}
		e = path.Clean(e)
		if rest, ok := strings.CutPrefix(e, core.UserDir); ok && (rest == "" || rest[0] == '/') {
			e = core.WorkspaceDir + rest
		}
		out = append(out, e)
	}
	return strings.Join(out, ":")
}
