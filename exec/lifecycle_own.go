package exec

import (
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// Which objects are the plugin's own.
//
// Labels alone say nothing: `docker commit` copies a container's labels into
// the image, every container run from that image inherits them, and anyone
// can pass --label. So the lifecycle commands (ls, inspect, stop, rm,
// prune, shell, the limit of live sandboxes) act only on an object whose
// name, labels and kind all name one exact target, and, for a sandbox
// container, whose mounts are the ones the plugin gives it, which neither
// `docker commit` nor `docker run` copies:
//
//   - the target's workspace volume read-write at /opt/workspace;
//   - the scope's long-term volume read-write at /opt/user;
//   - a helper volume (PluginObjectPrefix + "helper.") read-only at
//     /opt/sandbox.
//
// A container that has all of these was made to look like a sandbox by
// someone who can already do anything on the engine (docker rm included);
// no secret the plugin could keep on the same engine would be hidden from
// them, so there is none (see the README, Lifecycle).

// The names and kinds of the plugin's own objects made by other packages
// (egress, images: they import this one). TestOwnNamesMatchTheirMakers
// checks that they agree.
const (
	scopeNetPrefix    = core.PluginObjectPrefix + "net."    // egress.NetworkPrefix
	kindScopeNetwork  = "egress-network"                    // egress.KindNetwork
	helperVolumeStart = core.PluginObjectPrefix + "helper." // images.Builder.HelperVolume
	probeNameStart    = core.PluginObjectPrefix + "probe."  // probeOnce
)

// managedAs reports whether labels say "the plugin's, of this kind".
func managedAs(labels map[string]string, kind string) bool {
	return labels[core.LabelManaged] == "true" && labels[core.LabelKind] == kind
}

// primaryName is a container's own name from a list entry's Names (which
// also holds legacy link aliases, "/other/alias"), without the slash.
func primaryName(names []string) string {
	for _, n := range names {
		n = strings.TrimPrefix(n, "/")
		if n != "" && !strings.Contains(n, "/") {
			return n
		}
	}
	return ""
}

// OwnSandbox reports the target whose sandbox container this is: its name
// parses (ParseContainerName) to exactly the target its labels name, its
// kind is sandbox, and it has the plugin's three mounts for that target.
// ok is false for anything else, look-alikes with copied labels included.
func OwnSandbox(name string, labels map[string]string, mounts []container.MountPoint) (core.Target, bool) {
	t, ok := core.ParseContainerName(name)
	if !ok || !managedAs(labels, core.KindSandbox) {
		return core.Target{}, false
	}
	if labels[core.LabelScope] != t.Scope || labels[core.LabelSession] != t.Session {
		return core.Target{}, false
	}
	if !hasVolumeMount(mounts, core.WorkspaceDir, true, func(n string) bool { return n == t.WorkspaceVolume() }) ||
		!hasVolumeMount(mounts, core.UserDir, true, func(n string) bool { return n == t.UserVolume() }) ||
		!hasVolumeMount(mounts, core.HelperDir, false, isHelperVolumeName) {
		return core.Target{}, false
	}
	return t, true
}

// hasVolumeMount reports whether exactly one mount is at dest, and it is a
// named volume whose name passes ok, read-write or read-only as rw says.
func hasVolumeMount(mounts []container.MountPoint, dest string, rw bool, ok func(string) bool) bool {
	found := 0
	for _, m := range mounts {
		if m.Destination != dest {
			continue
		}
		found++
		if m.Type != mount.TypeVolume || m.RW != rw || !ok(m.Name) {
			return false
		}
	}
	return found == 1
}

func isHelperVolumeName(n string) bool {
	return strings.HasPrefix(n, helperVolumeStart) && len(n) > len(helperVolumeStart)
}

// ownSandboxSummary is OwnSandbox for an entry of a container list.
func ownSandboxSummary(c *container.Summary) (core.Target, bool) {
	if c == nil {
		return core.Target{}, false
	}
	return OwnSandbox(primaryName(c.Names), c.Labels, c.Mounts)
}

// OwnSandboxInspect is OwnSandbox for an inspected container.
func OwnSandboxInspect(c *container.InspectResponse) (core.Target, bool) {
	if c == nil || c.ContainerJSONBase == nil || c.Config == nil {
		return core.Target{}, false
	}
	return OwnSandbox(c.Name, c.Config.Labels, c.Mounts)
}

// OwnVolume reports the target and kind (KindUser or KindWorkspace) whose
// volume this is: its name parses (ParseVolumeName) to the target and kind
// its labels name, with the local driver and no driver options
// (core.PlainVolume). ok is false for anything else: a volume named like a
// scope's without the labels, with labels that name another target, or
// one bound to a host folder or served by another driver.
func OwnVolume(v *volume.Volume) (core.Target, string, bool) {
	if v == nil {
		return core.Target{}, "", false
	}
	t, kind, ok := core.ParseVolumeName(v.Name)
	if !ok || !managedAs(v.Labels, kind) || v.Labels[core.LabelScope] != t.Scope || v.Labels[core.LabelSession] != t.Session ||
		!core.PlainVolume(v.Driver, v.Options) {
		return core.Target{}, "", false
	}
	return t, kind, true
}

// OwnScopeNetwork reports the scope whose egress network this is: its name
// is PluginObjectPrefix + "net." + SCOPE and its labels say kind
// egress-network of that scope.
func OwnScopeNetwork(name string, labels map[string]string) (string, bool) {
	scope, found := strings.CutPrefix(name, scopeNetPrefix)
	if !found || core.ValidateName("scope", scope) != nil || !managedAs(labels, kindScopeNetwork) || labels[core.LabelScope] != scope {
		return "", false
	}
	return scope, true
}

// ownHelperVolume: a helper volume (kind helper, named in the plugin's
// helper namespace).
func ownHelperVolume(v *volume.Volume) bool {
	return v != nil && managedAs(v.Labels, core.KindHelper) && isHelperVolumeName(v.Name) && core.PlainVolume(v.Driver, v.Options)
}

// ownSeeder: the container that seeds a sandbox's volumes, as run.go's
// seed makes it: never started, the helper as its whole command, a helper
// volume at /opt/sandbox. A container anyone ran is not "created".
func ownSeeder(c *container.Summary) bool {
	return managedAs(c.Labels, core.KindSeeder) && c.State == "created" && strings.TrimSpace(c.Command) == core.HelperPath &&
		hasVolumeMount(c.Mounts, core.HelperDir, true, isHelperVolumeName)
}

// ownProbe: the data probe, as probeOnce makes it (its name, the helper's
// status --newest).
func ownProbe(c *container.Summary) bool {
	return managedAs(c.Labels, core.KindProbe) && strings.HasPrefix(primaryName(c.Names), probeNameStart) &&
		strings.HasPrefix(c.Command, core.HelperPath+" status --newest ")
}
