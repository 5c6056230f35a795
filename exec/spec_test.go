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
	scope.ImageEnv = []string{"PATH=" + img, "PYTHONUSERBASE=/opt/user/.local"}
	if got := env(scope); got["HOME"] != "/opt/user" || got["PATH"] != "" {
		t.Errorf("the scope's own sandbox: HOME %q PATH %q, want /opt/user and the image's PATH", got["HOME"], got["PATH"])
	}
	sess := testSpec()
	sess.Target.Session = "s1"
	sess.ImageEnv = []string{"PATH=" + img, "PYTHONUSERBASE=/opt/user/.local", "BASH_ENV=/opt//user/.bashenv",
		"NODE_OPTIONS=--require /opt/user/a.js --require=/opt/user/b.js", "LANG=C.UTF-8", "HOME=/opt/user", "DATA=/opt/userx"}
	got := env(sess)
	want := map[string]string{"HOME": "/opt/workspace", "PATH": "/opt/workspace/.local/bin:/usr/local/bin:/usr/bin:/bin",
		"PYTHONUSERBASE": "/opt/workspace/.local", "BASH_ENV": "/opt/workspace/.bashenv",
		"NODE_OPTIONS": "--require /opt/workspace/a.js --require=/opt/workspace/b.js", "LANG": "", "DATA": ""}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("a session's sandbox: %s=%q, want %q", k, got[k], w)
		}
	}
	if got := env(scope); got["PYTHONUSERBASE"] != "" {
		t.Errorf("the scope's own sandbox overrides the image's PYTHONUSERBASE: %q", got["PYTHONUSERBASE"])
	}
	values := map[string]string{
		"/opt/user":                       "/opt/workspace",
		"/opt/user/.local":                "/opt/workspace/.local",
		"/opt/./user/x:/usr/lib":          "/opt/workspace/x:/usr/lib",
		"/opt/x/../user/y":                "/opt/workspace/y",
		"-r /opt/user/h.js -r=/opt/user":  "-r /opt/workspace/h.js -r=/opt/workspace",
		`"/opt/user/q" '/opt/user/r'`:     `"/opt/workspace/q" '/opt/workspace/r'`,
		"a.so;/opt/user/b.so,/opt/user":   "a.so;/opt/workspace/b.so,/opt/workspace",
		"/opt/userx /opt/use /x/opt/user": "/opt/userx /opt/use /x/opt/user",
		"user/x ../user/y":                "user/x ../user/y",
		"":                                "",
	}
	for in, want := range values {
		if got := SessionValue(in); got != want {
			t.Errorf("SessionValue(%q) = %q, want %q", in, got, want)
		}
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

// An image VOLUME at one of the sandbox's own mount points, however it is
// spelled, gets no tmpfs: the sandbox's mount takes its place (a tmpfs over
// /opt/sandbox hid the helper, and the container could not start).
func TestTmpfsLeavesOurMounts(t *testing.T) {
	s := testSpec()
	s.ImageVolumes = []string{"/opt/sandbox", "/opt/sandbox/", "/opt/user/../sandbox", "opt/sandbox", "/opt/user", "//opt/workspace/", "/", "/data"}
	_, hc := s.ContainerConfig()
	for p := range hc.Tmpfs {
		if p != "/tmp" && p != "/data" {
			t.Errorf("a tmpfs at %s", p)
		}
	}
	if _, ok := hc.Tmpfs["/data"]; !ok {
		t.Errorf("no read-only tmpfs over the image's VOLUME /data: %v", hc.Tmpfs)
	}
}
