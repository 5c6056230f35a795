package plugin_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
)

type configOut struct {
	Files  map[string]string `json:"files"`
	Values map[string]struct {
		Value     any    `json:"value"`
		Source    string `json:"source"`
		Untrusted bool   `json:"untrusted"`
	} `json:"values"`
	Project *struct {
		File    string `json:"file"`
		Trusted bool   `json:"trusted"`
		State   string `json:"state"`
		SHA256  string `json:"sha256"`
	} `json:"project"`
	Refused []struct {
		Key    string `json:"key"`
		Value  string `json:"value"`
		Source string `json:"source"`
		Reason string `json:"reason"`
	} `json:"refused"`
}

// Precedence: flags > environment > project file > user file > defaults,
// each value with its source. The project file is untrusted: its values
// narrow the user file's, so they apply (trust has its own tests below).
func TestConfigPrecedence(t *testing.T) {
	needE2E(t)
	cfg := privateConfig(t)
	userFile := filepath.Join(cfg, "sandbox", "config.toml")
	_ = os.MkdirAll(filepath.Dir(userFile), 0o755)
	_ = os.WriteFile(userFile, []byte("# user\ntimeout = \"11s\"\nmemory = \"500m\"\npids = 200\ncpus = 0.5\n"), 0o644)
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
	if !c.Values["memory"].Untrusted || c.Values["timeout"].Untrusted {
		t.Errorf("untrusted marks: memory %v, timeout %v", c.Values["memory"].Untrusted, c.Values["timeout"].Untrusted)
	}
	if c.Project == nil || c.Project.Trusted || c.Project.State != "untrusted" || len(c.Refused) != 0 {
		t.Errorf("project %+v, refused %+v", c.Project, c.Refused)
	}
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

// writeUserConfig writes the user file of a private Docker config.
func writeUserConfig(t *testing.T, cfg, text string) string {
	t.Helper()
	p := filepath.Join(cfg, "sandbox", "config.toml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeText(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sandboxOf inspects the container of a scope on the engine.
func sandboxOf(t *testing.T, scope string) container.InspectResponse {
	t.Helper()
	c, err := engine(t).ContainerInspect(context.Background(), "docker-sandbox-"+scope)
	if err != nil {
		t.Fatalf("the sandbox of scope %s: %v", scope, err)
	}
	return c
}

// testNetwork makes a network for a test and removes it when the test ends
// (also its containers). No test-run label unless labels has one: the
// label would itself make the network one the plugin refuses.
func testNetwork(t *testing.T, name string, labels map[string]string) network.CreateResponse {
	t.Helper()
	ctx := context.Background()
	cli := engine(t)
	n, err := cli.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Internal: true, Labels: labels})
	if err != nil {
		t.Fatalf("network %s: %v", name, err)
	}
	t.Cleanup(func() {
		if ni, err := cli.NetworkInspect(ctx, n.ID, network.InspectOptions{}); err == nil {
			for id := range ni.Containers {
				_ = cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
			}
		}
		if err := cli.NetworkRemove(ctx, n.ID); err != nil {
			t.Logf("cleanup: network %s: %v", name, err)
		}
	})
	return n
}

// attached returns the names of the containers on a network.
func attached(t *testing.T, id string) []string {
	t.Helper()
	ni, err := engine(t).NetworkInspect(context.Background(), id, network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, c := range ni.Containers {
		out = append(out, c.Name)
	}
	sort.Strings(out)
	return out
}

// The reviewer's case: a .docker-sandbox.toml two folders up sets the
// scope, a 24 h timeout and another scope's network. The exec must run in
// the user's scope, under the user's timeout, with no network, and the
// other scope's service must stay out of reach; with the project file
// trusted, the network is refused outright.
func TestConfigUntrustedProjectReviewerCase(t *testing.T) {
	needE2E(t)
	needBusybox(t)
	ctx := context.Background()
	cli := engine(t)
	cfg := privateConfig(t)
	mine, victim := newScope(t), newScope(t)
	writeUserConfig(t, cfg, fmt.Sprintf("default_scope = %q\ntimeout = \"3s\"\n", mine))

	// The other scope's network, as the egress code makes it, and a
	// service on it standing in for that scope's sandbox.
	netName := "docker-sandbox.net." + victim
	labels := map[string]string{"com.docker.sandbox.managed": "true", "com.docker.sandbox.kind": "network", "com.docker.sandbox.scope": victim}
	if id := os.Getenv("DOCKER_SANDBOX_TEST_RUN"); id != "" {
		labels["com.docker.sandbox.test-run"] = id
	}
	n := testNetwork(t, netName, labels)
	svcLabels := map[string]string{} // not counted as the victim's sandbox by objects()
	if id := os.Getenv("DOCKER_SANDBOX_TEST_RUN"); id != "" {
		svcLabels["com.docker.sandbox.test-run"] = id
	}
	svc, err := cli.ContainerCreate(ctx, &container.Config{Image: busybox, Labels: svcLabels,
		Cmd: []string{"sh", "-c", "mkdir -p /tmp/w && echo VICTIM-SECRET > /tmp/w/index.html && exec httpd -f -p 8080 -h /tmp/w"}},
		&container.HostConfig{NetworkMode: container.NetworkMode(netName)}, nil, nil, "cfg-victim-"+victim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.ContainerRemove(ctx, svc.ID, container.RemoveOptions{Force: true}) })
	if err := cli.ContainerStart(ctx, svc.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	si, err := cli.ContainerInspect(ctx, svc.ID)
	if err != nil || si.NetworkSettings.Networks[netName] == nil {
		t.Fatalf("victim service: %v", err)
	}
	ip := si.NetworkSettings.Networks[netName].IPAddress
	// Positive control: whatever joins that network reaches the service.
	probe, err := cli.ContainerCreate(ctx, &container.Config{Image: busybox, Labels: svcLabels,
		Cmd: []string{"sh", "-c", "for i in $(seq 50); do printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 " + ip + " 8080 | grep -q VICTIM-SECRET && exit 0; sleep 0.2; done; exit 1"}},
		&container.HostConfig{NetworkMode: container.NetworkMode(netName)}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.ContainerRemove(ctx, probe.ID, container.RemoveOptions{Force: true}) })
	if err := cli.ContainerStart(ctx, probe.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	wc, errc := cli.ContainerWait(ctx, probe.ID, container.WaitConditionNotRunning)
	select {
	case w := <-wc:
		if w.StatusCode != 0 {
			t.Fatalf("control: a container on %s does not reach the service (exit %d)", netName, w.StatusCode)
		}
	case err := <-errc:
		t.Fatal(err)
	}
	_ = cli.ContainerRemove(ctx, probe.ID, container.RemoveOptions{Force: true})

	root := t.TempDir()
	work := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	projFile := filepath.Join(root, ".docker-sandbox.toml")
	writeText(t, projFile, fmt.Sprintf("default_scope = %q\ntimeout = \"24h\"\nmax_timeout = \"24h\"\nnetwork = %q\n", victim, netName))
	env := []string{"DOCKER_CONFIG=" + cfg}
	code := "ls /sys/class/net | tr '\\n' ' '; echo\n" +
		"if exec 3<>/dev/tcp/" + ip + "/8080; then printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3; else echo CONNECT-FAILED; fi\n" +
		"sleep 20; echo SLEPT\n"
	r := sbRun(t, run{env: env, dir: work, args: []string{"exec", "--format", "json", "--lang", "bash", "-c", code}})
	wantCode(t, r, 124)
	j := decodeExec(t, r)
	if j.Scope != mine || !j.TimedOut || strings.Contains(j.Stdout, "SLEPT") {
		t.Errorf("ran in scope %q (want %q), timed out %v: the project's scope or timeout took effect:\n%s", j.Scope, mine, j.TimedOut, r)
	}
	if strings.Contains(j.Stdout, "VICTIM-SECRET") || !strings.Contains(j.Stdout, "CONNECT-FAILED") || strings.TrimSpace(strings.Split(j.Stdout, "\n")[0]) != "lo" {
		t.Errorf("the sandbox had a network or reached the other scope's service:\n%s", j.Stdout)
	}
	for _, k := range []string{"default_scope", "timeout", "max_timeout", "network", "config trust " + projFile} {
		if !strings.Contains(r.Stderr, k) {
			t.Errorf("the warning does not name %q:\n%s", k, r.Stderr)
		}
	}
	// On the engine: the user's scope, no network; nothing of the victim's.
	ctr := sandboxOf(t, mine)
	if ctr.HostConfig.NetworkMode != "none" || ctr.NetworkSettings.Networks[netName] != nil || ctr.Config.Labels["com.docker.sandbox.scope"] != mine {
		t.Errorf("sandbox network %q, networks %v, scope %q", ctr.HostConfig.NetworkMode, ctr.NetworkSettings.Networks, ctr.Config.Labels["com.docker.sandbox.scope"])
	}
	if c, v := objects(t, victim); c != 0 || v != 0 {
		t.Errorf("the project file made %d containers and %d volumes of scope %s", c, v, victim)
	}
	if got := attached(t, n.ID); len(got) != 1 {
		t.Errorf("containers on %s: %v, want only the service", netName, got)
	}
	// config shows what was ignored.
	r = sbRun(t, run{env: env, dir: work, args: []string{"config", "--format", "json"}})
	wantCode(t, r, 0)
	var c configOut
	if err := json.Unmarshal([]byte(r.Stdout), &c); err != nil {
		t.Fatal(err)
	}
	keys := []string{}
	for _, x := range c.Refused {
		keys = append(keys, x.Key)
	}
	if c.Project == nil || c.Project.Trusted || strings.Join(keys, ",") != "default_scope,timeout,max_timeout,network" ||
		c.Values["network"].Value != "none" || c.Values["default_scope"].Value != mine {
		t.Errorf("config: project %+v, refused %v, network %v, scope %v", c.Project, keys, c.Values["network"].Value, c.Values["default_scope"].Value)
	}

	// Trusted (CI's DOCKER_SANDBOX_TRUST_PROJECT=1): the scope would apply,
	// but another scope's network is refused from any source.
	r = sbRun(t, run{env: append(env, "DOCKER_SANDBOX_TRUST_PROJECT=1"), dir: work, args: []string{"exec", "--format", "json", "-c", "echo ran"}})
	wantCode(t, r, 125)
	if e := decodeErr(t, r); e.Error.Code != "bad_config" || !strings.Contains(e.Error.Message, netName) || !strings.Contains(e.Error.Message, "refused") {
		t.Errorf("error %+v", e.Error)
	}
	if c, v := objects(t, victim); c != 0 || v != 0 {
		t.Errorf("a refused network left %d containers and %d volumes of scope %s", c, v, victim)
	}
	if got := attached(t, n.ID); len(got) != 1 {
		t.Errorf("containers on %s: %v, want only the service", netName, got)
	}
}

// Where the project file search reads and where it stops, by effect: a
// narrowing memory of 300m in the project file is the sandbox's limit only
// when the file is read.
func TestConfigProjectFileSearch(t *testing.T) {
	needE2E(t)
	cfg := privateConfig(t)
	const memProbe = "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max"
	const narrowed, dflt = "314572800", "1073741824"
	root := t.TempDir()
	writeText(t, filepath.Join(root, ".docker-sandbox.toml"), "memory = \"300m\"\n")
	for _, d := range []string{"a/b", "repo/.git", "repo/sub", "home/proj", "ww/x"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "ww"), 0o777); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, dir, home, want string
	}{
		{"in the working folder", "", "", narrowed},
		{"two folders up", "a/b", "", narrowed},
		{"above the git root", "repo/sub", "", dflt},
		{"above $HOME", "home/proj", filepath.Join(root, "home"), dflt},
		{"above a world-writable folder", "ww/x", "", dflt},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			env := []string{"DOCKER_CONFIG=" + cfg}
			if tc.home != "" {
				env = append(env, "HOME="+tc.home)
			}
			scope := newScope(t)
			r := sbRun(t, run{env: env, dir: filepath.Join(root, tc.dir), args: []string{"exec", "--rm", "-s", scope, "-c", memProbe}})
			wantCode(t, r, 0)
			if got := strings.TrimSpace(r.Stdout); got != tc.want {
				t.Errorf("memory limit %s, want %s:\n%s", got, tc.want, r)
			}
		})
	}
}

