package plugin_test

// Containment against what the sandbox runs and what its image says: each
// test asserts what must not happen on the engine (a process of a run still
// alive, a sandbox that outlives its TTL or lifetime, a write past the disk
// limit, an image setting that took effect), not only the messages.

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/stdcopy"
)

// topCommands lists the command lines of the processes in a container, as
// the engine sees them (docker top).
func topCommands(t *testing.T, name string) ([]string, error) {
	t.Helper()
	top, err := engine(t).ContainerTop(context.Background(), name, nil)
	if err != nil {
		return nil, err
	}
	col := -1
	for i, title := range top.Titles {
		if title == "CMD" || title == "COMMAND" {
			col = i
		}
	}
	if col < 0 {
		return nil, fmt.Errorf("docker top has no CMD column: %v", top.Titles)
	}
	var out []string
	for _, p := range top.Processes {
		out = append(out, p[col])
	}
	return out, nil
}

// sandboxProcs lists the processes in a sandbox other than its PID 1, as
// the sandbox's own /proc shows them (under gVisor, docker top shows the
// runtime's host processes instead): "PID STATE COMMAND" per process, zombies
// included. It runs one shell exec that uses builtins only (it leaves
// itself out).
func sandboxProcs(t *testing.T, name string) ([]string, error) {
	t.Helper()
	ctx := context.Background()
	// An exec channel's server (an exec root, PPID 0, which sandboxed
	// code cannot be) is the helper's, not a run's: left out.
	script := `for f in /proc/[0-9]*/stat; do read -r pid comm state ppid rest < "$f" 2>/dev/null || continue; ` +
		`if [ "$ppid" = 0 ] && [ "$(tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null)" = "/opt/sandbox/sandbox-helper channel " ]; then continue; fi; ` +
		`[ "$pid" = 1 ] || [ "$pid" = $$ ] || echo "$pid $state $comm"; done`
	resp, err := engine(t).ContainerExecCreate(ctx, name, container.ExecOptions{User: "65532:65532", AttachStdout: true, AttachStderr: true,
		Cmd: []string{"sh", "-c", script}})
	if err != nil {
		return nil, err
	}
	hj, err := engine(t).ContainerExecAttach(ctx, resp.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, err
	}
	defer hj.Close()
	var out, errb bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errb, hj.Reader); err != nil {
		return nil, err
	}
	var procs []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if l != "" {
			procs = append(procs, l)
		}
	}
	return procs, nil
}

// waitOnlyInit polls until the sandbox runs nothing but the helper's init
// (PID 1), within d: every process of the runs before is dead and reaped
// (a zombie would be listed with state Z).
func waitOnlyInit(t *testing.T, name string, d time.Duration) {
	t.Helper()
	poll(t, d, func() error {
		procs, err := sandboxProcs(t, name)
		if err != nil {
			return err
		}
		if len(procs) > 0 {
			return fmt.Errorf("processes still alive in %s: %q", name, procs)
		}
		return nil
	})
}

// TestContainmentWrapperAttacks: whatever the program does to its exec
// wrapper (it runs as the same user), the exec returns within its timeout
// plus 2 s with exit 124 or wrapper_lost, every process of the run is dead
// within 5 s after, the sandbox serves the next call, and it still expires
// at its idle TTL.
func TestContainmentWrapperAttacks(t *testing.T) {
	needE2E(t)
	const timeout = 5 * time.Second
	cases := []struct {
		name string
		code string
	}{
		{"SIGKILL, orphans left", "sleep 301 & sleep 302 & kill -KILL $PPID; sleep 303"},
		{"SIGSTOP", "sleep 311 & kill -STOP $PPID; sleep 312"},
		{"SIGKILL, setsid grandchild", "setsid sleep 321 & sleep 0.2; kill -KILL $PPID; sleep 322"},
		{"SIGKILL, double-forked daemon", "(sleep 331 &) ; kill -KILL $PPID; sleep 332"},
		{"stop/cont storm", "while :; do kill -STOP $PPID; kill -CONT $PPID; done & sleep 341"},
		{"terminating signals", "for s in TERM INT HUP QUIT USR1 USR2 ALRM PWR XCPU; do kill -$s $PPID; done; sleep 351"},
		{"SIGKILL from a detached child later", "setsid sh -c 'sleep 1; kill -KILL '$PPID'; exec sleep 361' & sleep 362"},
	}
	s := newScope(t)
	name := "docker-sandbox-" + s
	wantCode(t, sb(t, "exec", "-s", s, "--idle-ttl", "6s", "-c", "true"), 0)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := sb(t, "exec", "-s", s, "--idle-ttl", "6s", "--timeout", timeout.String(), "--format", "json", "-c", tc.code)
			// The property is the bound: timeout + 2 s, plus the plugin's own
			// start on a loaded machine.
			if r.Elapsed > timeout+2*time.Second+3*time.Second {
				t.Errorf("the exec returned after %v (timeout %v)", r.Elapsed, timeout)
			}
			switch r.Code {
			case 124:
				if j := decodeExec(t, r); !j.TimedOut {
					t.Errorf("exit 124 without timed_out:\n%s", r)
				}
			case 125:
				if j := decodeErr(t, r); j.Error.Code != "wrapper_lost" {
					t.Errorf("error %q, want wrapper_lost:\n%s", j.Error.Code, r)
				}
			default:
				t.Errorf("want exit 124 or 125 wrapper_lost, got:\n%s", r)
			}
			waitOnlyInit(t, name, 5*time.Second)
			if r := sb(t, "exec", "-s", s, "--idle-ttl", "6s", "-c", "echo next"); r.Code != 0 || r.Stdout != "next\n" {
				t.Fatalf("the next call:\n%s", r)
			}
		})
	}
	// Nothing the runs did keeps the sandbox alive past its idle TTL.
	poll(t, 6*time.Second+20*time.Second, func() error {
		if _, err := engine(t).ContainerInspect(context.Background(), name); err == nil {
			return fmt.Errorf("%s still exists", name)
		}
		return nil
	})
}

