package core

import (
	"regexp"
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

// The plugin's own objects, spelled out by hand (not taken from the code
// under test): no target may produce any of them, and none of them parses
// as a sandbox's object.
var pluginObjects = []string{
	"docker-sandbox.egress", "docker-sandbox.egress-data", "docker-sandbox.net.egress", "docker-sandbox.net.u1",
	"docker-sandbox.helper.0.1.0.abc.amd64",
}

func TestObjectNamesDisjoint(t *testing.T) {
	for _, n := range pluginObjects {
		if !IsPluginObjectName(n) {
			t.Errorf("IsPluginObjectName(%q) = false", n)
		}
		if tg, ok := ParseContainerName(n); ok {
			t.Errorf("ParseContainerName(%q) = %v: a plugin object parsed as a sandbox's", n, tg)
		}
		if tg, kind, ok := ParseVolumeName(n); ok {
			t.Errorf("ParseVolumeName(%q) = %v %s: a plugin object parsed as a sandbox's", n, tg, kind)
		}
	}
	// Scopes and sessions named after the plugin's objects stay in the
	// sandbox namespace.
	for _, scope := range []string{"egress", "egress-data", "net", "helper", "net-u1", "helper-0_1_0", "_", "-"} {
		for _, session := range []string{"", "egress", "user", "ws", "net"} {
			tg := Target{Scope: scope, Session: session}
			for _, n := range []string{tg.ContainerName(), tg.UserVolume(), tg.WorkspaceVolume()} {
				if IsPluginObjectName(n) {
					t.Errorf("%v: %q is in the plugin's namespace", tg, n)
				}
				for _, p := range pluginObjects {
					if n == p {
						t.Errorf("%v: %q is a plugin object's name", tg, n)
					}
				}
			}
			if got, ok := ParseContainerName(tg.ContainerName()); !ok || got != tg {
				t.Errorf("ParseContainerName(%q) = %v %v, want %v", tg.ContainerName(), got, ok, tg)
			}
			if got, kind, ok := ParseVolumeName(tg.UserVolume()); !ok || got != (Target{Scope: scope}) || kind != KindUser {
				t.Errorf("ParseVolumeName(%q) = %v %s %v", tg.UserVolume(), got, kind, ok)
			}
			if session != "" {
				if got, kind, ok := ParseVolumeName(tg.WorkspaceVolume()); !ok || got != tg || kind != KindWorkspace {
					t.Errorf("ParseVolumeName(%q) = %v %s %v", tg.WorkspaceVolume(), got, kind, ok)
				}
			}
		}
	}
	for _, bad := range []string{"docker-sandbox-", "docker-sandbox-a.b.c", "docker-sandbox-a.b.ws.x", "docker-sandbox-a..ws", "docker-sandbox-a b", "docker-sandboxa", "x-docker-sandbox-a", "docker-sandbox-a.b.ws"} {
		if tg, ok := ParseContainerName(bad); ok {
			t.Errorf("ParseContainerName(%q) = %v", bad, tg)
		}
	}
	for _, bad := range []string{"docker-sandbox-a", "docker-sandbox-a.b", "docker-sandbox-a.b.user", "docker-sandbox-.user", "docker-sandbox-a..ws"} {
		if tg, kind, ok := ParseVolumeName(bad); ok {
			t.Errorf("ParseVolumeName(%q) = %v %s", bad, tg, kind)
		}
	}
}

// FuzzObjectNames: whatever the names, a valid target's objects are never
// in the plugin's namespace and parse back to the same target; a name that
// parses is exactly the name of what it parses to.
func FuzzObjectNames(f *testing.F) {
	f.Add("egress", "")
	f.Add("net", "u1")
	f.Add("docker-sandbox.egress", "x")
	f.Add("a.b", "ws")
	nameRE := regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	f.Fuzz(func(t *testing.T, scope, session string) {
		if ValidName(scope) != nameRE.MatchString(scope) {
			t.Fatalf("ValidName(%q) = %v, the rule says %v", scope, ValidName(scope), nameRE.MatchString(scope))
		}
		tg := Target{Scope: scope, Session: session}
		if tg.Validate() == nil {
			for _, n := range []string{tg.ContainerName(), tg.UserVolume(), tg.WorkspaceVolume()} {
				if IsPluginObjectName(n) {
					t.Fatalf("%v: %q is in the plugin's namespace", tg, n)
				}
			}
			if got, ok := ParseContainerName(tg.ContainerName()); !ok || got != tg {
				t.Fatalf("ParseContainerName(%q) = %v %v, want %v", tg.ContainerName(), got, ok, tg)
			}
		}
		name := "docker-sandbox-" + scope
		if session != "" {
			name += "." + session
		}
		if got, ok := ParseContainerName(name); ok && (got.ContainerName() != name || IsPluginObjectName(name)) {
			t.Fatalf("ParseContainerName(%q) = %v, whose name is %q", name, got, got.ContainerName())
		}
		if got, kind, ok := ParseVolumeName(name); ok {
			back := got.UserVolume()
			if kind == KindWorkspace {
				back = got.WorkspaceVolume()
			}
			if back != name || IsPluginObjectName(name) {
				t.Fatalf("ParseVolumeName(%q) = %v %s, whose name is %q", name, got, kind, back)
			}
		}
	})
}
