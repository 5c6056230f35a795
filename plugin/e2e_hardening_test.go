package plugin_test

// End-to-end checks of the hardening defaults (DESIGN.md, "Hardening"): the
// container configuration as the engine reports it, what code inside the
// sandbox can and cannot do, and how the sandbox survives hostile programs
// (fork bombs, memory hogs, output floods, /proc working directories).

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/internal/testenv"
)

// Paths and identities the hardening contract fixes.
const (
	hardenedUser   = "65532:65532"
	helperBinPath  = "/opt/sandbox/sandbox-helper"
	helperVolGlob  = "docker-sandbox.helper.*"
	helperVolStart = "docker-sandbox.helper."
)

// execMustPass runs `docker sandbox ARGS` and fails unless it exits 0.
func execMustPass(t *testing.T, args ...string) result {
	t.Helper()
	r := sb(t, args...)
	wantCode(t, r, 0)
	return r
}

// wantStdout fails unless r exited 0 and printed exactly want on stdout.
func wantStdout(t *testing.T, r result, want string) {
	t.Helper()
	wantCode(t, r, 0)
	if r.Stdout != want {
		t.Fatalf("stdout: want %q, got %q\n%s", want, r.Stdout, r)
	}
}

// inspectSandbox inspects the container of scope[/session].
func inspectSandbox(t *testing.T, scope, session string) container.InspectResponse {
	t.Helper()
	name := "docker-sandbox-" + scope
	if session != "" {
		name += "." + session
	}
	c, err := engine(t).ContainerInspect(context.Background(), name)
	if err != nil {
		t.Fatalf("inspect %s: %v", name, err)
	}
	if c.ContainerJSONBase == nil || c.HostConfig == nil || c.Config == nil {
		t.Fatalf("inspect %s: incomplete answer from the engine", name)
	}
	return c
}

// mountView is the part of a mount point the contract fixes.
type mountView struct {
	Type        mount.Type
	Name        string
	Destination string
	RW          bool
}

// hardeningView gathers the settings compared field by field with the
// contract; helper volume names are normalised to helperVolGlob.
type hardeningView struct {
	User            string
	WorkingDir      string
	Path            string
	InitArg         string
	Cmd             []string
	Tty, OpenStdin  bool // OpenStdin: a stdin that stays open (not StdinOnce)
	ReadonlyRootfs  bool
	Privileged      bool
	CapDrop         []string
	CapAdd          []string
	PidsLimit       int64
	Memory          int64
	MemorySwap      int64
	NanoCPUs        int64
	PortBindings    int
	ExposedPorts    int
	PublishAllPorts bool
	Devices         int
	DeviceRules     int
	DeviceRequests  int
	IpcMode         string
	PidMode         string
	UTSMode         string
	UsernsMode      string
	RestartPolicy   string
	NetworkMode     string
	Binds           []string
	VolumesFrom     []string
	Mounts          []mountView
}

func viewOf(c container.InspectResponse) hardeningView {
	hc, cfg := c.HostConfig, c.Config
	v := hardeningView{
		User: cfg.User, WorkingDir: cfg.WorkingDir, Path: c.Path, Cmd: cfg.Cmd,
		Tty: cfg.Tty, OpenStdin: cfg.OpenStdin && !cfg.StdinOnce,
		ReadonlyRootfs: hc.ReadonlyRootfs, Privileged: hc.Privileged,
		CapDrop: hc.CapDrop, CapAdd: hc.CapAdd,
		Memory: hc.Memory, MemorySwap: hc.MemorySwap, NanoCPUs: hc.NanoCPUs,
		PortBindings: len(hc.PortBindings), ExposedPorts: len(cfg.ExposedPorts), PublishAllPorts: hc.PublishAllPorts,
		Devices: len(hc.Devices), DeviceRules: len(hc.DeviceCgroupRules), DeviceRequests: len(hc.DeviceRequests),
		IpcMode: string(hc.IpcMode), PidMode: string(hc.PidMode), UTSMode: string(hc.UTSMode), UsernsMode: string(hc.UsernsMode),
		RestartPolicy: string(hc.RestartPolicy.Name), NetworkMode: string(hc.NetworkMode),
		Binds: hc.Binds, VolumesFrom: hc.VolumesFrom,
	}
	if len(c.Args) > 0 {
		v.InitArg = c.Args[0]
	}
	if hc.PidsLimit != nil {
		v.PidsLimit = *hc.PidsLimit
	}
	for _, m := range c.Mounts {
		mv := mountView{Type: m.Type, Name: m.Name, Destination: m.Destination, RW: m.RW}
		if strings.HasPrefix(mv.Name, helperVolStart) {
			mv.Name = helperVolGlob
		}
		v.Mounts = append(v.Mounts, mv)
	}
	sort.Slice(v.Mounts, func(i, j int) bool { return v.Mounts[i].Destination < v.Mounts[j].Destination })
	return v
}

