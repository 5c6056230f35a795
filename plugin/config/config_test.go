package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// env returns a LookupEnv over m.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fixture is a temporary docker config dir, and a project root with a work
// directory two levels below it.
type fixture struct {
	dockerDir, root, work, user, project string
}

func newFixture(t *testing.T, userText, projectText string) fixture {
	t.Helper()
	base := t.TempDir()
	f := fixture{
		dockerDir: filepath.Join(base, "docker"),
		root:      filepath.Join(base, "repo"),
	}
	f.work = filepath.Join(f.root, "a", "b")
	f.user = filepath.Join(f.dockerDir, "sandbox", "config.toml")
	f.project = filepath.Join(f.root, ".docker-sandbox.toml")
	if err := os.MkdirAll(f.work, 0o755); err != nil {
		t.Fatal(err)
	}
	if userText != "" {
		writeFile(t, f.user, userText)
	}
	if projectText != "" {
		writeFile(t, f.project, projectText)
	}
	return f
}

// load loads with the project file trusted through the environment (the
// trust rules have their own tests, in trust_test.go).
func (f fixture) load(envm map[string]string) (*Config, error) {
	m := map[string]string{TrustEnv: "1"}
	for k, v := range envm {
		m[k] = v
	}
	return Load(LoadOptions{DockerConfigDir: f.dockerDir, WorkDir: f.work, LookupEnv: env(m)})
}

// expand replaces {user} and {project} with the fixture's paths.
func (f fixture) expand(s string) string {
	return strings.NewReplacer("{user}", f.user, "{project}", f.project).Replace(s)
}

var ignoreUnexported = cmpopts.IgnoreUnexported(Config{})