// TestContainmentControlSocket: sandboxed code cannot register a fake run
// with PID 1 (which would keep the sandbox busy and hold stop off), drain
// the sandbox, or stop another run: PID 1 serves exec roots only.
func TestContainmentControlSocket(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	code := `
import socket
for op in ["register", "drain", "status", "signal"]:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect("\0docker-sandbox-helper/init")
    c.sendall(b'{"op":"%s","token":"x"}\n' % op.encode())
    c.settimeout(5)
    try:
        print(op, repr(c.recv(200)))
    except Exception as e:
        print(op, "error", type(e).__name__)
`
	r := sb(t, "exec", "-s", s, "--lang", "python", "--idle-ttl", "4s", "-c", code)
	wantCode(t, r, 0)
	for _, op := range []string{"register", "drain", "status", "signal"} {
		if !strings.Contains(r.Stdout, op+" b''") && !strings.Contains(r.Stdout, op+" error ConnectionResetError") {
			t.Errorf("PID 1 answered sandboxed code's %q:\n%s", op, r)
		}
	}
	// Not draining: the next call runs; and stop succeeds at once.
	wantCode(t, sb(t, "exec", "-s", s, "--idle-ttl", "4s", "-c", "true"), 0)
	r = sb(t, "stop", s)
	wantCode(t, r, 0)
	if _, err := engine(t).ContainerInspect(context.Background(), "docker-sandbox-"+s); err == nil {
		t.Fatalf("stop left the container:\n%s", r)
	}
}

// TestContainmentStopWins: stop and rm end a sandbox in bounded time
// whatever its code does: after a run killed its wrapper and left
// processes, a plain stop succeeds; --force ends a running exec.
func TestContainmentStopWins(t *testing.T) {
	needE2E(t)
	t.Run("after a killed wrapper", func(t *testing.T) {
		s := newScope(t)
		r := sb(t, "exec", "-s", s, "--timeout", "30s", "-c", "sleep 401 & setsid sleep 402 & kill -KILL $PPID; sleep 403")
		wantCode(t, r, 125)
		r = sb(t, "stop", s)
		if r.Code != 0 || r.Elapsed > 20*time.Second {
			t.Fatalf("stop after the attack (%v):\n%s", r.Elapsed, r)
		}
		if _, err := engine(t).ContainerInspect(context.Background(), "docker-sandbox-"+s); err == nil {
			t.Fatal("stop left the container")
		}
	})
	for _, verb := range []string{"stop", "rm"} {
		t.Run(verb+" --force during a run", func(t *testing.T) {
			s := newScope(t)
			wantCode(t, sb(t, "exec", "-s", s, "-c", "true"), 0)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := osexec.CommandContext(ctx, pluginBin, "exec", "-s", s, "--timeout", "10m", "-c", "trap '' TERM INT HUP; echo started; exec sleep 600")
			cmd.Env = os.Environ()
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line := make([]byte, 8)
			if _, err := io.ReadFull(out, line); err != nil || string(line) != "started\n" {
				t.Fatalf("the run did not start: %q %v", line, err)
			}
			start := time.Now()
			r := sb(t, verb, "--force", s)
			if r.Code != 0 || time.Since(start) > 30*time.Second {
				t.Fatalf("%s --force took %v:\n%s", verb, time.Since(start), r)
			}
			done := make(chan error, 1)
			go func() { _, _ = io.Copy(io.Discard, out); done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the exec did not return after its sandbox was removed")
			}
			if _, err := engine(t).ContainerInspect(context.Background(), "docker-sandbox-"+s); err == nil {
				t.Fatalf("%s --force left the container", verb)
			}
		})
	}
}

// TestContainmentNoForgery: a concurrent run of the same sandbox (the same
// user) cannot ptrace the helper, read its binary or its memory, or write
// into another run's wrapper through /proc/PID/fd: the other run's status
// and output are its own. Under gVisor, which lets that code open the
// wrapper's fds (README: runc vs runsc), a victim may instead end with
// stream_tampered (its code was not the code sent, or its output stream
// carried foreign bytes), never with a status or output it did not make.
// Two attackers: one writes whole forged frames (a pipe keeps each whole,
// and the wrapper's frames are writes of at most PIPE_BUF), one writes a
// frame header that swallows what follows.
func TestContainmentNoForgery(t *testing.T) {
	needE2E(t)
	for _, mode := range []struct{ name, fake string }{
		{"whole frames", `b"\x03\x00\x00\x00" + len(b'{"exit_code":0}').to_bytes(4, "big") + b'{"exit_code":0}'`},
		{"a header that swallows frames", `b"\x01\x00\x00\x00\x00\x00\x10\x00"`},
	} {
		t.Run(mode.name, func(t *testing.T) { noForgery(t, mode.fake) })
	}
}

