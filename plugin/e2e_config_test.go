package plugin_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type configOut struct {
	Files  map[string]string `json:"files"`
	Values map[string]struct {
		Value  any    `json:"value"`
		Source string `json:"source"`
	} `json:"values"`
}

// Precedence: flags > environment > project file > user file > defaults,
// each value with its source.
func TestConfigPrecedence(t *testing.T) {
	needE2E(t)
	cfg := privateConfig(t)
	userFile := filepath.Join(cfg, "sandbox", "config.toml")
	_ = os.MkdirAll(filepath.Dir(userFile), 0o755)
	_ = os.WriteFile(userFile, []byte("# user\ntimeout = \"11s\"\nmemory = \"300m\"\npids = 100\ncpus = 0.5\n"), 0o644)
	proj := t.TempDir()
	deep := filepath.Join(proj, "a", "b")
	_ = os.MkdirAll(deep, 0o755)
	projFile := filepath.Join(proj, ".docker-sandbox.toml")
	_ = os.WriteFile(projFile, []byte("memory = \"400m\"\n\npids = 120\n"), 0o644)
	env := []string{"DOCKER_CONFIG=" + cfg, "DOCKER_SANDBOX_PIDS=140"}
	r := sbRun(t, run{env: env, dir: deep, args: []string{"config", "--format", "json"}})
	wantCode(t, r, 0)
	var c configOut
	if err := json.Unmarshal([]byte(r.Stdout), &c); err != nil {
		t.Fatalf("%v\n%s", err, r)
	}
	check := func(key string, value any, source string) {
		t.Helper()
		v, ok := c.Values[key]
		if !ok {
			t.Fatalf("no key %s in %s", key, r.Stdout)
		}
		if v.Value != value || v.Source != source {
			t.Errorf("%s = %v from %q, want %v from %q", key, v.Value, v.Source, value, source)
		}
	}
	check("timeout", "11s", "user file "+userFile+":2")
	check("memory", float64(400<<20), "project file "+projFile+":1")
	check("pids", float64(140), "env DOCKER_SANDBOX_PIDS")
	check("cpus", 0.5, "user file "+userFile+":5")
	check("max_output", float64(1<<20), "default")
	if c.Files["project"] != projFile || c.Files["user"] != userFile {
		t.Errorf("files: %v", c.Files)
	}
	// The flag beats them all, and the sandbox gets what config says.
	scope := newScope(t)
	r = sbRun(t, run{env: env, dir: deep, args: []string{"exec", "-s", scope, "--pids", "150", "-c", "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max"}})
	wantCode(t, r, 0)
	if strings.TrimSpace(r.Stdout) != "150" {
		t.Fatalf("--pids 150 over env/project/user: pids.max = %s", r)
	}
	r = sbRun(t, run{env: env, dir: deep, args: []string{"exec", "-s", scope + "x", "-c", "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max"}})
	t.Cleanup(func() { removeScope(t, scope+"x") })
	wantCode(t, r, 0)
	if strings.TrimSpace(r.Stdout) != "419430400" {
		t.Fatalf("memory from the project file: %s", r)
	}
}

func TestConfigErrorsNameFileLineKey(t *testing.T) {
	needE2E(t)
	cfg := privateConfig(t)
	dir := t.TempDir()
	projFile := filepath.Join(dir, ".docker-sandbox.toml")
	cases := []struct {
		body string
		want []string
	}{
		{"timeout = \"5s\"\ntimout = \"3s\"\n", []string{projFile + ":2", `"timout"`, "unknown key"}},
		{"\n\nmemory = \"12 parsecs\"\n", []string{projFile + ":3", `"memory"`}},
		{"pids = [\n", []string{projFile}},
	}
	for _, c := range cases {
		_ = os.WriteFile(projFile, []byte(c.body), 0o644)
		for _, args := range [][]string{{"config"}, {"exec", "-c", "true"}} {
			r := sbRun(t, run{env: []string{"DOCKER_CONFIG=" + cfg}, dir: dir, args: args})
			wantCode(t, r, 125)
			for _, w := range c.want {
				if !strings.Contains(r.Stderr, w) {
					t.Errorf("%v with %q: stderr lacks %q:\n%s", args, c.body, w, r.Stderr)
				}
			}
		}
		r := sbRun(t, run{env: []string{"DOCKER_CONFIG=" + cfg}, dir: dir, args: []string{"config", "--format", "json"}})
		if e := decodeErr(t, r); e.Error.Code != "bad_config" {
			t.Errorf("code %q", e.Error.Code)
		}
	}
	r := sbRun(t, run{env: []string{"DOCKER_CONFIG=" + cfg, "DOCKER_SANDBOX_TIMEOUT=soon"}, args: []string{"config"}})
	wantCode(t, r, 125)
	if !strings.Contains(r.Stderr, "DOCKER_SANDBOX_TIMEOUT") {
		t.Errorf("env error does not name the variable: %s", r)
	}
}
