package inside

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/docker-sandbox/docker-sandbox/internal/testenv"
)

func threadCount(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		testenv.Skip(t, "no /proc/self/status: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads line")
	return 0
}

// TestReserveThreads runs in a fresh process of its own (the test binary
// re-executed), where nothing else makes the runtime start threads: in the
// test process, other tests' goroutines made the counts move (it failed
// once under load).
func TestReserveThreads(t *testing.T) {
	if os.Getenv(envReserveCheck) == "1" {
		before := threadCount(t)
		reserveThreads(before + 6)
		after := threadCount(t)
		if after < before+6 {
			t.Fatalf("threads %d -> %d, want at least %d more", before, after, 6)
		}
		// They stay (idle) for the runtime to reuse.
		reserveThreads(before + 6)
		if again := threadCount(t); again > after+1 {
			t.Fatalf("a second reserve created more threads: %d -> %d", after, again)
		}
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run", "^TestReserveThreads$", "-test.count", "1")
	cmd.Env = append(os.Environ(), envReserveCheck+"=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the check in a fresh process: %v\n%s", err, out)
	}
}

const envReserveCheck = "SANDBOX_HELPER_TEST_RESERVE_CHECK"
