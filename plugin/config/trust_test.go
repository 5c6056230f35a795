package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// loadUntrusted loads the fixture without DOCKER_SANDBOX_TRUST_PROJECT.
func (f fixture) loadUntrusted(envm map[string]string) (*Config, error) {
	return Load(LoadOptions{DockerConfigDir: f.dockerDir, WorkDir: f.work, LookupEnv: env(envm)})
}

func mustLoad(t *testing.T, c *Config, err error) *Config {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// must fails the test on an error of a Load.
func must(t *testing.T) func(*Config, error) *Config {
	return func(c *Config, err error) *Config {
		t.Helper()
		return mustLoad(t, c, err)
	}
}

func refusedKeys(c *Config) []string {
	out := []string{}
	for _, r := range c.Refused {
		out = append(out, r.Key)
	}
	return out
}

// trustCases gives, for every key, a TOML value an untrusted project file
// may set over the defaults (narrow: "" when there is none) and one it may
// not (wide: "" when every value is accepted). A key without a case fails
// TestTrustRuleOfEveryKey: a new key must state what an untrusted project
// file may do with it.
var trustCases = map[string]struct{ narrow, wide string }{
	"default_scope":      {"", `"other"`},
	"default_lang":       {`"python"`, ""},
	"image":              {"", `"evil:latest"`},
	"runtime_base":       {"", `"evil:latest"`},
	"timeout":            {`"30s"`, `"10m"`},
	"max_timeout":        {`"30m"`, `"2h"`},
	"memory":             {`"512m"`, `"2g"`},
	"max_memory":         {`"8g"`, `"32g"`},
	"cpus":               {`0.5`, `2`},
	"pids":               {`128`, `512`},
	"max_output":         {`"64k"`, `"2m"`},
	"idle_ttl":           {`"1m"`, `0`},
	"max_lifetime":       {`"1h"`, ""},
	"disk":               {`"1g"`, `0`},
	"network":            {`"none"`, `"bridge"`},
	"runtime":            {"", `"runc"`},
	"nofile":             {`512`, `4096`},
	"tmp_size":           {`"64m"`, `"1g"`},
	"exec_channel":       {"", `false`},
	"copy_frozen":        {"", `true`},
	"copy_local":         {"", `false`},
	"max_sandboxes":      {`5`, `500`},
	"copy_max_size":      {`"1g"`, `"4g"`},
	"copy_max_file_size": {`"1g"`, ""}, // the default is 0 (unlimited): any value narrows
	"copy_max_entries":   {`1000`, `2000000`},
	// The audit trail: on, never off; its place, retention and caps only
	// from a trusted file.
	"audit":                {`true`, `false`},
	"audit_dir":            {"", `"/tmp/elsewhere"`},
	"audit_retention_days": {"", `1`},
	"audit_max_code":       {"", `0`},
	"audit_max_output":     {"", `0`},
	"kernel":               {`true`, ""},
	"kernel_reset":         {`true`, ""},
}

// Every key states a rule, and the rule does what it says over the
// defaults: a narrowing value applies (from the project file, marked
// untrusted), a widening one is ignored (the default stays) and listed.
func TestTrustRuleOfEveryKey(t *testing.T) {
	for _, d := range keyTable {
		if EnvVar(d.name) == TrustEnv {
			t.Errorf("key %q clashes with %s", d.name, TrustEnv)
		}
	}
	known := map[string]bool{RuleLower: true, RuleLowerZeroUnlimited: true, RuleNone: true, RuleTrusted: true, RuleAny: true, RuleOnOnly: true}
	for _, d := range keyTable {
		if !known[d.trust] || d.narrows == nil {
			t.Errorf("key %q has no known trust rule (%q)", d.name, d.trust)
		}
		tc, ok := trustCases[d.name]
		if !ok {
			t.Errorf("key %q has no case in trustCases: say what an untrusted project file may set", d.name)
			continue
		}
		def := Default()
		if tc.narrow != "" {
			f := newFixture(t, "", d.name+" = "+tc.narrow+"\n")
			c := must(t)(f.loadUntrusted(nil))
			if len(c.Refused) != 0 || c.Source(d.name).Kind != KindProject {
				t.Errorf("%s = %s (narrows): refused %v, source %v", d.name, tc.narrow, c.Refused, c.Source(d.name))
			}
			if e := entryOf(c, d.name); !e.Untrusted {
				t.Errorf("%s: entry %+v not marked untrusted", d.name, e)
			}
		}
		if tc.wide != "" {
			f := newFixture(t, "", "\n"+d.name+" = "+tc.wide+"\n")
			c := must(t)(f.loadUntrusted(nil))
			if d.get(c) != d.get(def) || c.Source(d.name).Kind != KindDefault {
				t.Errorf("%s = %s (widens) took effect: %v from %v", d.name, tc.wide, d.get(c), c.Source(d.name))
			}
			want := []Refusal{{Key: d.name, Value: tc.wide, Source: Source{Kind: KindProject, File: f.project, Line: 2}}}
			if d := cmp.Diff(want, c.Refused, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Reason" }, cmp.Ignore())); d != "" {
				t.Errorf("refused (-want +got):\n%s", d)
			}
			// Trusted, the same file applies.
			c = must(t)(f.load(nil))
			if len(c.Refused) != 0 || c.Source(d.name).Kind != KindProject || entryOf(c, d.name).Untrusted {
				t.Errorf("%s = %s from a trusted file: refused %v, source %v", d.name, tc.wide, c.Refused, c.Source(d.name))
			}
		}
	}
}

func entryOf(c *Config, key string) Entry {
	for _, e := range c.Entries() {
		if e.Key == key {
			return e
		}
	}
	return Entry{}
}

// The reviewer's case: a project file two folders up sets the scope, a 24 h
// timeout and another scope's network. None of it takes effect.
func TestUntrustedProjectReviewerCase(t *testing.T) {
	f := newFixture(t, "", "default_scope = \"victim\"\ntimeout = \"24h\"\nmax_timeout = \"24h\"\nnetwork = \"docker-sandbox.net.victim\"\n")
	c := must(t)(f.loadUntrusted(nil))
	if c.DefaultScope != "default" || c.Timeout != time.Minute || c.MaxTimeout != time.Hour || c.Network != "none" {
		t.Fatalf("an untrusted project file took effect: scope %q, timeout %v, max_timeout %v, network %q", c.DefaultScope, c.Timeout, c.MaxTimeout, c.Network)
	}
	if d := cmp.Diff([]string{"default_scope", "timeout", "max_timeout", "network"}, refusedKeys(c)); d != "" {
		t.Errorf("refused (-want +got):\n%s", d)
	}
	if c.Project.Trusted || c.Project.State != TrustStateUntrusted || c.Project.File != f.project {
		t.Errorf("project trust %+v", c.Project)
	}
	for _, k := range []string{"default_scope", "timeout", "network"} {
		if s := c.Source(k); s.Kind != KindDefault {
			t.Errorf("%s: source %v, want default", k, s)
		}
	}
}

// Narrowing is judged against the layers below: the user file, and the
// defaults capped by the user's maxima.
func TestUntrustedNarrowsUserFile(t *testing.T) {
	f := newFixture(t, "timeout = \"10m\"\nmemory = \"4g\"\nmax_timeout = \"30s\"\n", "")
	_ = f
	cases := []struct {
		user, project string
		check         func(c *Config) bool
		refused       []string
	}{
		// Above the default, below the user's: applies.
		{"timeout = \"10m\"\n", "timeout = \"5m\"\n", func(c *Config) bool { return c.Timeout == 5*time.Minute }, []string{}},
		{"timeout = \"10m\"\n", "timeout = \"11m\"\n", func(c *Config) bool { return c.Timeout == 10*time.Minute }, []string{"timeout"}},
		// The default timeout (60s) capped by the user's max_timeout.
		{"max_timeout = \"30s\"\n", "timeout = \"45s\"\n", func(c *Config) bool { return c.Timeout == 30*time.Second }, []string{"timeout"}},
		{"max_timeout = \"30s\"\n", "timeout = \"20s\"\n", func(c *Config) bool { return c.Timeout == 20*time.Second }, []string{}},
		// idle_ttl 0 is never: the widest.
		{"", "idle_ttl = 0\n", func(c *Config) bool { return c.IdleTTL == 10*time.Minute }, []string{"idle_ttl"}},
		{"idle_ttl = 0\n", "idle_ttl = \"1h\"\n", func(c *Config) bool { return c.IdleTTL == time.Hour }, []string{}},
		// network: only "none", or what the user set already.
		{"network = \"proxy\"\n", "network = \"none\"\n", func(c *Config) bool { return c.Network == "none" }, []string{}},
		{"network = \"proxy\"\n", "network = \"proxy\"\n", func(c *Config) bool { return c.Network == "proxy" }, []string{}},
		{"network = \"proxy\"\n", "network = \"mynet\"\n", func(c *Config) bool { return c.Network == "proxy" }, []string{"network"}},
		// A selecting key equal to the user's is no change.
		{"image = \"python:3\"\n", "image = \"python:3\"\n", func(c *Config) bool { return c.Image == "python:3" }, []string{}},
		{"image = \"python:3\"\n", "image = \"evil\"\n", func(c *Config) bool { return c.Image == "python:3" }, []string{"image"}},
	}
	for _, tc := range cases {
		f := newFixture(t, tc.user, tc.project)
		c := must(t)(f.loadUntrusted(nil))
		if !tc.check(c) {
			t.Errorf("user %q, project %q: timeout %v, idle_ttl %v, network %q, image %q", tc.user, tc.project, c.Timeout, c.IdleTTL, c.Network, c.Image)
		}
		if d := cmp.Diff(tc.refused, refusedKeys(c)); d != "" {
			t.Errorf("user %q, project %q: refused (-want +got):\n%s", tc.user, tc.project, d)
		}
	}
	// Environment and flags stay above the project file.
	f = newFixture(t, "", "timeout = \"24h\"\n")
	c := must(t)(f.loadUntrusted(map[string]string{"DOCKER_SANDBOX_TIMEOUT": "2m"}))
	if c.Timeout != 2*time.Minute || c.Source("timeout").Kind != KindEnv {
		t.Errorf("env under an untrusted project: %v from %v", c.Timeout, c.Source("timeout"))
	}
}

// Trust by path and content: a record applies the file in full; an edit
// makes it untrusted again; another file with the same content elsewhere,
// or a link to the trusted file, is not trusted by it.
func TestTrustRecord(t *testing.T) {
	text := "default_scope = \"proj\"\ntimeout = \"5m\"\n"
	f := newFixture(t, "", text)
	trust := func(path string) {
		t.Helper()
		data, sum, err := ReadProjectFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_ = data
		key, err := TrustKey(path)
		if err != nil {
			t.Fatal(err)
		}
		recs, _ := LoadTrust(TrustFilePath(f.dockerDir))
		recs = append(recs, TrustRecord{Path: key, SHA256: sum, TrustedAt: time.Now()})
		if err := SaveTrust(TrustFilePath(f.dockerDir), recs); err != nil {
			t.Fatal(err)
		}
	}
	c := must(t)(f.loadUntrusted(nil))
	if c.DefaultScope != "default" || c.Project.State != TrustStateUntrusted {
		t.Fatalf("before trust: scope %q, %+v", c.DefaultScope, c.Project)
	}
	trust(f.project)
	c = must(t)(f.loadUntrusted(nil))
	if c.DefaultScope != "proj" || c.Timeout != 5*time.Minute || !c.Project.Trusted || c.Project.State != TrustStateTrusted || len(c.Refused) != 0 {
		t.Fatalf("trusted: scope %q, timeout %v, %+v, refused %v", c.DefaultScope, c.Timeout, c.Project, c.Refused)
	}
	if fi, err := os.Stat(TrustFilePath(f.dockerDir)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("trust file mode: %v %v", fi, err)
	}

	// Edited after trust: untrusted again, even by one byte.
	writeFile(t, f.project, text+" ")
	c = must(t)(f.loadUntrusted(nil))
	if c.DefaultScope != "default" || c.Project.Trusted || c.Project.State != TrustStateChanged {
		t.Fatalf("edited: scope %q, %+v", c.DefaultScope, c.Project)
	}
	writeFile(t, f.project, text)
	if c = must(t)(f.loadUntrusted(nil)); c.DefaultScope != "proj" {
		t.Fatalf("restored content: scope %q", c.DefaultScope)
	}

	// A hostile checkout next door with a link to the trusted file, and
	// one with a copy of it: both untrusted.
	for _, mk := range []func(p string) error{
		func(p string) error { return os.Symlink(f.project, p) },
		func(p string) error { return os.WriteFile(p, []byte(text), 0o644) },
	} {
		other := filepath.Join(t.TempDir(), "evil")
		_ = os.MkdirAll(filepath.Join(other, "sub"), 0o755)
		if err := mk(filepath.Join(other, ProjectFileName)); err != nil {
			t.Fatal(err)
		}
		c, err := Load(LoadOptions{DockerConfigDir: f.dockerDir, WorkDir: filepath.Join(other, "sub"), LookupEnv: env(nil)})
		c = mustLoad(t, c, err)
		if c.DefaultScope != "default" || c.Project.Trusted || c.ProjectFile != filepath.Join(other, ProjectFileName) {
			t.Fatalf("%s: scope %q, %+v", c.ProjectFile, c.DefaultScope, c.Project)
		}
	}

	// The trusted folder reached through a link is the same folder.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(f.root, link); err != nil {
		t.Fatal(err)
	}
	c, err := Load(LoadOptions{DockerConfigDir: f.dockerDir, WorkDir: filepath.Join(link, "a"), LookupEnv: env(nil)})
	if c = mustLoad(t, c, err); c.DefaultScope != "proj" {
		t.Errorf("through a link to the trusted folder: scope %q, %+v", c.DefaultScope, c.Project)
	}

	// A corrupt trust file is an error naming it, not silent trust.
	writeFile(t, TrustFilePath(f.dockerDir), "{")
	if _, err := f.loadUntrusted(nil); err == nil || !strings.Contains(err.Error(), TrustFileName) {
		t.Errorf("corrupt trust file: %v", err)
	}
}

