package exec

import (
	"strings"
	"testing"
)

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

// TestSessionHome: a session's sandbox finds nothing of its own in the
// scope's shared volume: HOME is its workspace and the image's PATH entries
// under /opt/user move there; without a session the scope keeps /opt/user.
func TestSessionHome(t *testing.T) {
	img := "/opt/user/.local/bin:/usr/local/bin:/usr/bin:/bin"
	env := func(s Spec) map[string]string {
		cfg, _ := s.ContainerConfig()
		m := map[string]string{}
		for _, kv := range cfg.Env {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		return m
	}
	scope := testSpec()
	scope.Target.Session = ""
	scope.ImagePath = img
	if got := env(scope); got["HOME"] != "/opt/user" || got["PATH"] != "" {
		t.Errorf("the scope's own sandbox: HOME %q PATH %q, want /opt/user and the image's PATH", got["HOME"], got["PATH"])
	}
	sess := testSpec()
	sess.Target.Session = "s1"
	sess.ImagePath = img
	if got := env(sess); got["HOME"] != "/opt/workspace" || got["PATH"] != "/opt/workspace/.local/bin:/usr/local/bin:/usr/bin:/bin" {
		t.Errorf("a session's sandbox: HOME %q PATH %q", got["HOME"], got["PATH"])
	}
	cases := map[string]string{
		"/opt/user/.local/bin:/usr/bin":          "/opt/workspace/.local/bin:/usr/bin",
		"/opt/user:/bin":                         "/opt/workspace:/bin",
		"/opt/user/../user/bin:/bin":             "/opt/workspace/bin:/bin",
		"/opt//user/bin/:/bin":                   "/opt/workspace/bin:/bin",
		"/opt/userx/bin:/bin":                    "/opt/userx/bin:/bin",
		".:bin::/usr/bin":                        "/usr/bin",
		"/usr/bin:/opt/user/.local/bin:/opt/usr": "/usr/bin:/opt/workspace/.local/bin:/opt/usr",
	}
	for in, want := range cases {
		if got := SessionPath(in); got != want {
			t.Errorf("SessionPath(%q) = %q, want %q", in, got, want)
		}
	}
}
