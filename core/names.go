package core

import (
	"strings"
)

// NameRule is the rule every scope and session name follows.
const NameRule = "1 to 64 characters from A-Z, a-z, 0-9, '_' and '-'"

// ValidateName checks a scope or session name; what names the flag or field.
func ValidateName(what, name string) error {
	if !ValidName(name) {
		return Errorf(CodeBadName, "invalid %s name %q: a %s name is %s", what, name, what, NameRule)
	}
	return nil
}

// ValidName reports whether name follows NameRule (the one rule of scope
// and session names, used by exec, the configuration and the egress policy).
// (A loop, not a regexp: a bounded regexp compiled at start costs every
// call of the plugin, the docker CLI's metadata call included.)
func ValidName(name string) bool {
	if len(name) < 1 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Target names a sandbox: a scope and an optional session.
type Target struct {
	Scope   string
	Session string
}

func (t Target) String() string {
	if t.Session == "" {
		return t.Scope
	}
	return t.Scope + "/" + t.Session
}

// ParseTarget parses SCOPE[/SESSION].
func ParseTarget(s string) (Target, error) {
	scope, session, hasSession := strings.Cut(s, "/")
	if err := ValidateName("scope", scope); err != nil {
		return Target{}, err
	}
	if hasSession {
		if err := ValidateName("session", session); err != nil {
			return Target{}, err
		}
	}
	return Target{Scope: scope, Session: session}, nil
}

// Validate checks both names.
func (t Target) Validate() error {
	if err := ValidateName("scope", t.Scope); err != nil {
		return err
	}
	if t.Session != "" {
		return ValidateName("session", t.Session)
	}
	return nil
}

// Object names come from two disjoint patterns, so that no scope or session
// name can ever address an object the plugin makes for itself:
//
//   - a sandbox's objects: "docker-sandbox-" + SCOPE [ "." SESSION ] [ ".user" | ".ws" ];
//     the character after the prefix is one of a name's ([A-Za-z0-9_-]);
//   - the plugin's own objects (the egress sidecar and its volume, scope
//     networks, helper volumes, anything added later): PluginObjectPrefix,
//     "docker-sandbox." + anything, through PluginObjectName.
//
// Names cannot contain '.', so the dot keeps sandbox names unambiguous too.
const namePrefix = "docker-sandbox-"

// PluginObjectPrefix starts the name of every object the plugin creates for
// itself (never a sandbox's): no scope or session name can produce it.
const PluginObjectPrefix = "docker-sandbox."

// PluginObjectName is the name of one of the plugin's own objects.
func PluginObjectName(what string) string { return PluginObjectPrefix + what }

// IsPluginObjectName reports whether name is in the plugin's own namespace
// (or in a namespace no sandbox uses: anything "docker-sandbox" followed by
// something other than '-').
func IsPluginObjectName(name string) bool {
	return strings.HasPrefix(name, "docker-sandbox") && !strings.HasPrefix(name, namePrefix)
}

// ParseContainerName returns the target whose container is named name; ok
// is false for any other name (the plugin's own objects included).
func ParseContainerName(name string) (t Target, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimPrefix(name, "/"), namePrefix)
	if !found {
		return Target{}, false
	}
	scope, session, _ := strings.Cut(rest, ".")
	t = Target{Scope: scope, Session: session}
	if t.Validate() != nil || t.ContainerName() != strings.TrimPrefix(name, "/") {
		return Target{}, false
	}
	return t, true
}

// ParseVolumeName returns the target whose volume is named name and which of
// its volumes it is (KindUser or KindWorkspace, a session's); ok is false for
// any other name (the plugin's own objects included).
func ParseVolumeName(name string) (t Target, kind string, ok bool) {
	rest, found := strings.CutPrefix(name, namePrefix)
	if !found {
		return Target{}, "", false
	}
	parts := strings.Split(rest, ".")
	switch {
	case len(parts) == 2 && parts[1] == "user":
		t, kind = Target{Scope: parts[0]}, KindUser
	case len(parts) == 3 && parts[2] == "ws" && parts[1] != "":
		t, kind = Target{Scope: parts[0], Session: parts[1]}, KindWorkspace
	default:
		return Target{}, "", false
	}
	if t.Validate() != nil {
		return Target{}, "", false
	}
	return t, kind, true
}

// ContainerName is the name of the target's container.
func (t Target) ContainerName() string {
	if t.Session == "" {
		return namePrefix + t.Scope
	}
	return namePrefix + t.Scope + "." + t.Session
}

// UserVolume is the scope's long-term volume (/opt/user, and /opt/workspace
// without a session).
func (t Target) UserVolume() string { return namePrefix + t.Scope + ".user" }

// WorkspaceVolume is the volume mounted at /opt/workspace.
func (t Target) WorkspaceVolume() string {
	if t.Session == "" {
		return t.UserVolume()
	}
	return namePrefix + t.Scope + "." + t.Session + ".ws"
}