func noForgery(t *testing.T, fake string) {
	s := newScope(t)
	wantCode(t, sb(t, "exec", "-s", s, "-c", "true"), 0)
	attacker := `
import os, ctypes, time, json
libc = ctypes.CDLL(None, use_errno=True)
fake = FAKE
opened = ptraced = read_mem = 0
errors = set()
try:
    open("/opt/sandbox/sandbox-helper", "rb").read(4)
    print("helper binary readable")
except OSError as e:
    print("helper binary:", e.errno)
deadline = time.time() + 8
while time.time() < deadline:
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) in (1, os.getpid(), os.getppid()):  # not its own wrapper
            continue
        try:
            cmd = open("/proc/%s/cmdline" % p, "rb").read()
            ppid = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()[1]
        except OSError:
            continue
        # The helper's processes: exec roots (parent outside the container)
        # running the helper. A run's program is the same user's, and fair
        # game for a concurrent run (README); the helper is not.
        if b"sandbox-helper" not in cmd or ppid != "0":
            continue
        for fd in ("0", "1", "2"):
            try:
                with open("/proc/%s/fd/%s" % (p, fd), "wb", buffering=0) as f:
                    f.write(fake)
                    opened += 1
            except OSError as e:
                errors.add(e.errno)
        try:
            open("/proc/%s/mem" % p, "rb").read(1)
            read_mem += 1
        except OSError as e:
            errors.add(e.errno)
        if libc.ptrace(16, int(p), 0, 0) == 0:  # PTRACE_ATTACH
            ptraced += 1
            libc.ptrace(17, int(p), 0, 0)
    time.sleep(0.001)
print(json.dumps({"opened": opened, "ptraced": ptraced, "read_mem": read_mem}))
`
	attacker = strings.Replace(attacker, "FAKE", fake, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	att := osexec.CommandContext(ctx, pluginBin, "exec", "-s", s, "--lang", "python", "--timeout", "60s", "-c", attacker)
	att.Env = os.Environ()
	var attOut bytes.Buffer
	att.Stdout, att.Stderr = &attOut, &attOut
	if err := att.Start(); err != nil {
		t.Fatal(err)
	}
	// Victims run while the attacker scans: each reports its own exit code
	// and output (or, under gVisor only, stream_tampered).
	tampered := 0
	for i := 0; i < 8; i++ {
		r := sb(t, "exec", "-s", s, "--format", "json", "-c", fmt.Sprintf("echo victim-%d; exit 7", i))
		if r.Code == 125 && underRunsc() && decodeErr(t, r).Error.Code == "stream_tampered" {
			tampered++
			continue
		}
		if r.Code != 7 {
			t.Fatalf("victim %d: exit %d, want 7:\n%s", i, r.Code, r)
		}
		if j := decodeExec(t, r); j.ExitCode != 7 || j.Stdout != fmt.Sprintf("victim-%d\n", i) {
			t.Fatalf("victim %d: %+v", i, j)
		}
	}
	if err := att.Wait(); err != nil {
		t.Fatalf("attacker: %v\n%s", err, attOut.String())
	}
	out := attOut.String()
	// Under gVisor the helper binary is readable (runsc cannot start a
	// binary its user may not read) and the wrapper's /proc/PID/fd can be
	// opened (gVisor does not enforce non-dumpability there): the victims
	// above still got their own status or stream_tampered, as the plugin
	// checks each status against the engine's exit code of the wrapper and
	// the helper checks the code's SHA-256 (README: runc vs runsc). ptrace
	// and the wrapper's memory stay closed under both.
	if strings.Contains(out, "helper binary readable") && !underRunsc() {
		t.Errorf("sandboxed code read the helper binary:\n%s", out)
	}
	var got struct{ Opened, Ptraced, ReadMem int }
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("attacker output: %v\n%s", err, out)
	}
	if (got.Opened != 0 && !underRunsc()) || got.Ptraced != 0 || got.ReadMem != 0 {
		t.Errorf("sandboxed code reached a helper process: %+v\n%s", got, out)
	}
	if underRunsc() {
		t.Logf("under gVisor: %+v; %d of 8 victims ended with stream_tampered, the others kept their own status and output", got, tampered)
	}
}

// TestContainmentIdentity: a container that merely carries a sandbox's name
// is never run in, nor are files served from it: a user's container named
// like one, and another sandbox renamed to this one's name. Nothing runs in
// either, and both are left as they were.
func TestContainmentIdentity(t *testing.T) {
	needE2E(t)
	ctx := context.Background()
	t.Run("a user's container with the name and labels", func(t *testing.T) {
		s := newScope(t)
		name := "docker-sandbox-" + s
		resp, err := engine(t).ContainerCreate(ctx, &container.Config{Image: busybox, Cmd: []string{"sleep", "300"},
			Labels: map[string]string{"com.docker.sandbox.managed": "true", "com.docker.sandbox.kind": "sandbox",
				"com.docker.sandbox.scope": s, "com.docker.sandbox.session": "", "com.docker.sandbox.test-run": lookupEnv("DOCKER_SANDBOX_TEST_RUN")}},
			&container.HostConfig{NetworkMode: "none"}, nil, nil, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = engine(t).ContainerRemove(ctx, resp.ID, container.RemoveOptions{Force: true}) })
		if err := engine(t).ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"exec", "-s", s, "--format", "json", "-c", "touch /tmp/ran"},
			{"files", "ls", "--format", "json", s + ":/opt/user"},
			{"files", "cat", "--format", "json", s + ":/opt/user/x"},
		} {
			r := sb(t, args...)
			if r.Code != 125 {
				t.Errorf("%v on a look-alike: want exit 125:\n%s", args, r)
				continue
			}
			if j := decodeErr(t, r); j.Error.Code != "not_a_sandbox" && j.Error.Code != "sandbox_mismatch" && j.Error.Code != "engine_error" {
				t.Errorf("%v: error %q:\n%s", args, j.Error.Code, r)
			}
		}
		c, err := engine(t).ContainerInspect(ctx, resp.ID)
		if err != nil || !c.State.Running || len(c.ExecIDs) > 0 {
			t.Fatalf("the look-alike was changed: %v %+v", err, c.State)
		}
		cmds, _ := topCommands(t, resp.ID)
		if len(cmds) != 1 {
			t.Errorf("processes in the look-alike: %q", cmds)
		}
	})
	t.Run("another sandbox renamed to this one's name", func(t *testing.T) {
		a, b := newScope(t), newScope(t)
		wantCode(t, sb(t, "exec", "-s", a, "--idle-ttl", "5m", "-c", "echo secret-of-a > /opt/user/secret"), 0)
		if err := engine(t).ContainerRename(ctx, "docker-sandbox-"+a, "docker-sandbox-"+b); err != nil {
			t.Fatal(err)
		}
		r := sb(t, "exec", "-s", b, "--idle-ttl", "5m", "--format", "json", "-c", "cat /opt/user/secret")
		if r.Code != 125 || strings.Contains(r.Stdout, "secret-of-a") {
			t.Fatalf("scope %s ran in scope %s's container:\n%s", b, a, r)
		}
		if j := decodeErr(t, r); j.Error.Code != "not_a_sandbox" {
			t.Errorf("error %q, want not_a_sandbox", j.Error.Code)
		}
		r = sb(t, "files", "cat", b+":/opt/user/secret")
		if r.Code != 125 || strings.Contains(r.Stdout, "secret-of-a") {
			t.Fatalf("files served scope %s's data as scope %s's:\n%s", a, b, r)
		}
	})
	t.Run("scopes named like the plugin's objects", func(t *testing.T) {
		for _, s := range []string{"egress", "net", "helper", "egress-data"} {
			t.Cleanup(func() { removeScope(t, s) })
			removeScope(t, s)
			r := sb(t, "exec", "-s", s, "--rm", "-c", "echo ok; "+shLsA+" /opt/user")
			if r.Code != 0 || !strings.HasPrefix(r.Stdout, "ok\n") {
				t.Fatalf("scope %s:\n%s", s, r)
			}
			if strings.Contains(r.Stdout, "policy.json") {
				t.Fatalf("scope %s saw the egress sidecar's data:\n%s", s, r)
			}
		}
	})
}

