package main

import (
	"os"
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

func TestReserveThreads(t *testing.T) {
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
}