// wantHardening is the contract's view for a target with the given limits.
func wantHardening(scope, session string, memory, nanoCPUs, pids int64) hardeningView {
	ws := "docker-sandbox-" + scope + ".user"
	if session != "" {
		ws = "docker-sandbox-" + scope + "." + session + ".ws"
	}
	return hardeningView{
		User: hardenedUser, WorkingDir: "/opt/workspace", Path: helperBinPath, InitArg: "init",
		ReadonlyRootfs: true, CapDrop: []string{"ALL"},
		PidsLimit: pids, Memory: memory, MemorySwap: memory, NanoCPUs: nanoCPUs,
		IpcMode: "private", RestartPolicy: "no", NetworkMode: "none",
		Mounts: []mountView{
			{Type: mount.TypeVolume, Name: helperVolGlob, Destination: "/opt/sandbox", RW: false},
			{Type: mount.TypeVolume, Name: "docker-sandbox-" + scope + ".user", Destination: "/opt/user", RW: true},
			{Type: mount.TypeVolume, Name: ws, Destination: "/opt/workspace", RW: true},
		},
	}
}

// checkHardening compares the container of scope[/session] with the
// contract, field by field.
func checkHardening(t *testing.T, scope, session string, memory, nanoCPUs, pids int64) {
	t.Helper()
	c := inspectSandbox(t, scope, session)
	hc, cfg := c.HostConfig, c.Config
	empty := cmp.Comparer(func(a, b []string) bool { // nil and [] are the same
		return (len(a) == 0 && len(b) == 0) || cmp.Equal([]string(a), []string(b))
	})
	if d := cmp.Diff(wantHardening(scope, session, memory, nanoCPUs, pids), viewOf(c), empty); d != "" {
		t.Errorf("container %s is not configured as DESIGN's hardening says (-want +got):\n%s", c.Name, d)
	}

	// no-new-privileges, and the default seccomp profile: no override at all.
	nnp := false
	for _, o := range hc.SecurityOpt {
		lo := strings.ToLower(o)
		if lo == "no-new-privileges" || lo == "no-new-privileges:true" || lo == "no-new-privileges=true" {
			nnp = true
		}
		for _, bad := range []string{"seccomp", "apparmor=unconfined", "apparmor:unconfined", "label=disable", "label:disable", "systempaths=unconfined"} {
			if strings.HasPrefix(lo, bad) {
				t.Errorf("SecurityOpt %q weakens the sandbox (all: %q)", o, hc.SecurityOpt)
			}
		}
	}
	if !nnp {
		t.Errorf("SecurityOpt %q lacks no-new-privileges", hc.SecurityOpt)
	}

	// /tmp: tmpfs of 512 MiB, nosuid, nodev, noexec (set by the plugin, not left to the engine's default).
	tmp, ok := hc.Tmpfs["/tmp"]
	if !ok {
		t.Errorf("no tmpfs on /tmp: Tmpfs = %q", hc.Tmpfs)
	}
	opts := map[string]bool{}
	for _, o := range strings.Split(tmp, ",") {
		opts[strings.TrimSpace(o)] = true
	}
	for _, o := range []string{"nosuid", "nodev", "noexec"} {
		if !opts[o] {
			t.Errorf("tmpfs /tmp options %q lack %s", tmp, o)
		}
	}
	if !opts["size=536870912"] && !opts["size=512m"] && !opts["size=512M"] {
		t.Errorf("tmpfs /tmp options %q: want size=536870912 (512 MiB)", tmp)
	}
	if opts["exec"] || opts["suid"] || opts["dev"] {
		t.Errorf("tmpfs /tmp options %q re-enable exec/suid/dev", tmp)
	}

	// nofile ulimit, set and finite.
	nofile := false
	for _, u := range hc.Ulimits {
		if u.Name == "nofile" {
			nofile = true
			if u.Soft <= 0 || u.Hard <= 0 || u.Soft > u.Hard {
				t.Errorf("nofile ulimit %+v is not a sane finite limit", *u)
			}
		}
	}
	if !nofile {
		t.Errorf("no nofile ulimit: %+v", hc.Ulimits)
	}

	// Bounded logs; none where the creating call's run went through the
	// container's own stdout (its attach: the engine keeps none of it).
	if cfg.OpenStdin {
		if hc.LogConfig.Type != "none" {
			t.Errorf("LogConfig %+v of a sandbox whose first run went through its attach: want none", hc.LogConfig)
		}
	} else if hc.LogConfig.Type != "json-file" || hc.LogConfig.Config["max-size"] == "" {
		t.Errorf("LogConfig %+v: want json-file with a max-size", hc.LogConfig)
	}

	// HOME in the long-term space, or a session's in its own workspace
	// (/opt/user is shared by the scope's sessions: nothing on a session's
	// PATH lies there); the image never decides the entrypoint.
	home := "HOME=/opt/user"
	if session != "" {
		home = "HOME=/opt/workspace"
		for _, kv := range cfg.Env {
			if p, ok := strings.CutPrefix(kv, "PATH="); ok && strings.Contains(":"+p+":", ":/opt/user") {
				t.Errorf("a session's PATH reaches into the shared /opt/user: %q", kv)
			}
		}
	}
	if !contains(cfg.Env, home) {
		t.Errorf("Env %q lacks %s", cfg.Env, home)
	}
	if len(cfg.Entrypoint) < 2 || cfg.Entrypoint[0] != helperBinPath || cfg.Entrypoint[1] != "init" {
		t.Errorf("Entrypoint %q: want the helper (%s init ...)", cfg.Entrypoint, helperBinPath)
	}
	if img, err := engine(t).ImageInspect(context.Background(), c.Image); err == nil && img.Config != nil &&
		len(img.Config.Entrypoint) > 0 && cmp.Equal([]string(img.Config.Entrypoint), []string(cfg.Entrypoint)) {
		t.Errorf("the container's entrypoint is the image's own: %q", img.Config.Entrypoint)
	}

	// No bind mounts of any kind, neither requested nor effective.
	for _, m := range hc.Mounts {
		if m.Type != mount.TypeVolume {
			t.Errorf("requested mount %+v is not a volume", m)
		}
	}
	for _, m := range c.Mounts {
		if m.Type == mount.TypeBind {
			t.Errorf("bind mount %+v", m)
		}
	}

	// Labels.
	for k, want := range map[string]string{
		"com.docker.sandbox.managed": "true",
		"com.docker.sandbox.scope":   scope,
		"com.docker.sandbox.kind":    "sandbox",
	} {
		if got, ok := cfg.Labels[k]; !ok || got != want {
			t.Errorf("label %s = %q (present %v), want %q", k, got, ok, want)
		}
	}
	if got := cfg.Labels["com.docker.sandbox.session"]; got != session {
		t.Errorf("label com.docker.sandbox.session = %q, want %q", got, session)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestHardeningContainerConfig(t *testing.T) {
	needE2E(t)
	t.Run("defaults", func(t *testing.T) {
		s := newScope(t)
		wantStdout(t, sb(t, "exec", "-s", s, "-c", "echo ok"), "ok\n")
		checkHardening(t, s, "", 1<<30, 1e9, 256)
	})
	t.Run("session", func(t *testing.T) {
		s := newScope(t)
		wantStdout(t, sb(t, "exec", "-s", s, "--session", "chatA", "-c", "echo ok"), "ok\n")
		checkHardening(t, s, "chatA", 1<<30, 1e9, 256)
	})
	t.Run("limits", func(t *testing.T) {
		s := newScope(t)
		wantStdout(t, sb(t, "exec", "-s", s, "--memory", "256m", "--cpus", "0.5", "--pids", "100", "-c", "echo ok"), "ok\n")
		checkHardening(t, s, "", 268435456, 5e8, 100)
	})
}

func TestHardeningInside(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	in := func(t *testing.T, code string) result {
		t.Helper()
		return sb(t, "exec", "-s", s, "--lang", "sh", "-c", code)
	}
	// Warm the sandbox so that the checks below time only execs.
	wantStdout(t, in(t, "echo warm"), "warm\n")

	// gVisor's /proc/self/status has no NoNewPrivs and CapAmb lines and
	// says Seccomp 0 (its kernel filters nothing: the host's seccomp
	// filters gVisor's own kernel): the runsc pass checks what it shows,
	// and TestRuntimeRunscDifferences proves no-new-privileges there by
	// the container's config and prctl.
	nnp, seccomp, capAmb := "NoNewPrivs: 1\n", "Seccomp: 2\n", "CapAmb: 0000000000000000\n"
	if underRunsc() {
		nnp, seccomp, capAmb = "", "Seccomp: 0\n", ""
	}
	for _, c := range []struct{ name, code, want string }{
		{"uid", "id -u", "65532\n"},
		{"gid", "id -g", "65532\n"},
		{"groups", "id -G", "65532\n"},
		{"pid1 not root", "grep '^Uid:' /proc/1/status | tr -s '\\t ' ' '", "Uid: 65532 65532 65532 65532\n"},
		{"no new privs", "grep '^NoNewPrivs:' /proc/self/status | tr -s '\\t ' ' '; true", nnp},
		{"seccomp filtered", "grep '^Seccomp:' /proc/self/status | tr -s '\\t ' ' '", seccomp},
		{"no capabilities", "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status | tr -s '\\t ' ' '",
			"CapInh: 0000000000000000\nCapPrm: 0000000000000000\nCapEff: 0000000000000000\nCapBnd: 0000000000000000\n" + capAmb},
		{"tmp writable", "echo t > /tmp/probe && cat /tmp/probe", "t\n"},
		{"workspace writable", "echo w > /opt/workspace/probe && cat /opt/workspace/probe", "w\n"},
		{"user writable", "echo u > /opt/user/probe2 && cat /opt/user/probe2", "u\n"},
		{"home", `echo "$HOME"`, "/opt/user\n"},
		{"cwd", "pwd", "/opt/workspace\n"},
	} {
		t.Run(c.name, func(t *testing.T) { wantStdout(t, in(t, c.code), c.want) })
	}

	t.Run("a setuid-root binary does not raise privileges", func(t *testing.T) {
		r := sb(t, "exec", "-s", s, "--lang", "python", "-c", setuidProbe)
		wantStdout(t, r, "setuid bit: yes\neuid after exec: 65532\n")
	})

	t.Run("read-only rootfs", func(t *testing.T) {
		for _, p := range []string{"/x", "/etc/x", "/usr/x", "/opt/sandbox/x"} {
			r := in(t, "echo pwned > "+p)
			if r.Code == 0 {
				t.Errorf("writing %s succeeded:\n%s", p, r)
			}
		}
		// The shared helper binary: touch only, so a failure corrupts nothing.
		if r := in(t, "touch /opt/sandbox/sandbox-helper"); r.Code == 0 {
			t.Errorf("the helper binary is writable from the sandbox:\n%s", r)
		}
		r := in(t, "touch /x")
		if r.Code == 0 {
			t.Fatalf("touch /x succeeded on a read-only root:\n%s", r)
		}
		// A second exec: nothing was written anywhere.
		wantStdout(t, in(t, "test ! -e /x && test ! -e /etc/x && test ! -e /usr/x && test ! -e /opt/sandbox/x && echo absent"), "absent\n")
	})
}

// leftoverScript prints the processes of the sandbox other than PID 1, this
// script and its ancestors (the exec wrapper), one "pid (comm) state" a line.
const leftoverScript = `
import os
procs = {}
for d in os.listdir("/proc"):
    if not d.isdigit():
        continue
    try:
        s = open("/proc/%s/stat" % d).read()
    except OSError:
        continue
    rest = s[s.rindex(")") + 2:].split()
    procs[int(d)] = (s[s.index("(") + 1:s.rindex(")")], rest[0], int(rest[1]))
mine, p = set(), os.getpid()
while p in procs and p not in mine:
    mine.add(p)
    p = procs[p][2]
for pid in sorted(procs):
    if pid != 1 and pid not in mine:
        print(pid, "(%s)" % procs[pid][0], procs[pid][1])
print("scanned", len(procs))
`

func TestHardeningForkBomb(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	wantStdout(t, sb(t, "exec", "-s", s, "-c", "echo warm"), "warm\n")
	before := inspectSandbox(t, s, "").ID

	// The bomb, then a loop that never forks, so that only --timeout ends it.
	start := time.Now()
	r := sbRun(t, run{args: []string{"exec", "-s", s, "--lang", "bash", "--timeout", "5s", "-c",
		":(){ :|:& };:; while :; do :; done"}, timeout: 90 * time.Second})
	elapsed := time.Since(start)
	t.Logf("fork bomb: exit %d after %s", r.Code, elapsed.Round(time.Millisecond))
	// Under gVisor (ptrace platform) the bomb can take the whole sandbox
	// down before the timeout (gVisor's own threads count against the
	// pids limit): then exit 137 (SIGKILL) saying so, sandbox_restarted in
	// JSON (README: runc vs runsc).
	crashed := underRunsc() && r.Code == 137 && strings.Contains(r.Stderr, "took the sandbox's container down")
	if r.Code != 124 && !crashed {
		t.Errorf("want exit 124 (killed at --timeout), got exit %d; stderr without bash's fork retries:\n%s", r.Code, trunc(withoutForkRetries(r.Stderr)))
	}
	if elapsed > 10*time.Second {
		t.Errorf("the exec took %s, want at most --timeout 5s + 5s", elapsed)
	}

	// The host and the engine are fine.
	if _, err := engine(t).Ping(context.Background()); err != nil {
		t.Fatalf("engine after the fork bomb: %v", err)
	}

	// The next exec works at once, in the same sandbox: the bomb did not
	// take PID 1 (and with it the container) down. Under gVisor (ptrace
	// platform) the sandbox's own threads count against the pids limit,
	// and killing the bomb at the timeout can take the whole sandbox down:
	// the result is the same (124), and the next call gets a new container
	// (README: runc vs runsc).
	wantStdout(t, sb(t, "exec", "-s", s, "-c", "echo alive"), "alive\n")
	if after := inspectSandbox(t, s, "").ID; after != before {
		if !underRunsc() {
			t.Errorf("the fork bomb destroyed the sandbox: container %.12s was replaced by %.12s", before, after)
		}
		t.Logf("under gVisor the fork bomb took the sandbox down: container %.12s was replaced by %.12s", before, after)
	}

	// And nothing of the bomb is left behind.
	poll(t, 10*time.Second, func() error {
		r := sb(t, "exec", "-s", s, "--lang", "python", "-c", leftoverScript)
		if r.Code != 0 {
			return fmt.Errorf("scan failed: %s", r)
		}
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], "scanned ") {
			return fmt.Errorf("scan printed no summary: %s", r)
		}
		if len(lines) > 1 {
			return fmt.Errorf("%d processes left in the sandbox:\n%s", len(lines)-1, strings.Join(lines[:len(lines)-1], "\n"))
		}
		return nil
	})
}