func TestDefaults(t *testing.T) {
	f := newFixture(t, "", "")
	c, err := f.load(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		DefaultScope: "default",
		RuntimeBase:  "debian:bookworm-slim",
		Settings: core.Settings{
			Network: "none", IdleTTL: 10 * time.Minute, Memory: 1 << 30, Nofile: 1024,
			TmpSize: 512 << 20, Disk: 10 << 30, Pids: 256, CPUs: 1,
		},
		Timeout:            60 * time.Second,
		MaxTimeout:         time.Hour,
		MaxMemory:          16 << 30,
		MaxOutput:          1 << 20,
		MaxSandboxes:       50,
		ExecChannel:        true,
		CopyLocal:          true,
		CopyMaxSize:        2 << 30,
		CopyMaxEntries:     1_000_000,
		Audit:              true,
		AuditRetentionDays: 30,
		AuditMaxCode:       64 << 10,
		AuditMaxOutput:     16 << 10,
		Scopes:             map[string]ScopePolicy{},
		UserFile:           f.user,
	}
	if d := cmp.Diff(want, c, ignoreUnexported); d != "" {
		t.Errorf("Load (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want, Default(), ignoreUnexported, cmpopts.IgnoreFields(Config{}, "UserFile")); d != "" {
		t.Errorf("Default (-want +got):\n%s", d)
	}
	for _, k := range Keys() {
		if got := c.Source(k); got != (Source{Kind: KindDefault}) {
			t.Errorf("Source(%q) = %+v, want default", k, got)
		}
	}
}

func TestEntriesJSON(t *testing.T) {
	c := Default()
	if err := c.Set("timeout", "90s", "--timeout"); err != nil {
		t.Fatal(err)
	}
	c.Scopes["u1"] = ScopePolicy{Allow: []string{"pypi.org"}, Source: Source{Kind: KindUser, File: "/u/config.toml", Line: 4}}
	b, err := json.Marshal(c.Entries())
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"key":"default_scope","value":"default","source":"default"},` +
		`{"key":"default_lang","value":"","source":"default"},` +
		`{"key":"image","value":"","source":"default"},` +
		`{"key":"runtime_base","value":"debian:bookworm-slim","source":"default"},` +
		`{"key":"timeout","value":"1m30s","source":"flag --timeout"},` +
		`{"key":"max_timeout","value":"1h0m0s","source":"default"},` +
		`{"key":"memory","value":1073741824,"source":"default"},` +
		`{"key":"max_memory","value":17179869184,"source":"default"},` +
		`{"key":"cpus","value":1,"source":"default"},` +
		`{"key":"pids","value":256,"source":"default"},` +
		`{"key":"max_output","value":1048576,"source":"default"},` +
		`{"key":"idle_ttl","value":"10m0s","source":"default"},` +
		`{"key":"max_lifetime","value":"0s","source":"default"},` +
		`{"key":"disk","value":10737418240,"source":"default"},` +
		`{"key":"network","value":"none","source":"default"},` +
		`{"key":"runtime","value":"","source":"default"},` +
		`{"key":"nofile","value":1024,"source":"default"},` +
		`{"key":"tmp_size","value":536870912,"source":"default"},` +
		`{"key":"exec_channel","value":true,"source":"default"},` +
		`{"key":"copy_frozen","value":false,"source":"default"},` +
		`{"key":"copy_local","value":true,"source":"default"},` +
		`{"key":"max_sandboxes","value":50,"source":"default"},` +
		`{"key":"copy_max_size","value":2147483648,"source":"default"},` +
		`{"key":"copy_max_file_size","value":0,"source":"default"},` +
		`{"key":"copy_max_entries","value":1000000,"source":"default"},` +
		`{"key":"audit","value":true,"source":"default"},` +
		`{"key":"audit_dir","value":"","source":"default"},` +
		`{"key":"audit_retention_days","value":30,"source":"default"},` +
		`{"key":"audit_max_code","value":65536,"source":"default"},` +
		`{"key":"audit_max_output","value":16384,"source":"default"},` +
		`{"key":"kernel","value":false,"source":"default"},` +
		`{"key":"kernel_reset","value":false,"source":"default"},` +
		`{"key":"scope.u1","value":{"allow":["pypi.org"],"allow_cidrs":[],"allow_ports":[]},"source":"user file /u/config.toml:4"}]`
	if d := cmp.Diff(want, string(b)); d != "" {
		t.Errorf("Entries JSON (-want +got):\n%s", d)
	}
}

func TestKeyTable(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range keyTable {
		if seen[d.name] {
			t.Errorf("duplicate key %q", d.name)
		}
		seen[d.name] = true
		if d.name == scopeTable {
			t.Errorf("key %q clashes with the scope table", d.name)
		}
		// The default passes the key's own checks.
		c := Default()
		if p := d.fromText(c, textOf(d.def)); p != nil {
			t.Errorf("default of %q (%v) fails its check: %s", d.name, d.def, p.pred)
		}
		if d.get(c) != d.def {
			t.Errorf("%q: %v after setting its default text, want %v", d.name, d.get(c), d.def)
		}
	}
	if got := EnvVar("runtime_base"); got != "DOCKER_SANDBOX_RUNTIME_BASE" {
		t.Errorf("EnvVar = %q", got)
	}
}

func textOf(v any) string {
	switch x := v.(type) {
	case time.Duration:
		return x.String()
	case string:
		return x
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func TestPrecedence(t *testing.T) {
	user := `# user file
timeout = "20s"
memory = "2g"
cpus = 2
network = "proxy"
image = "python:3.13-slim"
idle_ttl = 0
`
	project := `
timeout = "30s"