// config trust: by path and content hash; an edit, a link to the trusted
// file or a revoke make it untrusted; DOCKER_SANDBOX_TRUST_PROJECT=1 trusts
// any. The effect checked is the scope the exec ran in.
func TestConfigTrust(t *testing.T) {
	needE2E(t)
	cfg := privateConfig(t)
	mine, theirs := newScope(t), newScope(t)
	writeUserConfig(t, cfg, fmt.Sprintf("default_scope = %q\n", mine))
	env := []string{"DOCKER_CONFIG=" + cfg}
	proj := filepath.Join(t.TempDir(), "proj")
	projFile := filepath.Join(proj, ".docker-sandbox.toml")
	text := fmt.Sprintf("default_scope = %q\n", theirs)
	writeText(t, projFile, text)
	hostile := filepath.Join(t.TempDir(), "hostile")
	if err := os.MkdirAll(hostile, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(projFile, filepath.Join(hostile, ".docker-sandbox.toml")); err != nil {
		t.Fatal(err)
	}
	scopeIn := func(dir string, extra ...string) string {
		t.Helper()
		r := sbRun(t, run{env: append(append([]string{}, env...), extra...), dir: dir, args: []string{"exec", "--format", "json", "-c", "echo ran"}})
		wantCode(t, r, 0)
		j := decodeExec(t, r)
		if ctr := sandboxOf(t, j.Scope); ctr.Config.Labels["com.docker.sandbox.scope"] != j.Scope {
			t.Fatalf("sandbox of %s has scope label %q", j.Scope, ctr.Config.Labels["com.docker.sandbox.scope"])
		}
		return j.Scope
	}
	state := func(dir string) string {
		t.Helper()
		r := sbRun(t, run{env: env, dir: dir, args: []string{"config", "--format", "json"}})
		wantCode(t, r, 0)
		var c configOut
		if err := json.Unmarshal([]byte(r.Stdout), &c); err != nil || c.Project == nil {
			t.Fatalf("config: %v\n%s", err, r)
		}
		return c.Project.State
	}
	trustFile := filepath.Join(cfg, "sandbox", "trust.json")

	if s := scopeIn(proj); s != mine {
		t.Fatalf("untrusted: ran in %s, want %s", s, mine)
	}
	if c, _ := objects(t, theirs); c != 0 {
		t.Fatalf("untrusted project file made a sandbox of scope %s", theirs)
	}

	// Bad input first: nothing is written.
	for _, tc := range []struct {
		args []string
		code string
	}{
		{[]string{"config", "trust", "--format", "json", filepath.Join(proj, "nope", ".docker-sandbox.toml")}, "file_not_found"},
		{[]string{"config", "trust", "--format", "json", filepath.Join(proj, "other.toml")}, "bad_flag"},
		{[]string{"config", "trust", "--format", "json", "a", "b"}, "bad_flag"},
		{[]string{"config", "trust", "--format", "json", "--list", projFile}, "bad_flag"},
	} {
		r := sbRun(t, run{env: env, dir: proj, args: tc.args})
		wantCode(t, r, 125)
		if e := decodeErr(t, r); e.Error.Code != tc.code {
			t.Errorf("%v: code %q, want %q", tc.args, e.Error.Code, tc.code)
		}
	}
	if _, err := os.Stat(trustFile); err == nil {
		t.Fatalf("bad input wrote %s", trustFile)
	}
	r := sbRun(t, run{env: env, dir: t.TempDir(), args: []string{"config", "trust"}})
	wantCode(t, r, 125)

	// Trust (FILE: the one found from here).
	r = sbRun(t, run{env: env, dir: proj, args: []string{"config", "trust", "--format", "json"}})
	wantCode(t, r, 0)
	var tj struct {
		File    string   `json:"file"`
		SHA256  string   `json:"sha256"`
		Trusted bool     `json:"trusted"`
		Keys    []string `json:"keys"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &tj); err != nil {
		t.Fatal(err)
	}
	realProj, _ := filepath.EvalSymlinks(proj)
	sum := sha256.Sum256([]byte(text))
	if tj.File != filepath.Join(realProj, ".docker-sandbox.toml") || tj.SHA256 != hex.EncodeToString(sum[:]) || !tj.Trusted || strings.Join(tj.Keys, ",") != "default_scope" {
		t.Errorf("trust: %+v", tj)
	}
	if fi, err := os.Stat(trustFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("trust file: %v %v", fi, err)
	}
	if s := scopeIn(proj); s != theirs {
		t.Fatalf("trusted: ran in %s, want %s", s, theirs)
	}
	if st := state(proj); st != "trusted" {
		t.Errorf("state %q", st)
	}
	// A hostile folder with a link to the trusted file: not trusted.
	if s := scopeIn(hostile); s != mine {
		t.Errorf("a link to a trusted file: ran in %s, want %s", s, mine)
	}
	if st := state(hostile); st != "untrusted" {
		t.Errorf("link: state %q", st)
	}
	// ... unless the environment trusts every project file.
	if s := scopeIn(hostile, "DOCKER_SANDBOX_TRUST_PROJECT=1"); s != theirs {
		t.Errorf("DOCKER_SANDBOX_TRUST_PROJECT=1: ran in %s, want %s", s, theirs)
	}

	// Edited after trust: untrusted again.
	writeText(t, projFile, text+"# edited\n")
	r = sbRun(t, run{env: env, dir: proj, args: []string{"exec", "--format", "json", "-c", "echo ran"}})
	wantCode(t, r, 0)
	if j := decodeExec(t, r); j.Scope != mine || !strings.Contains(r.Stderr, "changed since it was trusted") {
		t.Errorf("edited: ran in %s (want %s):\n%s", j.Scope, mine, r.Stderr)
	}
	if st := state(proj); st != "changed" {
		t.Errorf("edited: state %q", st)
	}
	r = sbRun(t, run{env: env, dir: proj, args: []string{"config", "trust", "--list", "--format", "json"}})
	wantCode(t, r, 0)
	var lj struct {
		Files []struct {
			File  string `json:"file"`
			State string `json:"state"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &lj); err != nil || len(lj.Files) != 1 || lj.Files[0].State != "changed" {
		t.Errorf("list: %v %+v", err, lj)
	}
	// Trust again, then revoke.
	wantCode(t, sbRun(t, run{env: env, dir: proj, args: []string{"config", "trust", projFile}}), 0)
	if s := scopeIn(proj); s != theirs {
		t.Errorf("trusted again: ran in %s", s)
	}
	r = sbRun(t, run{env: env, dir: proj, args: []string{"config", "trust", "--revoke"}})
	wantCode(t, r, 0)
	if s := scopeIn(proj); s != mine {
		t.Errorf("revoked: ran in %s, want %s", s, mine)
	}
}

// A named network is refused when it is one of the plugin's, whatever sets
// it and however it is named (name, ID, ID prefix); a network of the user's
// that copied the plugin's label is refused too. Nothing is created, nothing
// joins the network.
func TestConfigNamedNetworkRefused(t *testing.T) {
	needE2E(t)
	cfg := privateConfig(t)
	rid := randID(4)
	nsNet := testNetwork(t, "docker-sandbox.net.cfg"+rid, nil)
	sbNet := testNetwork(t, "docker-sandbox-cfg"+rid, nil)
	copied := testNetwork(t, "user-net-"+rid, map[string]string{"com.docker.sandbox.scope": "cfg" + rid})
	plain := testNetwork(t, "user-plain-"+rid, nil)
	names := map[string]string{nsNet.ID: "docker-sandbox.net.cfg" + rid, sbNet.ID: "docker-sandbox-cfg" + rid, copied.ID: "user-net-" + rid}
	scope := newScope(t)
	root := t.TempDir()
	projFile := filepath.Join(root, ".docker-sandbox.toml")
	for id, name := range names {
		for _, v := range []string{name, id, id[:12], strings.ToUpper(name[:1]) + name[1:]} {
			if v != name && strings.HasPrefix(v, "U") {
				continue // a case variant only for the namespaced names
			}
			for _, src := range []string{"flag", "env", "user", "project"} {
				env := []string{"DOCKER_CONFIG=" + cfg}
				args := []string{"exec", "--format", "json", "-s", scope}
				_ = os.Remove(projFile)
				writeUserConfig(t, cfg, "")
				want := "bad_config"
				switch src {
				case "flag":
					args, want = append(args, "--network", v), "bad_flag"
				case "env":
					env = append(env, "DOCKER_SANDBOX_NETWORK="+v)
				case "user":
					writeUserConfig(t, cfg, fmt.Sprintf("network = %q\n", v))
				case "project":
					writeText(t, projFile, fmt.Sprintf("network = %q\n", v))
					env = append(env, "DOCKER_SANDBOX_TRUST_PROJECT=1")
				}
				r := sbRun(t, run{env: env, dir: root, args: append(args, "-c", "echo ran")})
				if r.Code != 125 {
					t.Errorf("%s %q: exit %d, want 125:\n%s", src, v, r.Code, r)
					continue
				}
				if e := decodeErr(t, r); e.Error.Code != want || !strings.Contains(e.Error.Message, "refused") {
					t.Errorf("%s %q: error %+v, want code %s", src, v, e.Error, want)
				}
				if c, vols := objects(t, scope); c != 0 || vols != 0 {
					t.Fatalf("%s %q: %d containers, %d volumes left", src, v, c, vols)
				}
			}
		}
		if got := attached(t, id); len(got) != 0 {
			t.Errorf("network %s has containers: %v", name, got)
		}
	}
	writeUserConfig(t, cfg, "")
	_ = os.Remove(projFile)
	// cp and files create sandboxes with the configured network too.
	src := filepath.Join(t.TempDir(), "f.txt")
	writeText(t, src, "x")
	for _, v := range []string{copied.ID[:12], "host", "container:" + copied.ID} {
		r := sbRun(t, run{env: []string{"DOCKER_CONFIG=" + cfg, "DOCKER_SANDBOX_NETWORK=" + v}, dir: root, args: []string{"cp", "--format", "json", src, scope + ":f.txt"}})
		wantCode(t, r, 125)
		if e := decodeErr(t, r); e.Error.Code != "bad_config" {
			t.Errorf("cp with network %q: %+v", v, e.Error)
		}
		if c, vols := objects(t, scope); c != 0 || vols != 0 {
			t.Fatalf("cp with network %q: %d containers, %d volumes left", v, c, vols)
		}
	}
	// files and shell too (shell checks before it needs a terminal).
	netEnv := []string{"DOCKER_CONFIG=" + cfg, "DOCKER_SANDBOX_NETWORK=" + copied.ID[:12]}
	r := sbRun(t, run{env: netEnv, dir: root, args: []string{"files", "ls", "--format", "json", scope + ":/opt/workspace"}})
	wantCode(t, r, 125)
	if e := decodeErr(t, r); e.Error.Code != "bad_config" || !strings.Contains(e.Error.Message, "refused") {
		t.Errorf("files with a refused network: %+v", e.Error)
	}
	r = sbRun(t, run{env: netEnv, dir: root, args: []string{"shell", scope}})
	wantCode(t, r, 125)
	if !strings.Contains(r.Stderr, "refused") || !strings.Contains(r.Stderr, "com.docker.sandbox.scope") {
		t.Errorf("shell with a refused network:\n%s", r)
	}
	if c, vols := objects(t, scope); c != 0 || vols != 0 {
		t.Fatalf("files/shell: %d containers, %d volumes left", c, vols)
	}
	// Control: a network of the user's, by name and by ID prefix, is joined.
	for i, v := range []string{plain.ID[:12], "user-plain-" + rid} {
		s := scope
		if i > 0 {
			s = newScope(t)
		}
		r := sbRun(t, run{env: []string{"DOCKER_CONFIG=" + cfg}, dir: root, args: []string{"exec", "--rm", "-s", s, "--network", v, "-c", "ls /sys/class/net | grep -vx lo | wc -l"}})
		wantCode(t, r, 0)
		if strings.TrimSpace(r.Stdout) != "1" {
			t.Errorf("--network %s: interfaces besides lo: %s", v, r)
		}
	}
}