// withoutForkRetries drops bash's "fork: retry" complaints from a fork bomb's
// stderr, so that what the plugin said is visible.
func withoutForkRetries(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, "fork: retry") && !strings.Contains(l, "fork: Resource temporarily unavailable") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// oomProgram touches 400 MiB (b'a' * n writes every page).
const oomProgram = "x = b'a' * (400 << 20)\nprint('survived', len(x))\n"

func TestHardeningOOM(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	args := []string{"exec", "-s", s, "--memory", "128m", "--timeout", "60s", "--lang", "python"}

	t.Run("json", func(t *testing.T) {
		r := sbRun(t, run{args: append(append([]string{}, args...), "--format", "json", "-c", oomProgram), timeout: 2 * time.Minute})
		wantCode(t, r, 137)
		j := decodeExec(t, r)
		if j.ExitCode != 137 || !j.OOMKilled || j.Signal == nil || *j.Signal != "SIGKILL" || j.TimedOut {
			t.Errorf("want exit_code 137, oom_killed true, signal SIGKILL, timed_out false; got %+v (signal %v)", j, deref(j.Signal))
		}
		if strings.Contains(j.Stdout, "survived") {
			t.Errorf("the program was not stopped by the memory limit: %q", j.Stdout)
		}
	})
	t.Run("plain", func(t *testing.T) {
		r := sbRun(t, run{args: append(append([]string{}, args...), "-c", oomProgram), timeout: 2 * time.Minute})
		wantCode(t, r, 137)
		if strings.Contains(r.Stdout, "survived") {
			t.Errorf("the program was not stopped by the memory limit:\n%s", r)
		}
		if !strings.Contains(r.Stderr, "out of memory") {
			t.Errorf("stderr does not say out of memory:\n%s", r)
		}
	})
	t.Run("next exec works", func(t *testing.T) {
		r := sb(t, append(append([]string{}, args...), "-c", "print('ok')")...)
		wantStdout(t, r, "ok\n")
		// Memory that fits is no OOM.
		r = sb(t, append(append([]string{}, args...), "--format", "json", "-c", "x = b'a' * (16 << 20)\nprint(len(x))")...)
		wantCode(t, r, 0)
		if j := decodeExec(t, r); j.OOMKilled || j.Signal != nil || j.Stdout != strconv.Itoa(16<<20)+"\n" {
			t.Errorf("a 16 MiB program: %+v", j)
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

func TestHardeningOutputFlood(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	for _, c := range []struct {
		name   string
		flags  []string
		code   string
		cap    int
		stderr bool
	}{
		{"64k yes", []string{"--max-output", "64k"}, "yes", 64 << 10, false},
		{"default python", nil, "python3 -c \"while True: print('x'*100)\"", 1 << 20, false},
		{"64k stderr", []string{"--max-output", "64k"}, "yes >&2", 64 << 10, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := append([]string{"exec", "-s", s, "--timeout", "30s", "--lang", "sh"}, c.flags...)

			start := time.Now()
			r := sbRun(t, run{args: append(append([]string{}, base...), "--format", "json", "-c", c.code), timeout: 90 * time.Second})
			if el := time.Since(start); el > 20*time.Second {
				t.Errorf("json: took %s, want well before --timeout 30s", el)
			}
			j := decodeExec(t, r)
			if j.TimedOut {
				t.Errorf("json: timed out instead of stopping at the cap: %+v", j)
			}
			got, trunc, other, otherTrunc := len(j.Stdout), j.StdoutTruncated, len(j.Stderr), j.StderrTruncated
			if c.stderr {
				got, trunc, other, otherTrunc = len(j.Stderr), j.StderrTruncated, len(j.Stdout), j.StdoutTruncated
			}
			if got != c.cap || !trunc {
				t.Errorf("json: captured %d bytes (truncated %v), want exactly %d (truncated true)", got, trunc, c.cap)
			}
			if otherTrunc || (c.stderr && other != 0) {
				t.Errorf("json: the other stream has %d bytes (truncated %v)", other, otherTrunc)
			}

			start = time.Now()
			r = sbRun(t, run{args: append(append([]string{}, base...), "-c", c.code), timeout: 90 * time.Second})
			if el := time.Since(start); el > 20*time.Second {
				t.Errorf("plain: took %s, want well before --timeout 30s", el)
			}
			stream := r.Stdout
			if c.stderr {
				// The plugin's own notice follows the program's bytes.
				stream = r.Stderr
				if i := strings.Index(stream, "docker sandbox: "); i >= 0 {
					stream = stream[:i]
				}
			}
			if len(stream) != c.cap {
				t.Errorf("plain: %d bytes of output, want exactly %d", len(stream), c.cap)
			}
			if !strings.Contains(r.Stderr, "truncated") {
				t.Errorf("plain: stderr does not say the output was truncated: %q", trunc1k(r.Stderr))
			}
		})
	}
}

func trunc1k(s string) string {
	if len(s) > 1000 {
		return "..." + s[len(s)-1000:]
	}
	return s
}

// importImage imports a one-file image with the given Dockerfile changes and
// removes it when the test ends.
func importImage(t *testing.T, ref string, changes []string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := []byte("hello\n")
	if err := tw.WriteHeader(&tar.Header{Name: "hello.txt", Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rc, err := engine(t).ImageImport(ctx, image.ImportSource{Source: &buf, SourceName: "-"}, ref, image.ImportOptions{Changes: changes})
	if err != nil {
		t.Fatalf("import %s: %v", ref, err)
	}
	msg, _ := io.ReadAll(rc)
	rc.Close()
	t.Cleanup(func() {
		_, _ = engine(t).ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	if _, err := engine(t).ImageInspect(ctx, ref); err != nil {
		t.Fatalf("import %s: %v (%s)", ref, err, msg)
	}
}

func TestHardeningWorkdirProcRefused(t *testing.T) {
	needE2E(t)
	ref := "docker-sandbox-test-procwd:" + randID(4)
	importImage(t, ref, []string{"WORKDIR /proc/self/cwd", "LABEL com.docker.sandbox.test=1"})

	for _, mode := range []string{"plain", "json"} {
		t.Run(mode, func(t *testing.T) {
			s := newScope(t)
			args := []string{"exec", "-s", s, "--image", ref, "-c", "true"}
			if mode == "json" {
				args = append([]string{"exec", "--format", "json"}, args[1:]...)
			}
			r := sb(t, args...)
			wantCode(t, r, 125)
			if !strings.Contains(r.Stderr, "/proc") {
				t.Errorf("stderr does not name the /proc working directory:\n%s", r)
			}
			if mode == "json" {
				if j := decodeErr(t, r); j.Error.Code != "bad_image" {
					t.Errorf("error code %q, want bad_image", j.Error.Code)
				}
			} else if r.Stdout != "" {
				t.Errorf("plain mode printed on stdout: %q", r.Stdout)
			}
			if c, v := objects(t, s); c != 0 || v != 0 {
				t.Errorf("a refused image left %d containers and %d volumes of scope %s", c, v, s)
			}
			cs, err := engine(t).ContainerList(context.Background(), container.ListOptions{All: true,
				Filters: filters.NewArgs(filters.Arg("ancestor", ref))})
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != 0 {
				t.Errorf("%d containers of the refused image %s exist", len(cs), ref)
			}
		})
	}
}

func TestHardeningBusybox(t *testing.T) {
	needE2E(t)
	needBusybox(t)
	s := newScope(t)
	wantStdout(t, sb(t, "exec", "-s", s, "--image", busybox, "--lang", "sh", "-c", "id -u; echo hi"), "65532\nhi\n")

	r := sb(t, "exec", "-s", s, "--image", busybox, "--lang", "python", "-c", "print(1)")
	wantCode(t, r, 127)
	if !strings.Contains(r.Stderr, "python3") {
		t.Errorf("stderr does not name python3:\n%s", r)
	}
	r = sb(t, "exec", "--format", "json", "-s", s, "--image", busybox, "--lang", "python", "-c", "print(1)")
	wantCode(t, r, 127)
	if j := decodeErr(t, r); j.Error.Code != "interpreter_not_found" || !strings.Contains(j.Error.Message, "python3") {
		t.Errorf("JSON error %+v: want interpreter_not_found naming python3", j.Error)
	}
	// The sandbox is still usable after the missing interpreter.
	wantStdout(t, sb(t, "exec", "-s", s, "--image", busybox, "-c", "echo still"), "still\n")
}

// needBusybox skips (fails in CI) without the shell-only test image.
func needBusybox(t *testing.T) {
	t.Helper()
	if busybox != "" {
		return
	}
	testenv.Skip(t, "DOCKER_SANDBOX_TEST_BUSYBOX is not set (scripts/busybox-image.sh makes the image)")
}