memory = 3221225472
image = "node:22"
`
	f := newFixture(t, user, project)
	// A nearer project file would win: put one in an unrelated sibling to
	// make sure only the walk-up path counts.
	writeFile(t, filepath.Join(f.root, "other", ProjectFileName), `timeout = "1s"`)

	c, err := f.load(map[string]string{
		"DOCKER_SANDBOX_TIMEOUT": "40s",
		"DOCKER_SANDBOX_NETWORK": "", // empty: unset
		"DOCKER_SANDBOX_PIDS":    "512",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set("timeout", "50s", "--timeout"); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.ProjectFile != f.project || c.UserFile != f.user {
		t.Errorf("files = %q, %q; want %q, %q", c.UserFile, c.ProjectFile, f.user, f.project)
	}
	type kv struct {
		Value  any
		Source Source
	}
	got := map[string]kv{}
	for _, k := range []string{"timeout", "memory", "cpus", "network", "image", "pids", "idle_ttl", "nofile"} {
		got[k] = kv{lookupKey(k).get(c), c.Source(k)}
	}
	want := map[string]kv{
		"timeout":  {50 * time.Second, Source{Kind: KindFlag, Name: "--timeout"}},
		"memory":   {3 * GiB, Source{Kind: KindProject, File: f.project, Line: 4}},
		"image":    {"node:22", Source{Kind: KindProject, File: f.project, Line: 5}},
		"cpus":     {2.0, Source{Kind: KindUser, File: f.user, Line: 4}},
		"network":  {"proxy", Source{Kind: KindUser, File: f.user, Line: 5}},
		"idle_ttl": {time.Duration(0), Source{Kind: KindUser, File: f.user, Line: 7}},
		"pids":     {int64(512), Source{Kind: KindEnv, Name: "DOCKER_SANDBOX_PIDS"}},
		"nofile":   {int64(1024), Source{Kind: KindDefault}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("values and sources (-want +got):\n%s", d)
	}

	// Without the flag the environment wins; without it, the project file.
	c, err = f.load(map[string]string{"DOCKER_SANDBOX_TIMEOUT": "40s"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Timeout != 40*time.Second || c.Source("timeout").String() != "env DOCKER_SANDBOX_TIMEOUT" {
		t.Errorf("timeout = %v from %v, want 40s from env", c.Timeout, c.Source("timeout"))
	}
	c, err = f.load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "project file " + f.project + ":2"; c.Timeout != 30*time.Second || c.Source("timeout").String() != want {
		t.Errorf("timeout = %v from %v, want 30s from %s", c.Timeout, c.Source("timeout"), want)
	}
}

func TestNearestProjectFileWins(t *testing.T) {
	f := newFixture(t, "", `timeout = "30s"`)
	near := filepath.Join(f.root, "a", ProjectFileName)
	writeFile(t, near, "\n\ntimeout = \"5s\"\n")
	c, err := f.load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.ProjectFile != near || c.Timeout != 5*time.Second {
		t.Errorf("project file %q timeout %v, want %q 5s", c.ProjectFile, c.Timeout, near)
	}
	if got, want := c.Source("timeout"), (Source{Kind: KindProject, File: near, Line: 3}); got != want {
		t.Errorf("Source = %+v, want %+v", got, want)
	}
}

func TestNoFiles(t *testing.T) {
	dir := t.TempDir()
	c, err := Load(LoadOptions{WorkDir: dir, LookupEnv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if c.UserFile != "" {
		t.Errorf("UserFile = %q, want none without a docker config dir", c.UserFile)
	}
}

func TestLoadErrors(t *testing.T) {
	known := "known keys: default_scope, default_lang, image, runtime_base, timeout, max_timeout, memory, max_memory, cpus, pids, max_output, idle_ttl, max_lifetime, disk, network, runtime, nofile, tmp_size, exec_channel, copy_frozen, copy_local, max_sandboxes, copy_max_size, copy_max_file_size, copy_max_entries, audit, audit_dir, audit_retention_days, audit_max_code, audit_max_output, kernel, kernel_reset, scope.NAME, lang.NAME"
	tests := []struct {
		name          string
		user, project string
		env           map[string]string
		want          string // exact message, after expand
		wantSource    Source // after expand of File
	}{
		{
			name: "unknown key",
			user: "image = \"x\"\n\ntimout = \"5s\"\n",
			want: `config: {user}:3: key "timout": unknown key (` + known + `); did you mean "timeout"?`,
		},
		{
			name: "unknown key without suggestion",
			user: "[scope.u1]\nallow = []\n\n[extra]\nx = 1\n",
			want: `config: {user}:4: key "extra": unknown key (` + known + `)`,
		},
		{
			name:    "bad size",
			project: "# sandbox policy\n\nimage = \"x\"\n\nmemory = \"12 parsecs\"\n",
			want:    `config: {project}:5: key "memory": "12 parsecs" is not a size (use e.g. 512m, 1g)`,
		},
		{
			name: "quoted key",
			user: "\"memory\" = \"-1g\"\n",
			want: `config: {user}:1: key "memory": "-1g" must be at least 6MiB`,
		},
		{
			name:    "syntax error",
			project: "timeout = \"30s\"\nmemory = = 3\n",
			want:    `config: {project}:2: syntax error: `,
		},
		{
			name: "duplicate key is a syntax error",
			user: "timeout = \"1s\"\ntimeout = \"2s\"\n",
			want: `config: {user}:2: syntax error: `,
		},
		{
			name: "wrong type",
			user: "pids = \"256\"\n",
			want: `config: {user}:1: key "pids": must be an integer, not a string`,
		},
		{
			name: "float for integer",
			user: "nofile = 1024.0\n",
			want: `config: {user}:1: key "nofile": must be an integer, not a float`,
		},
		{
			name: "negative duration",
			user: "timeout = \"-5s\"\n",
			want: `config: {user}:1: key "timeout": "-5s" must be greater than 0`,
		},
		{
			name: "duration without unit",
			user: "timeout = 30\n",
			want: `config: {user}:1: key "timeout": 30 is not a duration: a unit is missing (use a string such as "90s", "10m", "1h30m")`,
		},
		{
			name: "duration as table",
			user: "[timeout]\nx = 1\n",
			want: `config: {user}:1: key "timeout": must be a duration string such as "90s", not a table`,
		},
		{
			name: "out of range",
			user: "\n[scope.a]\n\n",
			// not an error on its own; the project file is
			project: "pids = 8\n",
			want:    `config: {project}:1: key "pids": 8 must be at least 16`,
		},
		{
			name: "above maximum",
			user: "max_timeout = \"25h\"\n",
			want: `config: {user}:1: key "max_timeout": "25h" must be at most 24h`,
		},
		{
			name: "cpus",
			user: "cpus = 0\n",
			want: `config: {user}:1: key "cpus": 0 must be greater than 0`,
		},
		{
			name: "cpus nan",
			user: "cpus = nan\n",
			want: `config: {user}:1: key "cpus": NaN must be greater than 0`,
		},
		{
			name: "idle ttl",
			user: "idle_ttl = \"-1m\"\n",
			want: `config: {user}:1: key "idle_ttl": "-1m" must not be negative`,
		},
		{
			name: "bad language",
			user: "default_lang = \"ruby\"\n",
			want: `config: {user}:1: key "default_lang": "ruby" is not a language (use python, node, bash, sh or the name of a [lang.NAME] table)`,
		},
		{
			name:       "a language that is not configured",
			user:       "[lang.perl]\ninterpreter = [\"perl\"]\n",
			project:    "default_lang = \"ruby\"\n",
			want:       `config: {project}:1: key "default_lang": "ruby" is not a language (use python, node, bash, sh or the name of a [lang.NAME] table)`,
			wantSource: Source{Kind: KindProject},
		},
		{
			name: "a language name that cannot be one",
			user: "default_lang = \"a/b\"\n",
			want: `config: {user}:1: key "default_lang": "a/b" is not a language (use python, node, bash, sh or the name of a [lang.NAME] table)`,
		},
		{
			name: "bad scope name",
			user: "default_scope = \"a b\"\n",
			want: `config: {user}:1: key "default_scope": "a b" is not a valid scope name (1 to 64 characters from A-Z, a-z, 0-9, '_' and '-')`,
		},
		{
			name: "empty network",
			user: "network = \"\"\n",
			want: `config: {user}:1: key "network": "" must not be empty`,
		},
		{
			name: "scope unknown key",
			user: "[scope.u1]\nallow = [\"pypi.org\"]\nalow_ports = [443]\n",
			want: `config: {user}:3: key "scope.u1.alow_ports": unknown key (known keys: allow, allow_ports, allow_cidrs, deny); did you mean "allow_ports"?`,
		},
		{
			name: "scope bad name",
			user: "[scope.\"a b\"]\nallow = []\n",
			want: `config: {user}:1: key "scope.\"a b\"": "a b" is not a valid scope name (1 to 64 characters from A-Z, a-z, 0-9, '_' and '-')`,
		},
		{
			name: "scope not a table",
			user: "scope = 1\n",
			want: `config: {user}:1: key "scope": must be a table of scopes ([scope.NAME]), not an integer`,
		},
		{
			name: "scope entry not a table",
			user: "scope.u1 = \"x\"\n",
			want: `config: {user}:1: key "scope.u1": must be a table, not a string`,
		},
		{
			name: "port out of range",
			user: "[scope.u1]\nallow_ports = [443, 70000]\n",
			want: `config: {user}:2: key "scope.u1.allow_ports": element 2: 70000 is not a port (use 1 to 65535)`,
		},
		{
			name: "port not an integer",
			user: "scope.u1.allow_ports = [\"443\"]\n",
			want: `config: {user}:1: key "scope.u1.allow_ports": element 1 must be an integer, not a string`,
		},
		{
			name: "allow not an array",
			user: "[scope.u1]\nallow = \"pypi.org\"\n",
			want: `config: {user}:2: key "scope.u1.allow": must be an array of strings, not a string`,
		},
		{
			name: "bad host pattern",
			user: "[scope.u1]\nallow = [\"https://pypi.org/simple\"]\n",
			want: `config: {user}:2: key "scope.u1.allow": element 1: "https://pypi.org/simple" is not a host pattern (use e.g. pypi.org, *.example.com, *)`,
		},
		{
			name: "bad deny pattern",
			user: "[scope.u1]\ndeny = [\"a.*.b\"]\n",
			want: `config: {user}:2: key "scope.u1.deny": element 1: "a.*.b" is not a host pattern (use e.g. pypi.org, *.example.com, *)`,
		},
		{
			name: "bad cidr",
			user: "[scope.u1]\nallow_cidrs = [\"10.0.0.0/33\"]\n",
			want: `config: {user}:2: key "scope.u1.allow_cidrs": element 1: "10.0.0.0/33" is not a CIDR prefix (use e.g. 10.0.0.0/8)`,
		},
		{
			name: "inline table scope",
			user: "scope = { u1 = { allow = [\"a.org\"], bogus = 1 } }\n",
			want: `config: {user}:1: key "scope.u1.bogus": unknown key (known keys: allow, allow_ports, allow_cidrs, deny)`,
		},
		{
			name: "env bad value",
			env:  map[string]string{"DOCKER_SANDBOX_TIMEOUT": "abc"},
			want: `config: env DOCKER_SANDBOX_TIMEOUT: "abc" is not a duration (use e.g. 90s, 10m, 1h30m)`,
		},
		{
			name: "env out of range",
			env:  map[string]string{"DOCKER_SANDBOX_MAX_SANDBOXES": "0"},
			want: `config: env DOCKER_SANDBOX_MAX_SANDBOXES: "0" must be at least 1`,
		},
		{
			name: "env not an integer",
			env:  map[string]string{"DOCKER_SANDBOX_PIDS": "many"},
			want: `config: env DOCKER_SANDBOX_PIDS: "many" is not an integer`,
		},
		{
			name:    "timeout above a max from a lower layer",
			user:    "max_timeout = \"10m\"\n",
			project: "\ntimeout = \"30m\"\n",
			want:    `config: {project}:2: key "timeout": 30m must be at most max_timeout 10m (user file {user}:1)`,
		},
		{
			name:    "max from a higher layer below the timeout",
			user:    "memory = \"2g\"\n",
			project: "max_memory = \"1g\"\n",
			want:    `config: {project}:1: key "max_memory": 1GiB must be at least memory 2GiB (user file {user}:1)`,
		},
		{
			name: "timeout above the default max",
			user: "timeout = \"2h\"\n",
			want: `config: {user}:1: key "timeout": 2h must be at most max_timeout 1h (default)`,
		},
		{
			name: "env above the max",
			user: "max_memory = \"4g\"\n",
			env:  map[string]string{"DOCKER_SANDBOX_MEMORY": "8g"},
			want: `config: env DOCKER_SANDBOX_MEMORY: "8g" must be at most max_memory 4GiB (user file {user}:1)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.user, tt.project)
			c, err := f.load(tt.env)
			if err == nil {
				t.Fatalf("no error; config %+v", c)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v is not *Error", err, err)
			}
			if e.Code != CodeBadConfig {
				t.Errorf("Code = %q, want %q", e.Code, CodeBadConfig)
			}
			want := f.expand(tt.want)
			got := err.Error()
			if strings.HasSuffix(want, "syntax error: ") {
				if !strings.HasPrefix(got, want) {
					t.Errorf("error:\n got %s\nwant %s...", got, want)
				}
				return
			}
			if got != want {
				t.Errorf("error:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestErrorSource(t *testing.T) {
	f := newFixture(t, "", "\n\nmemory = \"12 parsecs\"\n")
	_, err := f.load(nil)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not *Error", err)
	}
	want := &Error{Code: CodeBadConfig, Key: "memory", Source: Source{Kind: KindProject, File: f.project, Line: 3}}
	if d := cmp.Diff(want, e, cmpopts.IgnoreFields(Error{}, "Msg", "Err")); d != "" {
		t.Errorf("Error (-want +got):\n%s", d)
	}
}