// The project file is the one found; a link pointing at a trusted file gets
// trusted only when its own path is.
func TestTrustKey(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	_ = os.MkdirAll(real, 0o755)
	_ = os.Symlink(real, filepath.Join(dir, "alias"))
	_ = os.Symlink(filepath.Join(real, "target.toml"), filepath.Join(real, ProjectFileName))
	got, err := TrustKey(filepath.Join(dir, "alias", ProjectFileName))
	if err != nil {
		t.Fatal(err)
	}
	realDir, _ := filepath.EvalSymlinks(real)
	if want := filepath.Join(realDir, ProjectFileName); got != want {
		t.Errorf("TrustKey = %q, want %q (folder resolved, the link itself kept)", got, want)
	}
}

func TestTrustEnv(t *testing.T) {
	f := newFixture(t, "", "image = \"evil\"\n")
	for v, trusted := range map[string]bool{"1": true, "true": true, "0": false, "": false, "false": false} {
		c := must(t)(f.loadUntrusted(map[string]string{TrustEnv: v}))
		if c.Project.Trusted != trusted || (c.Image == "evil") != trusted {
			t.Errorf("%s=%q: trusted %v, image %q", TrustEnv, v, c.Project.Trusted, c.Image)
		}
		if trusted && c.Project.State != TrustStateEnv {
			t.Errorf("%s=%q: state %q", TrustEnv, v, c.Project.State)
		}
	}
	if _, err := f.loadUntrusted(map[string]string{TrustEnv: "maybe"}); err == nil || !strings.Contains(err.Error(), TrustEnv) {
		t.Errorf("bad %s: %v", TrustEnv, err)
	}
}

