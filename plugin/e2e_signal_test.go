package plugin_test

import (
	"bufio"
	"fmt"
	"os"
	osexec "os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// leftover lists the processes in the sandbox whose command line has marker.
func leftover(t *testing.T, scope, marker string) string {
	t.Helper()
	r := sb(t, "exec", "-s", scope, "-c", `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < $f 2>/dev/null; echo; done`)
	var out []string
	for _, l := range strings.Split(r.Stdout, "\n") {
		if strings.Contains(l, marker) && !strings.Contains(l, "/proc/") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}

// startSlow starts `docker sandbox exec` of a program that prints "ready"
// then sleeps, in its own process group, and waits for "ready".
func startSlow(t *testing.T, scope, code string) *osexec.Cmd {
	t.Helper()
	cmd := osexec.Command("docker", "sandbox", "exec", "-s", scope, "--timeout", "20s", "-c", code)
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("program did not start: %q %v", line, err)
	}
	go func() { _, _ = bufio.NewReader(stdout).ReadString(0) }()
	return cmd
}

// Ctrl-C (SIGINT to the foreground process group, as a terminal sends it)
// stops the program in the sandbox, and the plugin exits 130.
func TestExecInterrupt(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	wantCode(t, sb(t, "exec", "-s", scope, "-c", "true"), 0)
	cmd := startSlow(t, scope, "echo ready; exec sleep 1717")
	start := time.Now()
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	ee, ok := err.(*osexec.ExitError)
	if !ok || ee.ExitCode() != 130 {
		t.Fatalf("after SIGINT: %v, want exit 130", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s to stop", d)
	}
	poll(t, 10*time.Second, func() error {
		if l := leftover(t, scope, "sleep 1717"); l != "" {
			return fmt.Errorf("still running in the sandbox: %s", l)
		}
		return nil
	})
}

// The plugin killed with SIGKILL mid-exec: the program still ends at its
// timeout, enforced inside the sandbox.
func TestExecPluginKilledProgramStillTimesOut(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	wantCode(t, sb(t, "exec", "-s", scope, "-c", "true"), 0)
	cmd := osexec.Command("docker", "sandbox", "exec", "-s", scope, "--timeout", "3s", "-c", "echo ready; exec sleep 1818")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if l, _ := bufio.NewReader(stdout).ReadString('\n'); l != "ready\n" {
		t.Fatalf("not started: %q", l)
	}
	started := time.Now()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
	if l := leftover(t, scope, "sleep 1818"); l == "" {
		t.Fatalf("the program died with the plugin; this test needs it to outlive the client")
	}
	poll(t, 8*time.Second, func() error {
		if l := leftover(t, scope, "sleep 1818"); l != "" {
			return fmt.Errorf("still running %s after the plugin died: %s", time.Since(started), l)
		}
		return nil
	})
	if d := time.Since(started); d > 7*time.Second {
		t.Errorf("program ended %s after the kill, want about its 3 s timeout", d)
	}
}