func TestUnreadableUserFile(t *testing.T) {
	f := newFixture(t, "", "")
	if err := os.MkdirAll(f.user, 0o755); err != nil { // a directory, not a file
		t.Fatal(err)
	}
	_, err := f.load(nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeBadConfig || !strings.Contains(err.Error(), "config: cannot read user file: ") {
		t.Fatalf("error = %v, want a bad_config read error", err)
	}
}

func TestSet(t *testing.T) {
	tests := []struct {
		key, value, flag string
		want             any // the value after Set, if no error
		wantErr          string
		wantSource       Source
	}{
		{key: "timeout", value: "90s", flag: "--timeout", want: 90 * time.Second, wantSource: Source{Kind: KindFlag, Name: "--timeout"}},
		{key: "memory", value: "512m", flag: "memory", want: 512 * MiB, wantSource: Source{Kind: KindFlag, Name: "memory"}},
		{key: "cpus", value: "0.5", flag: "--cpus", want: 0.5},
		{key: "default_scope", value: "u1", flag: "s", want: "u1"},
		{key: "image", value: "", flag: "--image", want: ""},
		{key: "max_sandboxes", value: "7", flag: "", want: 7, wantSource: Source{Kind: KindFlag, Name: "--max-sandboxes"}},
		{key: "timeout", value: "-5s", flag: "--timeout", wantErr: `invalid value "-5s" for --timeout: must be greater than 0`},
		{key: "timeout", value: "5", flag: "timeout", wantErr: `invalid value "5" for --timeout: not a duration: a unit is missing (use e.g. 90s, 10m, 1h30m)`},
		{key: "memory", value: "12 parsecs", flag: "--memory", wantErr: `invalid value "12 parsecs" for --memory: not a size (use e.g. 512m, 1g)`},
		{key: "memory", value: "1m", flag: "--memory", wantErr: `invalid value "1m" for --memory: must be at least 6MiB`},
		{key: "pids", value: "1e3", flag: "--pids", wantErr: `invalid value "1e3" for --pids: not an integer`},
		{key: "cpus", value: "65", flag: "--cpus", wantErr: `invalid value "65" for --cpus: must be at most 64`},
		{key: "cpus", value: "Inf", flag: "--cpus", wantErr: `invalid value "Inf" for --cpus: must be at most 64`},
		{key: "max_output", value: "2g", flag: "--max-output", wantErr: `invalid value "2g" for --max-output: must be at most 1GiB`},
		{key: "default_scope", value: "a/b", flag: "s", wantErr: `invalid value "a/b" for -s: not a valid scope name`},
		{key: "default_lang", value: "a/b", flag: "--lang", wantErr: `invalid value "a/b" for --lang: not a language (use python, node, bash, sh or the name of a [lang.NAME] table)`},
		{key: "network", value: " ", flag: "--network", wantErr: `invalid value " " for --network: must not be empty`},
		{key: "bogus", value: "1", flag: "--bogus", wantErr: `--bogus: unknown configuration key "bogus" (known keys: default_scope,`},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			c := Default()
			before := *c
			err := c.Set(tt.key, tt.value, tt.flag)
			checkErr(t, err, tt.wantErr)
			if err != nil {
				var e *Error
				if !errors.As(err, &e) || e.Code != CodeBadFlag {
					t.Errorf("error %#v is not a *Error with code %q", err, CodeBadFlag)
				}
				if d := cmp.Diff(&before, c, ignoreUnexported); d != "" {
					t.Errorf("a failed Set changed the config:\n%s", d)
				}
				return
			}
			if got := lookupKey(tt.key).get(c); got != tt.want {
				t.Errorf("value = %#v, want %#v", got, tt.want)
			}
			if tt.wantSource != (Source{}) && c.Source(tt.key) != tt.wantSource {
				t.Errorf("Source = %+v, want %+v", c.Source(tt.key), tt.wantSource)
			}
		})
	}
}

