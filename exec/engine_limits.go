package exec

import (
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/system"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// CheckEngineLimits refuses an engine that says it cannot enforce a limit
// every container the plugin makes has (what names it: "sandbox"): without
// it the container would run, but without the bound the README promises
// (rootless Docker on cgroup v1, for one, reports no memory, swap, pids or
// CPU limits, and the engine would only warn and discard them). cpus: the
// container has a CPU limit.
func CheckEngineLimits(info system.Info, what string, cpus bool) error {
	var missing []string
	if !info.MemoryLimit {
		missing = append(missing, "memory (--memory)")
	}
	if !info.SwapLimit {
		missing = append(missing, "swap (the memory limit includes swap)")
	}
	if !info.PidsLimit {
		missing = append(missing, "process count (--pids)")
	}
	if cpus && !info.CPUCfsQuota {
		missing = append(missing, "CPU (--cpus)")
	}
	if len(missing) == 0 {
		return nil
	}
	return core.Errorf(core.CodeEngineUnsupported, "the engine cannot enforce the %s's %s limits (docker info: cgroup %s, driver %s%s); nothing was created: use an engine whose cgroups enforce them (a rootful engine, or rootless Docker on cgroup v2 with the memory, pids and cpu controllers delegated)",
		what, strings.Join(missing, ", "), orUnknown(info.CgroupVersion), orUnknown(info.CgroupDriver), rootlessNote(info))
}

// DiscardedSetting returns the engine's warning, when creating resp, that it
// discarded a setting it was asked for ("... Limitation discarded."), or "".
// The caller removes the container and refuses it (engine_unsupported).
func DiscardedSetting(resp container.CreateResponse) string {
	for _, w := range resp.Warnings {
		if strings.Contains(strings.ToLower(w), "discard") {
			return core.TermText(strings.TrimSpace(w))
		}
	}
	return ""
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func rootlessNote(info system.Info) string {
	for _, o := range info.SecurityOptions {
		if strings.Contains(o, "name=rootless") {
			return ", rootless"
		}
	}
	return ""
}
