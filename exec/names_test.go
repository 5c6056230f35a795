package exec

import (
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	good := map[string]Target{
		"u1":                    {Scope: "u1"},
		"u1/chatA":              {Scope: "u1", Session: "chatA"},
		"A_b-9/x_-Y":            {Scope: "A_b-9", Session: "x_-Y"},
		strings.Repeat("a", 64): {Scope: strings.Repeat("a", 64)},
	}
	for in, want := range good {
		got, err := ParseTarget(in)
		if err != nil || got != want {
			t.Errorf("ParseTarget(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "../x", "a b", strings.Repeat("a", 65), "u1/", "/s", "u1/../x", "u1/a/b", "a.b", "ü", "a\x00b"} {
		if _, err := ParseTarget(bad); err == nil {
			t.Errorf("ParseTarget(%q) accepted", bad)
		} else if e := AsError(err); e.Code != CodeBadName || !strings.Contains(e.Message, NameRule) {
			t.Errorf("ParseTarget(%q): %v", bad, e)
		}
	}
}

func TestObjectNames(t *testing.T) {
	s := Target{Scope: "u1"}
	ss := Target{Scope: "u1", Session: "chatA"}
	if s.ContainerName() != "docker-sandbox-u1" || ss.ContainerName() != "docker-sandbox-u1.chatA" {
		t.Error(s.ContainerName(), ss.ContainerName())
	}
	if s.WorkspaceVolume() != s.UserVolume() || ss.WorkspaceVolume() == ss.UserVolume() || ss.UserVolume() != s.UserVolume() {
		t.Error("volumes", s.WorkspaceVolume(), ss.WorkspaceVolume(), ss.UserVolume())
	}
	// A session named "user" does not collide with the scope's volume.
	if (Target{Scope: "u1", Session: "user"}).WorkspaceVolume() == s.UserVolume() {
		t.Error("session 'user' collides")
	}
}

func TestResolveWorkdir(t *testing.T) {
	good := map[string]string{"": "/opt/workspace", "sub": "/opt/workspace/sub", "a/../b": "/opt/workspace/b",
		"/opt/workspace/x": "/opt/workspace/x", "/opt/user": "/opt/user", "./": "/opt/workspace"}
	for in, want := range good {
		if got, err := ResolveWorkdir(in); err != nil || got != want {
			t.Errorf("ResolveWorkdir(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"..", "../etc", "/etc", "/opt/workspace/../../etc", "/opt/workspacex", "/opt"} {
		if _, err := ResolveWorkdir(bad); err == nil {
			t.Errorf("ResolveWorkdir(%q) accepted", bad)
		}
	}
}
