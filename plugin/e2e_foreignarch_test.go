package plugin_test

// End-to-end test of a linux/arm64 image (issue 12, item 3): the engine runs
// it through binfmt_misc's qemu-aarch64 (Debian's qemu-user-static, turned on
// by scripts/test.sh), and the plugin puts the embedded linux/arm64 helper
// in it. The image is scripts/busybox-image.sh --arch arm64
// (DOCKER_SANDBOX_TEST_ARM64_IMAGE).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func needArm64(t *testing.T) string {
	t.Helper()
	return needFixture(t, "arm64 test", "linux/arm64 image", "TestArm64", "DOCKER_SANDBOX_TEST_ARM64_IMAGE")[0]
}

// TestArm64Exec: in an arm64 image, the arm64 helper runs the code (uname
// says aarch64), exit codes and JSON as anywhere, a timeout is 124 and
// kills the program, what a run leaves behind is swept (only PID 1 is left
// in the container), and cp goes in and out through the arm64 file server.
func TestArm64Exec(t *testing.T) {
	img := needArm64(t)
	s := newScope(t)
	args := func(a ...string) []string { return append([]string{"exec", "-s", s, "--image", img}, a...) }

	r := sb(t, args("--format", "json", "-c", "uname -m; echo $((6*7)); exit 3")...)
	wantCode(t, r, 3)
	if j := decodeExec(t, r); j.Stdout != "aarch64\n42\n" || j.ExitCode != 3 || j.Image != img {
		t.Fatalf("arm64 exec: %+v", j)
	}
	r = sb(t, args("--timeout", "2s", "-c", "sleep 60")...)
	wantCode(t, r, 124)

	r = sb(t, args("-c", "sleep 300 & echo left")...)
	wantStdout(t, r, "left\n")
	poll(t, 20*time.Second, func() error {
		top, err := engine(t).ContainerTop(context.Background(), "docker-sandbox-"+s, nil)
		if err != nil {
			return err
		}
		if len(top.Processes) != 1 {
			return fmt.Errorf("processes left in the arm64 sandbox: %v", top.Processes)
		}
		return nil
	})

	dir := t.TempDir()
	src := filepath.Join(dir, "in.txt")
	writeText(t, src, "from the host\n")
	wantCode(t, sb(t, "cp", src, s+":/opt/workspace/in.txt"), 0)
	r = sb(t, args("-c", "cat /opt/workspace/in.txt; echo made > /opt/workspace/out.txt")...)
	wantStdout(t, r, "from the host\n")
	wantCode(t, sb(t, "cp", s+":/opt/workspace/out.txt", filepath.Join(dir, "out.txt")), 0)
	if b, err := os.ReadFile(filepath.Join(dir, "out.txt")); err != nil || strings.TrimSpace(string(b)) != "made" {
		t.Fatalf("cp out of the arm64 sandbox: %q %v", b, err)
	}
}