// buildTestImage builds an image from a Dockerfile on the engine (FROM a
// local image: no registry).
func buildTestImage(t *testing.T, ref, dockerfile string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)), ModTime: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write([]byte(dockerfile))
	_ = tw.Close()
	ctx := context.Background()
	resp, err := engine(t).ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{ref}, Remove: true, ForceRemove: true,
		Labels: map[string]string{"com.docker.sandbox.test-run": lookupEnv("DOCKER_SANDBOX_TEST_RUN")}})
	if err != nil {
		t.Fatalf("build %s: %v", ref, err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Cleanup(func() {
		_, _ = engine(t).ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	if _, err := engine(t).ImageInspect(ctx, ref); err != nil {
		t.Fatalf("build %s: %v\n%s", ref, err, msg)
	}
}

// TestContainmentImageSettings: the image decides nothing about how the
// sandbox runs: no HEALTHCHECK runs (nothing keeps the sandbox past its
// idle TTL), its ENTRYPOINT/CMD/USER/WORKDIR/STOPSIGNAL are not used, its
// VOLUMEs give no writable storage, its labels do not override the
// plugin's, its Go runtime variables do not reach the helper, and nothing
// is published.
func TestContainmentImageSettings(t *testing.T) {
	needE2E(t)
	ref := "docker-sandbox-test-hostile:" + randID(4)
	buildTestImage(t, ref, "FROM "+busybox+`
HEALTHCHECK --interval=1s --timeout=1s CMD touch /opt/user/healthcheck-ran || touch /tmp/healthcheck-ran
VOLUME ["/data", "/tmp/vol"]
EXPOSE 80/tcp
USER root
WORKDIR /etc
STOPSIGNAL SIGKILL
ENV GODEBUG=madvdontneed=0,gctrace=1 GOGC=1 GOMAXPROCS=64 GOTRACEBACK=crash
LABEL com.docker.sandbox.test-run=someone-else com.docker.sandbox.scope=evil com.docker.sandbox.idle-ttl=0s com.docker.sandbox.egress.subnet=10.0.0.0/8 com.example.extra=1
ONBUILD RUN touch /onbuild-ran
ENTRYPOINT ["sh", "-c", "touch /opt/user/entrypoint-ran; exec sleep 1000"]
CMD ["touch /opt/user/cmd-ran"]
`)
	s := newScope(t)
	name := "docker-sandbox-" + s
	r := sb(t, "exec", "-s", s, "--image", ref, "--idle-ttl", "4s", "-c",
		"id -u; pwd; echo GODEBUG=$GODEBUG; touch /data/x 2>/dev/null && echo data-writable; touch /tmp/vol/x 2>/dev/null && echo tmpvol-writable; ls -A /data")
	wantCode(t, r, 0)
	if r.Stdout != "65532\n/opt/workspace\nGODEBUG=\n" {
		t.Errorf("the image's settings reached the program:\n%s", r)
	}
	ctx := context.Background()
	c, err := engine(t).ContainerInspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if c.Config.Healthcheck == nil || len(c.Config.Healthcheck.Test) != 1 || c.Config.Healthcheck.Test[0] != "NONE" || c.State.Health != nil {
		t.Errorf("healthcheck %+v, health %+v: want disabled", c.Config.Healthcheck, c.State.Health)
	}
	if c.Config.User != "65532:65532" || c.Config.WorkingDir != "/opt/workspace" || c.Config.StopSignal != "SIGTERM" ||
		!strings.HasSuffix(c.Config.Entrypoint[0], "/sandbox-helper") || len(c.Config.Cmd) != 0 {
		t.Errorf("the image's user/workdir/stopsignal/entrypoint/cmd took effect: user %q wd %q stop %q ep %q cmd %q",
			c.Config.User, c.Config.WorkingDir, c.Config.StopSignal, c.Config.Entrypoint, c.Config.Cmd)
	}
	if c.Config.Labels["com.docker.sandbox.test-run"] != lookupEnv("DOCKER_SANDBOX_TEST_RUN") || c.Config.Labels["com.docker.sandbox.scope"] != s ||
		c.Config.Labels["com.docker.sandbox.idle-ttl"] != "4s" {
		t.Errorf("the image's labels override the plugin's: %v", c.Config.Labels)
	}
	if c.HostConfig.PublishAllPorts || len(c.HostConfig.PortBindings) > 0 || len(c.NetworkSettings.Ports) > 0 {
		t.Errorf("ports published: %+v %+v", c.HostConfig.PortBindings, c.NetworkSettings.Ports)
	}
	for _, m := range c.Mounts {
		if m.Destination == "/data" || m.Destination == "/tmp/vol" {
			t.Errorf("the image's VOLUME %s became a volume: %+v", m.Destination, m)
		}
	}
	// Nothing runs besides init (an entrypoint or a healthcheck would).
	if procs, err := sandboxProcs(t, name); err != nil || len(procs) > 0 {
		t.Errorf("processes besides init (an entrypoint or healthcheck?): %q %v", procs, err)
	}
	// The sandbox expires at its idle TTL: no healthcheck keeps it busy.
	poll(t, 4*time.Second+20*time.Second, func() error {
		if _, err := engine(t).ContainerInspect(ctx, name); err == nil {
			return fmt.Errorf("%s still exists", name)
		}
		return nil
	})
	r = sb(t, "exec", "-s", s, "--image", ref, "--rm", "-c", "ls -A /opt/user /tmp")
	wantCode(t, r, 0)
	for _, f := range []string{"healthcheck-ran", "entrypoint-ran", "cmd-ran"} {
		if strings.Contains(r.Stdout, f) {
			t.Errorf("image code ran (%s):\n%s", f, r)
		}
	}

	t.Run("a VOLUME inside the sandbox's mounts is refused", func(t *testing.T) {
		for _, v := range []string{"/opt/workspace/cache", "/opt/user/.cache", "/opt/sandbox/x"} {
			ref2 := "docker-sandbox-test-volimg:" + randID(4)
			buildTestImage(t, ref2, "FROM "+busybox+"\nVOLUME "+v+"\n")
			s2 := newScope(t)
			r := sb(t, "exec", "-s", s2, "--image", ref2, "--format", "json", "-c", "true")
			wantCode(t, r, 125)
			if j := decodeErr(t, r); j.Error.Code != "bad_image" || !strings.Contains(j.Error.Message, v) {
				t.Errorf("VOLUME %s: %+v", v, j)
			}
			if c, vols := objects(t, s2); c != 0 || vols != 0 {
				t.Errorf("a refused image left %d containers and %d volumes", c, vols)
			}
		}
	})
	t.Run("a VOLUME at one of the sandbox's mounts gives way to it", func(t *testing.T) {
		for _, v := range []string{"/opt/sandbox", "/opt/user/", "/opt/workspace"} {
			ref2 := "docker-sandbox-test-volimg:" + randID(4)
			buildTestImage(t, ref2, "FROM "+busybox+"\nVOLUME "+v+"\n")
			s2 := newScope(t)
			r := sb(t, "exec", "-s", s2, "--image", ref2, "-c", "touch /opt/user/u /opt/workspace/w && echo ok")
			if r.Code != 0 || r.Stdout != "ok\n" {
				t.Errorf("VOLUME %s:\n%s", v, r)
			}
		}
	})
}

// volumeUsage is the disk usage of a volume on the engine's host (the tests
// run on it), in bytes.
func volumeUsage(t *testing.T, name string) int64 {
	t.Helper()
	v, err := engine(t).VolumeInspect(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	_ = filepath.Walk(v.Mountpoint, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			}
		}
		return nil
	})
	return total
}

// TestContainmentDiskLimit: a program writing past --disk is stopped with
// disk_limit, and the volume on the host grew by no more than the limit plus
// the stated slack; later runs are refused (nothing runs) until data is
// removed; one file can never be larger than the limit.
func TestContainmentDiskLimit(t *testing.T) {
	needE2E(t)
	const limit = 64 << 20
	const slack = 192 << 20 // README: what the program can write in one measurement interval
	s := newScope(t)
	vol := "docker-sandbox-" + s + ".user"
	args := func(extra ...string) []string {
		return append([]string{"exec", "-s", s, "--disk", "64m", "--timeout", "120s"}, extra...)
	}
	r := sb(t, append(args("--format", "json"), "-c",
		"mkdir -p d; i=0; while [ $i -lt 2048 ]; do head -c 1048576 /dev/zero > d/f$i || exit 9; i=$((i+1)); done; echo finished")...)
	wantCode(t, r, 125)
	j := decodeExec(t, r)
	if j.Error == nil || j.Error.Code != "disk_limit" || strings.Contains(j.Stdout, "finished") {
		t.Fatalf("writing 2 GiB under a 64 MiB limit:\n%s", r)
	}
	used := volumeUsage(t, vol)
	t.Logf("volume usage when stopped: %d MiB (limit 64 MiB)", used>>20)
	if used > limit+slack {
		t.Errorf("the volume grew to %d MiB under a 64 MiB limit (slack %d MiB)", used>>20, slack>>20)
	}
	// Over the limit, a run is refused before it starts.
	r = sb(t, append(args("--format", "json"), "-c", "touch /opt/user/ran-over-limit")...)
	wantCode(t, r, 125)
	if j := decodeExec(t, r); j.Error == nil || j.Error.Code != "disk_limit" {
		t.Fatalf("a run over the limit:\n%s", r)
	}
	// Removing data (through the file server, which stays usable) lets runs
	// start again.
	wantCode(t, sb(t, "files", "rm", "-r", s+":d"), 0)
	r = sb(t, args("-c", "cat /opt/user/ran-over-limit 2>&1; head -c 1000 /dev/zero > small && echo ok")...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "No such file") || !strings.HasSuffix(r.Stdout, "ok\n") {
		t.Fatalf("after removing the data:\n%s", r)
	}
	// One file larger than the limit: stopped at the limit.
	r = sb(t, args("-c", "head -c 268435456 /dev/zero > big; echo rc=$?; wc -c < big")...)
	if fi := volumeUsage(t, vol); fi > limit+slack {
		t.Errorf("one file took the volume to %d MiB:\n%s", fi>>20, r)
	}
	// The default limit is on every sandbox.
	s2 := newScope(t)
	wantCode(t, sb(t, "exec", "-s", s2, "-c", "true"), 0)
	c, err := engine(t).ContainerInspect(context.Background(), "docker-sandbox-"+s2)
	if err != nil || !strings.Contains(strings.Join(c.Config.Entrypoint, " "), "--disk 10737418240") {
		t.Errorf("the default disk limit is not on the sandbox: %v %q", err, c.Config.Entrypoint)
	}
}

// TestContainmentMaxLifetime: at --max-lifetime the sandbox is removed even
// while busy; the running exec ends with lifetime_reached; the data stays.
func TestContainmentMaxLifetime(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	wantCode(t, sb(t, "exec", "-s", s, "--max-lifetime", "8s", "-c", "echo kept > /opt/user/kept"), 0)
	r := sb(t, "exec", "-s", s, "--max-lifetime", "8s", "--timeout", "5m", "--format", "json", "-c", "echo before; sleep 300")
	wantCode(t, r, 125)
	j := decodeExec(t, r)
	if j.Error == nil || j.Error.Code != "lifetime_reached" || j.Stdout != "before\n" {
		t.Fatalf("a run at the max lifetime:\n%s", r)
	}
	if r.Elapsed > 8*time.Second+15*time.Second {
		t.Errorf("the run ended %v after it started (max lifetime 8 s)", r.Elapsed)
	}
	poll(t, 20*time.Second, func() error {
		if _, err := engine(t).ContainerInspect(context.Background(), "docker-sandbox-"+s); err == nil {
			return fmt.Errorf("the container outlived its max lifetime")
		}
		return nil
	})
	r = sb(t, "exec", "-s", s, "--max-lifetime", "8s", "--format", "json", "-c", "cat /opt/user/kept")
	wantCode(t, r, 0)
	if j := decodeExec(t, r); !j.Created || j.Stdout != "kept\n" {
		t.Fatalf("after the max lifetime, the data and a new container:\n%s", r)
	}
}

// TestImageCannotSeedVolumes: an image cannot put files into a scope's
// long-term volume or a session's workspace, nor make their owner root:
// the volumes are filled once from the plugin's helper image (owner
// 65532), and the sandbox container mounts them without the engine's copy
// of the image's content. The image here plants a file, a startup script
// and a root-owned 0700 folder at /opt/user and /opt/workspace; the
// default busybox image (which has no /opt at all, so the engine would make
// root-owned mount points) must give writable volumes too.
func TestImageCannotSeedVolumes(t *testing.T) {
	needE2E(t)
	needBusybox(t)
	ref := "docker-sandbox-test-planted:" + randID(4)
	buildTestImage(t, ref, "FROM "+busybox+"\n"+
		"RUN mkdir -p /opt/user/.config /opt/workspace && echo planted > /opt/user/planted && echo 'echo pwned' > /opt/user/.profile && "+
		"echo planted > /opt/workspace/planted && chmod 0700 /opt/user /opt/workspace && chown 0:0 /opt/user /opt/workspace\n")
	for _, c := range []struct{ image, session string }{{ref, ""}, {ref, "w"}, {busybox, ""}, {busybox, "w"}} {
		s := newScope(t)
		args := []string{"exec", "-s", s, "--image", c.image}
		if c.session != "" {
			args = append(args, "--session", c.session)
		}
		r := sb(t, append(args, "-c", "ls -A /opt/user /opt/workspace; stat -c '%u %a' /opt/user /opt/workspace; touch /opt/user/mine /opt/workspace/mine && echo writable")...)
		wantCode(t, r, 0)
		if strings.Contains(r.Stdout, "planted") || strings.Contains(r.Stdout, ".profile") {
			t.Errorf("image %s session %q: the image's files are in the sandbox's volumes:\n%s", c.image, c.session, r)
		}
		if !strings.Contains(r.Stdout, "65532 755\n65532 755\n") || !strings.HasSuffix(r.Stdout, "writable\n") {
			t.Errorf("image %s session %q: volumes not the sandbox user's:\n%s", c.image, c.session, r)
		}
	}
}

// TestContainmentSessionsPlantNothing: one session's code cannot make
// another session of its scope run anything. The scope's volume /opt/user
// is shared by every sandbox of the scope, so a session's sandbox finds
// nothing there on its own: its HOME is its private workspace and the
// image's PATH entry /opt/user/.local/bin is /opt/workspace/.local/bin.
// Session evil plants, in /opt/user, every start-up hook we know of: an
// interpreter and a common command first on the image's PATH, python user
// site hooks (usercustomize.py, a .pth line) for every python version, a
// node module in ~/.node_modules, bash and sh start-up files; and the same
// in its own home. Session victim then runs python (plain and as a
// kernel), node, bash -i/-l and `ls` with a secret in its environment:
// each does what it was asked, nothing planted runs, the secret and the
// victim's code reach nothing evil can read, and the victim's workspace
// stays out of evil's reach.
func TestContainmentSessionsPlantNothing(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	plant := `set -e
hook='echo PLANTED-RAN >> /opt/user/ran; cp -r /opt/workspace /opt/user/stolen-ws 2>/dev/null; env > /opt/user/stolen-env 2>/dev/null'
for home in /opt/user "$HOME"; do
  mkdir -p $home/.local/bin $home/.node_modules
  for cmd in python3 python node bash sh ls cat; do
    printf '#!/bin/sh\n%s\necho HIJACKED; exit 0\n' "$hook" > $home/.local/bin/$cmd
    chmod +x $home/.local/bin/$cmd
  done
  for v in 3.9 3.10 3.11 3.12 3.13; do
    d=$home/.local/lib/python$v/site-packages
    mkdir -p $d
    printf 'import os\nos.system(%s)\nprint("INJECTED", flush=True)\n' "'$hook'" > $d/usercustomize.py
    printf 'import os; os.system(%s)\n' "'$hook'" > $d/zz-evil.pth
  done
  printf 'require("child_process").execSync(%s); module.exports = "EVIL";\n' "'$hook'" > $home/.node_modules/evilmod.js
  for rc in .bashrc .bash_profile .profile .bash_login; do printf '%s\necho RC-RAN\n' "$hook" > $home/$rc; done
done
echo planted`
	// The planting session: its own home is its workspace.
	wantStdout(t, sb(t, "exec", "-s", s, "--session", "evil", "-c", plant), "planted\n")
	wantStdout(t, sb(t, "exec", "-s", s, "--session", "victim", "-c", "echo private > /opt/workspace/victim.txt; echo ok"), "ok\n")

	victim := func(args ...string) execJSON {
		t.Helper()
		r := sbRun(t, run{env: []string{"SECRET=s3cr3t-victim"}, args: append([]string{"exec", "-s", s, "--session", "victim", "--format", "json", "-e", "SECRET"}, args...)})
		return decodeExec(t, r)
	}
	for _, c := range []struct {
		name   string
		args   []string
		stdout string
		code   int
	}{
		{"python", []string{"--lang", "python", "-c", "import sys; print('victim'); sys.exit(3)"}, "victim\n", 3},
		{"python kernel", []string{"--kernel", "--lang", "python", "-c", "import sys; print('victim'); sys.exit(3)"}, "victim\n", 3},
		{"node", []string{"--lang", "node", "-c", "let m; try { m = require('evilmod') } catch (e) { m = e.code } console.log(m); process.exit(4)"}, "MODULE_NOT_FOUND\n", 4},
		{"bash -i and -l", []string{"-c", "bash -ic 'echo i' 2>/dev/null; bash -lc 'echo l'; sh -lc 'echo s'; ls -d /opt; cat /dev/null; python3 -c 'print(1)'; exit 5"}, "i\nl\ns\n/opt\n1\n", 5},
		{"home and path", []string{"-c", `echo "$HOME"; case ":$PATH:" in *:/opt/user*) echo PATH-SHARED;; esac; exit 6`}, "/opt/workspace\n", 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := victim(c.args...)
			if j.ExitCode != c.code || j.Stdout != c.stdout {
				t.Errorf("victim: exit %d stdout %q stderr %q, want exit %d stdout %q", j.ExitCode, j.Stdout, j.Stderr, c.code, c.stdout)
			}
		})
	}
	// Nothing planted ran anywhere; nothing of the victim reached /opt/user
	// (checked from a third session: evil's own runs find what it planted
	// in its own home, as they should).
	wantStdout(t, sb(t, "exec", "-s", s, "--session", "checker", "-c",
		"test ! -e /opt/user/ran && test ! -e /opt/user/stolen-ws && test ! -e /opt/user/stolen-env && ! grep -rl s3cr3t-victim /opt/user 2>/dev/null; echo clean"), "clean\n")
	// The victim's own work is where it left it.
	wantStdout(t, sb(t, "exec", "-s", s, "--session", "victim", "-c", "cat /opt/workspace/victim.txt"), "private\n")
	// What a session installs with pip --user is its own.
	wantStdout(t, sb(t, "exec", "-s", s, "--session", "victim", "--lang", "python", "-c", "import site; print(site.getusersitepackages().startswith('/opt/workspace/.local/'))"), "True\n")
}

