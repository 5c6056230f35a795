package plugin

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

// The text form of `config` says what an empty or zero value means, and
// shows a [scope.NAME] table as its three lists (not Go's map[...]).
func TestConfigText(t *testing.T) {
	for _, tc := range []struct {
		key  string
		v    any
		want string
	}{
		{"default_lang", "", "(sh)"},
		{"default_lang", "python", "python"},
		{"image", "", "(the runtime image)"},
		{"image", "python:3.13-slim", "python:3.13-slim"},
		{"runtime", "", "(engine default)"},
		{"default_scope", "", ""},
		{"max_lifetime", "0s", "0 (none)"},
		{"max_lifetime", "2h0m0s", "2h0m0s"},
		{"idle_ttl", "0s", "0 (never)"},
		{"disk", int64(0), "0 (no limit)"},
		{"copy_max_file_size", int64(0), "0 (= copy_max_size)"},
		{"memory", int64(1073741824), "1073741824"},
		{"cpus", 1.5, "1.5"},
		{"scope.ci-job", map[string]any{"allow": []string{"pypi.org", "*.pythonhosted.org"}, "allow_ports": []int{443}, "allow_cidrs": []string{}},
			"allow=[pypi.org,*.pythonhosted.org] allow_ports=[443] allow_cidrs=[]"},
		{"scope.x", map[string]any{"allow": []string{}, "allow_ports": []int{}, "allow_cidrs": []string{"10.0.0.0/8"}},
			"allow=[] allow_ports=[] allow_cidrs=[10.0.0.0/8]"},
	} {
		if got := configText(tc.key, tc.v); got != tc.want {
			t.Errorf("configText(%q, %#v) = %q, want %q", tc.key, tc.v, got, tc.want)
		}
	}
}

// configFixture loads a configuration: a user file with a scope table, an
// untrusted project file (one value it may set, one refused) under a git
// repository, and a value from the environment.
func configFixture(t *testing.T) *config.Config {
	t.Helper()
	home := t.TempDir()
	dcfg := filepath.Join(home, ".docker")
	repo := filepath.Join(home, "repo")
	for _, d := range []string{filepath.Join(dcfg, "sandbox"), filepath.Join(repo, ".git")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dcfg, "sandbox", "config.toml"), "[scope.ci-job]\nallow = [\"pypi.org\"]\nallow_ports = [443]\n")
	write(filepath.Join(repo, ".docker-sandbox.toml"), "timeout = \"30s\"\nnetwork = \"bridge\"\n")
	env := map[string]string{"HOME": home, "DOCKER_SANDBOX_MEMORY": "2g"}
	c, err := config.Load(config.LoadOptions{DockerConfigDir: dcfg, WorkDir: repo, LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConfigOutput(t *testing.T) {
	c := configFixture(t)
	var out bytes.Buffer
	if err := runConfig(&out, c, configOptions{}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	lines := strings.Split(text, "\n")
	if f := strings.Fields(lines[0]); !slices.Equal(f, []string{"KEY", "VALUE", "SOURCE"}) {
		t.Errorf("header %q", lines[0])
	}
	row := func(key string) []string {
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 0 && f[0] == key {
				return f
			}
		}
		t.Errorf("no row %s in:\n%s", key, text)
		return nil
	}
	if f := row("timeout"); len(f) < 3 || f[1] != "30s" || !strings.HasSuffix(strings.Join(f[2:], " "), "(untrusted: narrows)") {
		t.Errorf("timeout row %q", f)
	}
	if f := row("memory"); len(f) < 3 || f[1] != "2147483648" || strings.Join(f[2:], " ") != "env DOCKER_SANDBOX_MEMORY" {
		t.Errorf("memory row %q", f)
	}
	if f := row("default_lang"); len(f) < 2 || f[1] != "(sh)" {
		t.Errorf("default_lang row %q", f)
	}
	if f := row("scope.ci-job"); len(f) < 4 || strings.Join(f[1:4], " ") != "allow=[pypi.org] allow_ports=[443] allow_cidrs=[]" {
		t.Errorf("scope row %q", f)
	}
	for _, want := range []string{"\nproject file " + c.ProjectFile + ": not trusted\n", "ignored (an untrusted project file may only narrow", "network", "after reading it, trust it with: docker sandbox config trust " + c.ProjectFile + "\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
	// The columns line up (docker's formatter): every VALUE starts where
	// the header's does.
	col := strings.Index(lines[0], "VALUE")
	for _, l := range lines[1:] {
		if l == "" {
			break
		}
		if l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("row not aligned at %d: %q", col, l)
		}
	}

	// JSON, and templates on it: numbers as written.
	out.Reset()
	if err := runConfig(&out, c, configOptions{format: "json"}); err != nil {
		t.Fatal(err)
	}
	var j configJSON
	if err := json.Unmarshal(out.Bytes(), &j); err != nil || j.Project == nil || j.Project.State != "untrusted" || len(j.Refused) != 1 || j.Refused[0].Key != "network" {
		t.Fatalf("%v: %s", err, out.String())
	}
	out.Reset()
	if err := runConfig(&out, c, configOptions{format: "{{.values.memory.value}} {{.values.memory.source}} {{.project.state}}"}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff("2147483648 env DOCKER_SANDBOX_MEMORY untrusted\n", out.String()); d != "" {
		t.Error(d)
	}
}
