package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/docker-sandbox/docker-sandbox/internal/testenv"
)

// TestFSUsage: a bad fs invocation is a usage error (exit 2), not a crash.
func TestFSUsage(t *testing.T) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	saved := os.Stderr
	os.Stderr = devnull // the JSON errors
	defer func() { os.Stderr = saved }()
	for _, args := range [][]string{{}, {"bogus"}, {"ls"}} {
		if code := runFS(args); code != 2 {
			t.Errorf("fs %v: exit %d, want 2", args, code)
		}
	}
	// Paths outside the sandbox's spaces are refused before anything is
	// opened (the real /opt/workspace need not exist for this).
	for _, p := range []string{"/etc/passwd", "../../etc/passwd", "/proc/self/environ", "a\x00b"} {
		if code := runFS([]string{"cat", p}); code != 1 {
			t.Errorf("fs cat %q: exit %d, want 1", p, code)
		}
	}
}

// TestHelperStdlibOnly: the helper links only the standard library and the
// project's own packages (no module: they are standard-library only), so that it stays a small
// static binary that runs in any image.
func TestHelperStdlibOnly(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if runtime.GOROOT() == "" { // built with -trimpath (the arm64 phase of scripts/test.sh)
		if p, err := exec.LookPath("go"); err == nil {
			goBin = p
		}
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		testenv.Skip(t, "go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasPrefix(p, "github.com/docker-sandbox/docker-sandbox/") {
			t.Errorf("the helper depends on %s, outside the standard library and the project", p)
		}
	}
}