// TestContainmentForeignVolumes: a volume that bears the name of a
// sandbox's volume but is not the plugin's (a user's own, made by hand,
// or one labelled for another scope) is never mounted: the call fails
// with not_a_sandbox (125) before anything is made, sandboxed code reads
// none of the volume's data and writes nothing into it, and the volume
// stays. The scope's volume, a session's workspace, and a volume whose
// labels name another scope are tried.
func TestContainmentForeignVolumes(t *testing.T) {
	needE2E(t)
	needBusybox(t)
	for _, c := range []struct {
		name, session, kind string
		labels              []string
	}{
		{"user volume, no plugin labels", "", "user", nil},
		{"session workspace, no plugin labels", "w", "ws", nil},
		{"user volume labelled for another scope", "", "user", []string{"com.docker.sandbox.managed=true", "com.docker.sandbox.kind=user", "com.docker.sandbox.scope=someone-else"}},
		// Labels right for the scope, but the volume binds a host folder.
		{"user volume with the scope's labels bound to a host folder", "", "user", []string{"com.docker.sandbox.managed=true", "com.docker.sandbox.kind=user", "com.docker.sandbox.scope=SCOPE"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newScope(t)
			vol := "docker-sandbox-" + s + ".user"
			if c.kind == "ws" {
				vol = "docker-sandbox-" + s + "." + c.session + ".ws"
			}
			args := []string{"volume", "create", "--label", "com.docker.sandbox.test-run=" + lookupEnv("DOCKER_SANDBOX_TEST_RUN")}
			for _, l := range c.labels {
				args = append(args, "--label", strings.ReplaceAll(l, "SCOPE", s))
			}
			if strings.Contains(c.name, "host folder") {
				args = append(args, "--opt", "type=none", "--opt", "o=bind", "--opt", "device="+t.TempDir())
			}
			if out, err := osexec.Command("docker", append(args, vol)...).CombinedOutput(); err != nil {
				t.Fatalf("docker volume create: %v\n%s", err, out)
			}
			t.Cleanup(func() {
				removeScope(t, s)
				_ = engine(t).VolumeRemove(context.Background(), vol, true)
			})
			if out, err := osexec.Command("docker", "run", "--rm", "--label", "com.docker.sandbox.test-run="+lookupEnv("DOCKER_SANDBOX_TEST_RUN"),
				"-v", vol+":/v", busybox, "sh", "-c", "echo users-private-data > /v/secret && chmod 644 /v/secret && chmod 777 /v").CombinedOutput(); err != nil {
				t.Fatalf("filling the user's volume: %v\n%s", err, out)
			}
			exec := []string{"exec", "-s", s, "--format", "json"}
			if c.session != "" {
				exec = append(exec, "--session", c.session)
			}
			r := sb(t, append(exec, "-c", "cat /opt/user/secret /opt/workspace/secret; touch /opt/user/written /opt/workspace/written")...)
			if strings.Contains(r.Stdout, "users-private-data") {
				t.Fatalf("sandboxed code read the user's volume %s:\n%s", vol, r)
			}
			wantCode(t, r, 125)
			if j := decodeExec(t, r); j.Error == nil || j.Error.Code != "not_a_sandbox" || !strings.Contains(j.Error.Message, vol) {
				t.Errorf("want error not_a_sandbox naming %s:\n%s", vol, r)
			}
			ls, err := osexec.Command("docker", "run", "--rm", "-v", vol+":/v", busybox, "ls", "-A", "/v").CombinedOutput()
			if err != nil || strings.TrimSpace(string(ls)) != "secret" {
				t.Errorf("the user's volume %s changed (%v): %q", vol, err, ls)
			}
			if n, _ := objects(t, s); n != 0 {
				t.Errorf("the refused call left %d containers", n)
			}
		})
	}
}