func TestSetOnZeroConfig(t *testing.T) {
	var c Config
	if err := c.Set("timeout", "1s", "--timeout"); err != nil {
		t.Fatal(err)
	}
	if c.Source("timeout").String() != "flag --timeout" {
		t.Errorf("Source = %v", c.Source("timeout"))
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		user    string
		env     map[string]string
		flags   [][3]string // key, value, flag
		wantErr string      // exact, after expand; "" for none
		code    string
		check   func(t *testing.T, c *Config)
	}{
		{
			name:    "flag above default max",
			flags:   [][3]string{{"timeout", "2h", "--timeout"}},
			wantErr: `invalid value "2h" for --timeout: must be at most max_timeout 1h (default)`,
			code:    CodeBadFlag,
		},
		{
			name:    "flag above file max",
			user:    "max_memory = \"2g\"\n",
			flags:   [][3]string{{"memory", "3g", "--memory"}},
			wantErr: `invalid value "3g" for --memory: must be at most max_memory 2GiB (user file {user}:1)`,
			code:    CodeBadFlag,
		},
		{
			name:    "flag max below file value",
			user:    "\ntimeout = \"50m\"\n",
			flags:   [][3]string{{"max_timeout", "30m", "--max-timeout"}},
			wantErr: `invalid value "30m" for --max-timeout: must be at least timeout 50m (user file {user}:2)`,
			code:    CodeBadFlag,
		},
		{
			name:    "file value above env max",
			user:    "timeout = \"50m\"\n",
			env:     map[string]string{"DOCKER_SANDBOX_MAX_TIMEOUT": "10m"},
			wantErr: `config: env DOCKER_SANDBOX_MAX_TIMEOUT: "10m" must be at least timeout 50m (user file {user}:1)`,
			code:    CodeBadConfig,
		},
		{
			name:  "flag within a raised max",
			user:  "max_timeout = \"3h\"\n",
			flags: [][3]string{{"timeout", "2h", "--timeout"}},
			check: func(t *testing.T, c *Config) {
				if c.Timeout != 2*time.Hour {
					t.Errorf("timeout = %v", c.Timeout)
				}
			},
		},
		{
			name: "default capped by a file max",
			user: "max_timeout = \"30s\"\nmax_memory = \"512m\"\n",
			check: func(t *testing.T, c *Config) {
				if c.Timeout != 30*time.Second || c.Memory != 512*MiB {
					t.Errorf("timeout %v memory %d, want 30s and 512MiB", c.Timeout, c.Memory)
				}
				if got := c.Source("timeout").String(); got != "default (capped by max_timeout)" {
					t.Errorf("Source = %q", got)
				}
			},
		},
		{
			name:  "capped default restored when the max is raised",
			user:  "max_timeout = \"30s\"\n",
			flags: [][3]string{{"max_timeout", "2m", "--max-timeout"}},
			check: func(t *testing.T, c *Config) {
				if c.Timeout != time.Minute || c.Source("timeout") != (Source{Kind: KindDefault}) {
					t.Errorf("timeout %v from %v, want the default 1m", c.Timeout, c.Source("timeout"))
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.user, "")
			c, err := f.load(tt.env)
			for _, fl := range tt.flags {
				if err != nil {
					break
				}
				err = c.Set(fl[0], fl[1], fl[2])
			}
			if err == nil {
				err = c.Validate()
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tt.check != nil {
					tt.check(t, c)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %s", f.expand(tt.wantErr))
			}
			if got, want := err.Error(), f.expand(tt.wantErr); got != want {
				t.Errorf("error:\n got %s\nwant %s", got, want)
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != tt.code {
				t.Errorf("error %#v: want *Error with code %q", err, tt.code)
			}
		})
	}
}

func TestScopes(t *testing.T) {
	user := `default_scope = "u1"

[scope.u1]
allow = ["pypi.org", "*.pythonhosted.org"]
allow_ports = [443, 8443]

[scope.ci]
allow = ["*"]
allow_cidrs = ["10.1.2.3/16", "192.168.0.1", "fd00::/8"]

[scope.empty]
`
	project := `scope.u1.allow = ["registry.npmjs.org"]

[scope]
job-7 = { allow_ports = [80] }
`
	f := newFixture(t, user, project)
	c, err := f.load(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ScopePolicy{
		"u1": {
			Allow:      []string{"registry.npmjs.org"}, // the project file's allow replaces the user's
			AllowPorts: []int{443, 8443},               // kept from the user file
			Source:     Source{Kind: KindProject, File: f.project, Line: 1},
		},
		"ci": {
			Allow:      []string{"*"},
			AllowCIDRs: []string{"10.1.0.0/16", "192.168.0.1/32", "fd00::/8"},
			Source:     Source{Kind: KindUser, File: f.user, Line: 7},
		},
		"empty": {Source: Source{Kind: KindUser, File: f.user, Line: 11}},
		"job-7": {AllowPorts: []int{80}, Source: Source{Kind: KindProject, File: f.project, Line: 4}},
	}
	if d := cmp.Diff(want, c.Scopes); d != "" {
		t.Errorf("Scopes (-want +got):\n%s", d)
	}
	if got := c.Source("scope.ci").String(); got != "user file "+f.user+":7" {
		t.Errorf("Source(scope.ci) = %q", got)
	}
	var keys []string
	for _, e := range c.Entries() {
		if strings.HasPrefix(e.Key, "scope.") {
			keys = append(keys, e.Key)
		}
	}
	if d := cmp.Diff([]string{"scope.ci", "scope.empty", "scope.job-7", "scope.u1"}, keys); d != "" {
		t.Errorf("scope entries (-want +got):\n%s", d)
	}
}

func TestSourceString(t *testing.T) {
	tests := []struct {
		s    Source
		want string
	}{
		{Source{Kind: KindDefault}, "default"},
		{Source{}, "default"},
		{Source{Kind: KindDefault, Name: "max_timeout"}, "default (capped by max_timeout)"},
		{Source{Kind: KindUser, File: "/p/config.toml", Line: 3}, "user file /p/config.toml:3"},
		{Source{Kind: KindProject, File: "/p/.docker-sandbox.toml", Line: 5}, "project file /p/.docker-sandbox.toml:5"},
		{Source{Kind: KindProject, File: "/p/.docker-sandbox.toml"}, "project file /p/.docker-sandbox.toml"},
		{Source{Kind: KindEnv, Name: "DOCKER_SANDBOX_TIMEOUT"}, "env DOCKER_SANDBOX_TIMEOUT"},
		{Source{Kind: KindFlag, Name: "--timeout"}, "flag --timeout"},
		{Source{Kind: KindFlag, Name: "timeout"}, "flag --timeout"},
		{Source{Kind: KindFlag, Name: "s"}, "flag -s"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.s, got, tt.want)
		}
	}
	if got := Default().Source("no_such_key"); got != (Source{}) {
		t.Errorf("Source of an unknown key = %+v, want zero", got)
	}
}
