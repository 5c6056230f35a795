package plugin_test

// The shell's walls: `docker sandbox shell` runs its program under the
// helper's shell wrapper (exec/inside/shell.go), so that what the image
// and earlier sandboxed code put in the shell's way (~/.bashrc,
// /etc/bash.bashrc) is never an exec root, and a shell whose client is
// gone does not hold the sandbox past its idle TTL. Each test asserts what
// must not happen on the engine (a sandbox alive past its idle TTL, PID 1
// serving code the sandbox planted, a later exec refused), not only
// messages.

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/docker-sandbox/docker-sandbox/internal/testenv"
)

// plantedDrainer is a program that sandboxed code plants: run as an exec root
// (PPID 0) under the helper's name (argv "/opt/sandbox/sandbox-helper
// drain"), it ignores the terminating signals, closes the terminal and asks
// PID 1 to drain the sandbox every 20 s, keeping PID 1's answers in
// /opt/user/planted-replies. Sandboxed code can never be an exec root; the
// shell's program is one.
const plantedDrainer = `import os, signal, socket, time
for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT):
    signal.signal(s, signal.SIG_IGN)
os.closerange(0, 4096)
while True:
    try:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect("\0docker-sandbox-helper/init")
        c.sendall(b'{"op":"drain","token":"planted"}\n')
        c.settimeout(5)
        r = c.recv(300)
    except Exception as e:
        r = repr(e).encode()
    with open("/opt/user/planted-replies", "ab") as f:
        f.write(b"reply " + r + b"\n")
    time.sleep(20)
`

// plantedShellTrap is the shell start-up line that runs plantedDrainer in the
// shell's own process when the shell exits.
const plantedShellTrap = `trap 'cd /opt/user && exec -a /opt/sandbox/sandbox-helper python3 drain' EXIT`

// ptyShellAbandon runs `docker-sandbox shell ARGS` on a pseudo-terminal, types
// input once the shell printed anything, and waits up to wait for the
// client to end; if it has not, it is killed (a user closing the terminal).
// It reports whether the client ended by itself.
func ptyShellAbandon(t *testing.T, env []string, args, input string, wait time.Duration) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := startPty(t, ctx, env, "stty rows 24 cols 80; exec "+pluginBin+" shell "+args)
	cmd, stdin, readDone, seen := p.cmd, p.stdin, p.readDone, p.seen
	poll(t, 60*time.Second, func() error {
		if !strings.Contains(seen(), "$ ") {
			return fmt.Errorf("no prompt from the shell yet: %q", seen())
		}
		return nil
	})
	_, _ = stdin.Write([]byte(input))
	ended := false
	select {
	case <-readDone:
		ended = true
	case <-time.After(wait):
		cancel()
		<-readDone
	}
	_ = cmd.Wait()
	return seen(), ended
}

// engineCat reads a file in a sandbox container through a plain engine
// exec (not the plugin: its calls may be refused by then).
func engineCat(t *testing.T, name, file string) string {
	t.Helper()
	ctx := context.Background()
	resp, err := engine(t).ContainerExecCreate(ctx, name, container.ExecOptions{User: "65532:65532", AttachStdout: true, AttachStderr: true,
		Cmd: []string{"cat", file}})
	if err != nil {
		return ""
	}
	hj, err := engine(t).ContainerExecAttach(ctx, resp.ID, container.ExecAttachOptions{})
	if err != nil {
		return ""
	}
	defer hj.Close()
	var o, e bytes.Buffer
	_, _ = stdcopy.StdCopy(&o, &e, hj.Reader)
	return o.String()
}