// The search stops at the repository root and at $HOME (both still read),
// and before a folder others may write to.
func TestProjectSearchStops(t *testing.T) {
	base := t.TempDir()
	write := func(rel, text string) string {
		p := filepath.Join(base, rel)
		writeFile(t, p, text)
		return p
	}
	above := write("top/"+ProjectFileName, "memory = \"300m\"\n")
	_ = os.MkdirAll(filepath.Join(base, "top/repo/.git"), 0o755)
	_ = os.MkdirAll(filepath.Join(base, "top/repo/a/b"), 0o755)
	_ = os.MkdirAll(filepath.Join(base, "top/home/proj/x"), 0o755)
	_ = os.MkdirAll(filepath.Join(base, "top/plain/a"), 0o755)
	_ = os.MkdirAll(filepath.Join(base, "top/wr/a"), 0o755)
	home := filepath.Join(base, "top/home")
	cases := []struct {
		work, want string
	}{
		{"top/repo/a/b", ""},    // above the git root: not read
		{"top/home/proj/x", ""}, // above $HOME: not read
		{"top/plain/a", above},  // nothing stops the walk
		{"top/wr/a", ""},        // top/wr is world-writable
		{"top", above},          // the working folder itself
		{"top/repo/.git", ""},   // inside .git: its parent is the root
	}
	if err := os.Chmod(filepath.Join(base, "top/wr"), 0o777); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		got, err := FindProjectFile(filepath.Join(base, tc.work), home)
		if err != nil || got != tc.want {
			t.Errorf("from %s: %q, %v; want %q", tc.work, got, err, tc.want)
		}
	}
	// $HOME given through a link (HOME=/home/u with /home -> /usr/home).
	homeLink := filepath.Join(base, "homelink")
	if err := os.Symlink(home, homeLink); err != nil {
		t.Fatal(err)
	}
	if got, _ := FindProjectFile(filepath.Join(base, "top/home/proj/x"), homeLink); got != "" {
		t.Errorf("above $HOME given as a link: %q", got)
	}
	// The root and $HOME themselves are read.
	inRepo := write("top/repo/"+ProjectFileName, "")
	inHome := write("top/home/"+ProjectFileName, "")
	for work, want := range map[string]string{"top/repo/a/b": inRepo, "top/home/proj/x": inHome} {
		if got, _ := FindProjectFile(filepath.Join(base, work), home); got != want {
			t.Errorf("from %s: %q, want %q", work, got, want)
		}
	}
	// A .git file (worktrees, submodules) marks a root too.
	_ = os.MkdirAll(filepath.Join(base, "top/wt/a"), 0o755)
	write("top/wt/.git", "gitdir: /elsewhere\n")
	if got, _ := FindProjectFile(filepath.Join(base, "top/wt/a"), home); got != "" {
		t.Errorf("above a worktree root: %q", got)
	}
	// Through Load, with HOME from the environment: the value is not used.
	c, err := Load(LoadOptions{WorkDir: filepath.Join(base, "top/home/proj/x"), LookupEnv: env(map[string]string{"HOME": home})})
	if c = mustLoad(t, c, err); c.ProjectFile != inHome {
		t.Errorf("Load: project file %q", c.ProjectFile)
	}
	_ = os.Remove(inHome)
	c, err = Load(LoadOptions{WorkDir: filepath.Join(base, "top/home/proj/x"), LookupEnv: env(map[string]string{"HOME": home})})
	if c = mustLoad(t, c, err); c.ProjectFile != "" || c.Memory != GiB {
		t.Errorf("Load above $HOME: project file %q, memory %d", c.ProjectFile, c.Memory)
	}
}