// TestContainmentSessionsImageEnv: an image whose variables name places
// under /opt/user (a python user base, a bash start-up file for
// non-interactive shells, a node module preloaded through NODE_OPTIONS in
// both its spellings, sh's ENV, a python start-up file), as a development
// image may well set: in a session's sandbox each of them names the same
// place under the session's own workspace. Session evil plants a hook at
// every such place under /opt/user (shared by the scope's sessions);
// session victim's python, bash, node and sh do what they were asked and
// nothing planted runs. The scope's own sandbox keeps the image's values.
func TestContainmentSessionsImageEnv(t *testing.T) {
	base := needFixture(t, "session image env test", "offline base image", "TestContainment", "DOCKER_SANDBOX_RUNTIME_BASE")[0]
	ref := "docker-sandbox-test-sessenv:" + randID(4)
	buildTestImage(t, ref, "FROM "+base+"\n"+
		`ENV PYTHONUSERBASE=/opt/user/.local BASH_ENV=/opt//user/.bashenv ENV=/opt/user/.shenv PYTHONSTARTUP=/opt/user/.pystartup.py `+
		`NODE_OPTIONS="--require /opt/user/.hook.js --require=/opt/./user/.hook2.js"`+"\n")
	s := newScope(t)
	in := func(session string, extra ...string) []string {
		return append([]string{"exec", "-s", s, "--session", session, "--image", ref}, extra...)
	}
	plant := `set -e
d=$(python3 -c 'import site; print(site.getusersitepackages())')
case "$d" in /opt/workspace/*) d=$(echo "$d" | sed 's#^/opt/workspace#/opt/user#');; esac
mkdir -p "$d"
printf '%s\n' 'open("/opt/user/ran", "a").write("python\n")' > "$d/usercustomize.py"
printf '%s\n' 'open("/opt/user/ran", "a").write("pystartup\n")' > /opt/user/.pystartup.py
printf '%s\n' 'echo bash >> /opt/user/ran' > /opt/user/.bashenv
printf '%s\n' 'echo sh >> /opt/user/ran' > /opt/user/.shenv
printf '%s\n' 'require("fs").appendFileSync("/opt/user/ran", "node\n")' > /opt/user/.hook.js
cp /opt/user/.hook.js /opt/user/.hook2.js
echo "$d"`
	r := sb(t, in("evil", "-c", plant)...)
	wantCode(t, r, 0)
	if !strings.HasPrefix(r.Stdout, "/opt/user/") {
		t.Fatalf("the planting session's user site: %s", r)
	}
	// The victim's own preloaded modules, where its NODE_OPTIONS now
	// points (a node without them fails: MODULE_NOT_FOUND).
	wantCode(t, sb(t, in("victim", "--lang", "sh", "-c", "touch /opt/workspace/.hook.js /opt/workspace/.hook2.js")...), 0)
	for _, c := range []struct{ lang, code, want string }{
		{"python", `print("py-ok")`, "py-ok\n"},
		{"bash", `echo bash-ok; bash -c 'echo nested-ok'`, "bash-ok\nnested-ok\n"},
		{"node", `console.log("node-ok")`, "node-ok\n"},
		{"sh", `echo sh-ok; sh -i -c 'echo i-ok' 2>/dev/null; python3 -i -c 'print("pyi-ok")' </dev/null 2>/dev/null`, "sh-ok\ni-ok\npyi-ok\n"},
	} {
		r := sb(t, in("victim", "--lang", c.lang, "-c", c.code)...)
		if r.Code != 0 || r.Stdout != c.want {
			t.Errorf("session victim, %s:\n%s", c.lang, r)
		}
	}
	r = sb(t, in("evil", "-c", "cat /opt/user/ran 2>/dev/null; true")...)
	wantCode(t, r, 0)
	if r.Stdout != "" {
		t.Errorf("session evil's hooks in /opt/user ran in session victim:\n%s", r.Stdout)
	}
	// The variables a session's sandbox sees, and the scope's own.
	r = sb(t, in("victim", "--lang", "sh", "-c", `echo "$PYTHONUSERBASE|$BASH_ENV|$ENV|$PYTHONSTARTUP|$NODE_OPTIONS"`)...)
	wantStdout(t, r, "/opt/workspace/.local|/opt/workspace/.bashenv|/opt/workspace/.shenv|/opt/workspace/.pystartup.py|--require /opt/workspace/.hook.js --require=/opt/workspace/.hook2.js\n")
	r = sb(t, "exec", "-s", s, "--image", ref, "--lang", "sh", "-c", `echo "$PYTHONUSERBASE"`)
	wantStdout(t, r, "/opt/user/.local\n")
}

