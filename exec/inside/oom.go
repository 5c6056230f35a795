package inside

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// Where the memory cgroup's oom_kill counter is read (v2 first, then v1).
// Tests point these elsewhere.
var (
	cgroupV2MemoryEvents = "/sys/fs/cgroup/memory.events"
	cgroupV1OOMControl   = "/sys/fs/cgroup/memory/memory.oom_control"
)

// readOOMKills returns the memory cgroup's oom_kill counter, and false if no
// counter could be read.
func readOOMKills() (uint64, bool) {
	for _, path := range []string{cgroupV2MemoryEvents, cgroupV1OOMControl} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if n, ok := parseOOMKill(b); ok {
			return n, true
		}
	}
	return 0, false
}

// parseOOMKill finds the line "oom_kill N" in a memory.events or
// memory.oom_control file.
func parseOOMKill(b []byte) (uint64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 2 && string(f[0]) == "oom_kill" {
			n, err := strconv.ParseUint(string(f[1]), 10, 64)
			if err != nil {
				return 0, false
			}
			return n, true
		}
	}
	return 0, false
}