func TestReadProjectFileLimits(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, _, err := ReadProjectFile(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a FIFO was read as a project file")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO project file blocked")
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, MaxProjectFileSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadProjectFile(big); err == nil {
		t.Error("an oversized project file was read")
	}
	// Through Load: an error naming the file, not a hang.
	f := newFixture(t, "", "")
	if err := syscall.Mkfifo(f.project, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.loadUntrusted(nil); err == nil || !strings.Contains(err.Error(), f.project) {
		t.Errorf("FIFO project file: %v", err)
	}
}

// [scope.NAME] tables of an untrusted project file may only narrow the
// scope's egress as the user file gives it.
func TestUntrustedScopeTables(t *testing.T) {
	user := `[scope.u1]
allow = ["pypi.org", "*.example.com"]
allow_ports = [443, 8443]
allow_cidrs = ["10.0.0.0/8"]
`
	project := `[scope.u1]
allow = ["pypi.org", "a.example.com", "*.b.example.com"]
allow_ports = [443]
allow_cidrs = ["10.1.0.0/16"]

[scope.u2]
allow = []

[scope.u3]
allow = ["evil.com"]
`
	f := newFixture(t, user, project)
	c := must(t)(f.loadUntrusted(nil))
	want := map[string]ScopePolicy{
		"u1": {Allow: []string{"pypi.org", "a.example.com", "*.b.example.com"}, AllowPorts: []int{443}, AllowCIDRs: []string{"10.1.0.0/16"},
			Source: Source{Kind: KindProject, File: f.project, Line: 1}},
		"u2": {Allow: []string{}, Source: Source{Kind: KindProject, File: f.project, Line: 6}},
	}
	if d := cmp.Diff(want, c.Scopes); d != "" {
		t.Errorf("narrowing scope tables (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"scope.u3.allow"}, refusedKeys(c)); d != "" {
		t.Errorf("refused (-want +got):\n%s", d)
	}
	if e := entryOf(c, "scope.u1"); !e.Untrusted {
		t.Errorf("scope.u1 entry not marked untrusted: %+v", e)
	}

	widening := []string{
		"[scope.u1]\nallow = [\"*\"]\n",
		"[scope.u1]\nallow = [\"example.com\"]\n", // the apex is not under *.example.com
		"[scope.u1]\nallow = [\"*.com\"]\n",
		"[scope.u1]\nallow = [\"pypi.org.evil.com\"]\n",
		"[scope.u1]\nallow_ports = [22]\n",
		"[scope.u1]\nallow_ports = []\n", // the default ports, 80 among them
		"[scope.u1]\nallow_cidrs = [\"10.0.0.0/7\"]\n",
		"[scope.u1]\nallow_cidrs = [\"192.168.0.1\"]\n",
		"[scope.u1]\nallow_cidrs = [\"::/0\"]\n",
		"[scope.new]\nallow_cidrs = [\"10.0.0.1\"]\n",
		"[scope.new]\nallow_ports = [22]\n",
		"scope.u1.allow = [\"*\"]\n",
		"scope = { u1 = { allow = [\"*\"] } }\n",
	}
	for _, p := range widening {
		f := newFixture(t, user, p)
		c := must(t)(f.loadUntrusted(nil))
		if c.Scopes["u1"].Source.Kind != KindUser || len(c.Refused) != 1 {
			t.Errorf("%q: u1 = %+v, refused %v", p, c.Scopes["u1"], c.Refused)
		}
		if _, ok := c.Scopes["new"]; ok {
			t.Errorf("%q: a refused table made scope new: %+v", p, c.Scopes["new"])
		}
		if d := cmp.Diff(must(t)(Load(LoadOptions{DockerConfigDir: f.dockerDir, WorkDir: t.TempDir(), LookupEnv: env(nil)})).Scopes["u1"], c.Scopes["u1"]); d != "" {
			t.Errorf("%q changed u1 (-user +got):\n%s", p, d)
		}
	}
	// An empty table of an untrusted file is nothing: no policy is made.
	f = newFixture(t, "", "[scope.z]\n")
	if c := must(t)(f.loadUntrusted(nil)); len(c.Scopes) != 0 {
		t.Errorf("empty untrusted table: %+v", c.Scopes)
	}
}

func TestPatternCovered(t *testing.T) {
	cases := []struct {
		base []string
		p    string
		ok   bool
	}{
		{[]string{"*"}, "*", true},
		{[]string{"*.example.com"}, "*", false},
		{[]string{"*.example.com"}, "x.example.com", true},
		{[]string{"*.example.com"}, "*.x.example.com", true},
		{[]string{"*.example.com"}, "example.com", false},
		{[]string{"*.example.com"}, "xexample.com", false},
		{[]string{"*.example.com"}, "*.com", false},
		{[]string{"example.com"}, "example.com", true},
		{[]string{"example.com"}, "*.example.com", false},
		{[]string{"Example.COM"}, "example.com", true},
		{nil, "example.com", false},
	}
	for _, tc := range cases {
		if got := coverHosts(tc.base, []string{tc.p}) == ""; got != tc.ok {
			t.Errorf("%q under %q: %v, want %v", tc.p, tc.base, got, tc.ok)
		}
	}
}

// The README's configuration table states each key's trust rule as the key
// table does.
// deny = [...] in a [scope.NAME] table: the user file's is read as given;
// an untrusted project file may add hosts to it, never stop denying one.
func TestUntrustedScopeDeny(t *testing.T) {
	user := `[scope.u1]
allow = ["*"]
deny = ["*.corp.example", "db.test"]
`
	f := newFixture(t, user, "")
	c := must(t)(f.loadUntrusted(nil))
	if d := cmp.Diff([]string{"*.corp.example", "db.test"}, c.Scopes["u1"].Deny); d != "" {
		t.Errorf("user deny (-want +got):\n%s", d)
	}
	for _, e := range c.Entries() {
		if e.Key == "scope.u1" {
			if d := cmp.Diff([]string{"*.corp.example", "db.test"}, e.Value.(map[string]any)["deny"]); d != "" {
				t.Errorf("config entry's deny (-want +got):\n%s", d)
			}
		}
	}
	for _, tc := range []struct {
		project string
		deny    []string // nil: refused, the user file's stays
	}{
		{"[scope.u1]\ndeny = [\"*.corp.example\", \"db.test\", \"more.test\"]\n", []string{"*.corp.example", "db.test", "more.test"}},
		{"[scope.u1]\ndeny = [\"*.example\", \"db.test\"]\n", []string{"*.example", "db.test"}}, // *.example covers *.corp.example
		{"[scope.u1]\ndeny = [\"db.test\"]\n", nil},
		{"[scope.u1]\ndeny = []\n", nil},
		{"[scope.u1]\ndeny = [\"x.corp.example\", \"db.test\"]\n", nil}, // narrower than *.corp.example
	} {
		f := newFixture(t, user, tc.project)
		c := must(t)(f.loadUntrusted(nil))
		want := tc.deny
		if want == nil {
			want = []string{"*.corp.example", "db.test"}
			if d := cmp.Diff([]string{"scope.u1.deny"}, refusedKeys(c)); d != "" {
				t.Errorf("%q: refused (-want +got):\n%s", tc.project, d)
			}
		} else if len(c.Refused) != 0 {
			t.Errorf("%q: refused %v", tc.project, c.Refused)
		}
		if d := cmp.Diff(want, c.Scopes["u1"].Deny); d != "" {
			t.Errorf("%q: deny (-want +got):\n%s", tc.project, d)
		}
		if d := cmp.Diff([]string{"*"}, c.Scopes["u1"].Allow); d != "" {
			t.Errorf("%q: allow changed (-want +got):\n%s", tc.project, d)
		}
	}
}

func TestReadmeStatesTrustRules(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|[^|\\n]*\\|[^|\\n]*\\| ([^|\\n]+) \\|$")
	got := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		got[m[1]] = strings.TrimSpace(m[2])
	}
	for k, rule := range TrustRules() {
		if got[k] != rule {
			t.Errorf("README: key %s has trust rule %q in the Configuration table, want %q", k, got[k], rule)
		}
	}
}

// An untrusted project file cannot turn the audit trail off, move it,
// shorten its life or thin it; with the user file's audit = false it may
// turn it back on. The environment and a trusted file can do either.
func TestUntrustedProjectKeepsAudit(t *testing.T) {
	f := newFixture(t, "", "audit = false\naudit_dir = \"/tmp/x\"\naudit_retention_days = 1\naudit_max_code = 0\naudit_max_output = 0\n")
	c := must(t)(f.loadUntrusted(nil))
	if !c.Audit || c.AuditDir != "" || c.AuditRetentionDays != 30 || c.AuditMaxCode != 64<<10 || c.AuditMaxOutput != 16<<10 {
		t.Errorf("an untrusted file changed the audit: %+v", c)
	}
	var keys []string
	for _, r := range c.Refused {
		keys = append(keys, r.Key)
	}
	if d := cmp.Diff([]string{"audit", "audit_dir", "audit_retention_days", "audit_max_code", "audit_max_output"}, keys); d != "" {
		t.Errorf("refused (-want +got):\n%s", d)
	}
	f = newFixture(t, "audit = false\n", "audit = true\n")
	if c := must(t)(f.loadUntrusted(nil)); !c.Audit || len(c.Refused) != 0 {
		t.Errorf("turning it on: audit %v, refused %v", c.Audit, c.Refused)
	}
	f = newFixture(t, "", "audit = false\n")
	if c := must(t)(f.load(nil)); c.Audit {
		t.Error("a trusted file could not turn it off")
	}
	if c := must(t)(newFixture(t, "", "").loadUntrusted(map[string]string{"DOCKER_SANDBOX_AUDIT": "false"})); c.Audit {
		t.Error("the environment could not turn it off")
	}
	if _, err := newFixture(t, "", "").loadUntrusted(map[string]string{"DOCKER_SANDBOX_AUDIT_DIR": "rel/dir"}); err == nil {
		t.Error("a relative audit_dir: no error")
	}
}