// TestContainmentDiskLimitKernelChild: a kernel's own code may leave a
// process running between calls (README, Kernels): it is neither a run nor
// activity, but PID 1 watches the disk while it lives, and past the limit
// kills the kernels (the process, orphaned, dies with them). Started by one `exec --kernel` call that
// returns at once, it writes 400 MiB into /opt/user under --disk 64m: the
// volume must not grow past the limit plus the stated slack, and the next
// call must be refused with disk_limit.
func TestContainmentDiskLimitKernelChild(t *testing.T) {
	needE2E(t)
	const limit = 64 << 20
	const slack = 192 << 20 // TestContainmentDiskLimit's: one measurement interval
	s := newScope(t)
	vol := "docker-sandbox-" + s + ".user"
	args := []string{"exec", "-s", s, "--disk", "64m", "--idle-ttl", "60s"}
	code := `import subprocess
subprocess.Popen(["sh", "-c", "i=0; while [ $i -lt 400 ]; do head -c 1048576 /dev/zero > /opt/user/big$i || exit; i=$((i+1)); done; echo done > /opt/user/writer-done"], start_new_session=True)
print("started")`
	r := sb(t, append(args, "--kernel", "--lang", "python", "-c", code)...)
	wantCode(t, r, 0)
	v, err := engine(t).VolumeInspect(context.Background(), vol)
	if err != nil {
		t.Fatal(err)
	}
	done := func() bool { _, err := os.Stat(v.Mountpoint + "/writer-done"); return err == nil }
	// Until the writer finished, was stopped, or wrote past the slack.
	writing := func() bool {
		procs, err := topCommands(t, "docker-sandbox-"+s)
		if err != nil {
			return false // the sandbox is gone, and its processes with it
		}
		for _, p := range procs {
			if strings.Contains(p, "while [ $i -lt 400 ]") {
				return true
			}
		}
		return false
	}
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end) && !done() && writing(); time.Sleep(200 * time.Millisecond) {
		if used := volumeUsage(t, vol); used > limit+slack {
			break
		}
	}
	used := volumeUsage(t, vol)
	t.Logf("volume usage: %d MiB (limit 64 MiB), writer finished: %v", used>>20, done())
	if used > limit+slack {
		t.Errorf("a kernel's child wrote %d MiB into /opt/user under a 64 MiB --disk (slack %d MiB)", used>>20, slack>>20)
	}
	r = sb(t, append(args, "--format", "json", "-c", "echo ran-over-limit")...)
	if r.Code == 0 && used > limit {
		t.Errorf("a run started while /opt/user holds %d MiB over a 64 MiB --disk:\n%s", used>>20, r)
	}
}
