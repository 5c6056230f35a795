package exec

import (
	"regexp"
	"strings"
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// NameRule is the rule every scope and session name follows.
const NameRule = "1 to 64 characters from A-Z, a-z, 0-9, '_' and '-'"

// ValidateName checks a scope or session name; what names the flag or field.
func ValidateName(what, name string) error {
	if !nameRE.MatchString(name) {
		return Errorf(CodeBadName, "invalid %s name %q: a %s name is %s", what, name, what, NameRule)
	}
	return nil
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

// Object names. Scope and session names cannot contain '.', so the dot
// keeps every name unambiguous.
const namePrefix = "docker-sandbox-"

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