// TestContainmentShellPlants: `docker sandbox shell` starts bash, which
// reads ~/.bashrc from /opt/user (the sandbox's HOME) and the image's
// /etc/bash.bashrc: what earlier code of the sandbox planted there (or a
// hostile image put there) runs when the shell starts, and here turns the
// shell's process, on `exit`, into a program that asks PID 1 to drain the
// sandbox every 20 s under the helper's name and never ends. It is the
// shell wrapper's child, never an exec root: PID 1 answers none of its
// requests, the sandbox expires at its idle TTL once the shell's client
// is gone, and later execs run.
func TestContainmentShellPlants(t *testing.T) {
	needE2E(t)
	if underRunsc() {
		testenv.Skip(t, "the shell tests run under runc (not in the runsc pass)")
	}
	cases := []struct {
		name  string
		image string // "" = the default runtime image
		plant string // what earlier sandboxed code writes to HOME
	}{
		{"planted ~/.bashrc", "", plantedShellTrap},
	}
	if base := needFixture(t, "shell image test", "offline base image", "TestContainment", "DOCKER_SANDBOX_RUNTIME_BASE")[0]; base != "" {
		ref := "docker-sandbox-test-bashrc:" + randID(4)
		buildTestImage(t, ref, "FROM "+base+"\nUSER root\n"+
			"RUN printf '%s\\n' \""+strings.ReplaceAll(plantedShellTrap, `"`, `\"`)+"\" >> /etc/bash.bashrc\n")
		cases = append(cases, struct{ name, image, plant string }{"a hostile image's /etc/bash.bashrc", ref, ""})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newScope(t)
			name := "docker-sandbox-" + s
			base := []string{"exec", "-s", s, "--idle-ttl", "4s"}
			if c.image != "" {
				base = append(base, "--image", c.image)
			}
			plant := "cat > /opt/user/drain <<'EOF'\n" + plantedDrainer + "EOF\n"
			if c.plant != "" {
				plant += "printf '%s\\n' \"$PLANTED\" > /opt/user/.bashrc\n"
			}
			wantCode(t, sb(t, append(base, "-e", "PLANTED="+c.plant, "-c", plant)...), 0)
			// The shell joins the sandbox, or makes it with the same
			// settings (shell has no flags for them).
			env := []string{"DOCKER_SANDBOX_IDLE_TTL=4s"}
			if c.image != "" {
				env = append(env, "DOCKER_SANDBOX_IMAGE="+c.image)
			}
			out, ended := ptyShellAbandon(t, env, s, "exit\n", 5*time.Second)
			t.Logf("shell ended by itself after exit: %v\n%s", ended, out)

			// PID 1 must not have answered the planted program.
			var replies string
			poll(t, 10*time.Second, func() error {
				if _, err := engine(t).ContainerInspect(context.Background(), name); err != nil {
					return nil // gone: nothing answered after it
				}
				replies = engineCat(t, name, "/opt/user/planted-replies")
				if replies == "" {
					return fmt.Errorf("no attempt recorded yet")
				}
				return nil
			})
			if strings.Contains(replies, `"ok":true`) {
				t.Errorf("PID 1 drained the sandbox for a program planted by sandboxed code (run as the shell's exec root):\n%s", replies)
			}
			// The sandbox expires at its idle TTL: nothing of the closed
			// shell keeps it busy.
			deadline := time.Now().Add(4*time.Second + 20*time.Second)
			for {
				c, err := engine(t).ContainerInspect(context.Background(), name)
				if err != nil {
					break
				}
				if time.Now().After(deadline) {
					procs, _ := topCommands(t, name)
					t.Errorf("the sandbox outlived its 4 s idle TTL by 20 s after the shell was closed (started %s); processes: %q",
						c.State.StartedAt, procs)
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			// A later exec runs (a drain the planted program holds would
			// refuse it).
			r := sbRun(t, run{args: append(base, "--format", "json", "-c", "echo ran"), timeout: 90 * time.Second})
			if r.Code != 0 || !strings.Contains(r.Stdout, "ran") {
				t.Errorf("an exec after the shell:\n%s", r)
			}
		})
	}
}

// TestContainmentShellAbandoned: a shell whose client went away (the
// terminal closed, the ssh connection dropped: the client is killed, not
// detached) is no longer open, so it must not keep the sandbox busy for
// ever: its bash waits on a terminal nobody writes to again, and with
// nobody renewing the shell's lease the sandbox expires at its idle TTL.
func TestContainmentShellAbandoned(t *testing.T) {
	needE2E(t)
	if underRunsc() {
		testenv.Skip(t, "the shell tests run under runc (not in the runsc pass)")
	}
	s := newScope(t)
	name := "docker-sandbox-" + s
	wantCode(t, sb(t, "exec", "-s", s, "--idle-ttl", "4s", "-c", "true"), 0)
	_, ended := ptyShellAbandon(t, []string{"DOCKER_SANDBOX_IDLE_TTL=4s"}, s, "echo typed\n", 3*time.Second)
	if ended {
		t.Fatal("the shell ended by itself: this test needs it abandoned")
	}
	deadline := time.Now().Add(4*time.Second + 30*time.Second)
	for {
		if _, err := engine(t).ContainerInspect(context.Background(), name); err != nil {
			return
		}
		if time.Now().After(deadline) {
			procs, _ := topCommands(t, name)
			t.Fatalf("the sandbox outlived its 4 s idle TTL by 30 s after its shell's client was killed; processes: %q", procs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestShellLeaseFollowsSandboxTTL: a shell whose terminal is attached
// and in use keeps its sandbox (`shell --help`: "While the shell is open
// the sandbox is busy: it does not expire"), whatever the TTL of the
// shell's own configuration: the client renews the lease at a third of
// the sandbox's TTL (its container's label), here 3 s where the shell's
// configuration has 10m (a touch a minute) or none (no touch at all).
func TestShellLeaseFollowsSandboxTTL(t *testing.T) {
	needE2E(t)
	if underRunsc() {
		testenv.Skip(t, "the shell tests run under runc (not in the runsc pass)")
	}
	for _, c := range []struct{ name, configTTL string }{
		{"config 10m", ""},
		{"config never", "DOCKER_SANDBOX_IDLE_TTL=0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newScope(t)
			name := "docker-sandbox-" + s
			wantCode(t, sb(t, "exec", "-s", s, "--idle-ttl", "3s", "-c", "true"), 0)
			var env []string
			if c.configTTL != "" {
				env = append(env, c.configTTL)
			}
			// The user works in the shell for 10 s (a command that runs
			// that long), then ends it.
			out, code := ptyShell(t, env, "", 24, 80, s, [][2]string{
				{"$ ", "echo RE$((1+1))DY\n"},
				{"RE2DY", "sleep 10; echo ST$((1+1))ILL; exit 4\n"},
			})
			if code != 4 || !strings.Contains(out, "ST2ILL") {
				t.Errorf("the attached shell was ended under its user (exit %d, want 4 after ST2ILL):\n%s", code, out)
			}
			if _, err := engine(t).ContainerInspect(context.Background(), name); err != nil {
				t.Errorf("the sandbox expired while its shell was open and in use: %v", err)
			}
		})
	}
}
