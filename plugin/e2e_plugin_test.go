package plugin_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sbplugin "github.com/docker-sandbox/docker-sandbox/plugin"
)

// privateConfig makes a Docker config folder with only our plugin in it.
func privateConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "cli-plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(pluginBin, filepath.Join(dir, "cli-plugins", "docker-sandbox")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestPluginListedAndHelp(t *testing.T) {
	needE2E(t)
	out, err := osexec.Command("docker", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("docker --help: %v\n%s", err, out)
	}
	found := false
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.TrimSuffix(f[0], "*") == "sandbox" && strings.Contains(line, "hardened") {
			found = true
		}
	}
	if !found {
		t.Fatalf("docker --help does not list the sandbox plugin with its description:\n%s", out)
	}
	r := sb(t, "--help")
	wantCode(t, r, 0)
	for _, want := range []string{"exec", "version", "config", "images"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("docker sandbox --help lacks %q:\n%s", want, r.Stdout)
		}
	}
	r = sb(t, "exec", "--help")
	wantCode(t, r, 0)
	for _, want := range []string{"--lang", "--scope", "--session", "--timeout", "--rm", "--max-output", "--runtime", "--env-file", "--workdir"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("exec --help lacks %s", want)
		}
	}
}

// The metadata call runs on every `docker --help`: it must not read the
// Docker config, the plugin's config or touch the engine.
func TestPluginMetadataNoIO(t *testing.T) {
	needE2E(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cfg")
	_ = os.MkdirAll(filepath.Join(cfg, "sandbox"), 0o755)
	// Unparsable files: reading any of them would fail the call.
	_ = os.WriteFile(filepath.Join(cfg, "config.json"), []byte("{not json"), 0o644)
	_ = os.WriteFile(filepath.Join(cfg, "sandbox", "config.toml"), []byte("= broken"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, ".docker-sandbox.toml"), []byte("= broken"), 0o644)
	cmd := osexec.Command(pluginBin, "docker-cli-plugin-metadata")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+cfg, "DOCKER_HOST=unix:///nonexistent.sock", "DOCKER_CONTEXT=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	var md map[string]any
	if err := json.Unmarshal(out, &md); err != nil {
		t.Fatalf("metadata is not JSON: %v\n%s", err, out)
	}
	if md["SchemaVersion"] != "0.1.0" || md["Vendor"] != "docker-sandbox project" || md["ShortDescription"] == "" {
		t.Fatalf("metadata: %v", md)
	}
	// The fast path (internal/pluginmeta) answers before the heavy
	// packages start (gRPC, OpenTelemetry, protobuf, docker/cli, regexp),
	// with the bytes docker/cli's plugin.RunPlugin prints for Metadata().
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "     ")
	if err := enc.Encode(sbplugin.Metadata()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, want.Bytes()) {
		t.Errorf("metadata:\n got %q\nwant %q", out, want.Bytes())
	}
	cmd = osexec.Command(pluginBin, "docker-cli-plugin-metadata")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+cfg, "DOCKER_HOST=unix:///nonexistent.sock", "DOCKER_CONTEXT=", "GODEBUG=inittrace=1")
	var fast strings.Builder
	cmd.Stderr = &fast
	if err := cmd.Run(); err != nil {
		t.Fatalf("metadata: %v", err)
	}
	inits := 0
	for _, line := range strings.Split(fast.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "init" {
			continue
		}
		inits++
		for _, heavy := range []string{"github.com/docker/", "github.com/docker-sandbox/", "go.opentelemetry.io/", "google.golang.org/protobuf", "golang.org/x/", "regexp", "github.com/spf13/"} {
			if strings.HasPrefix(f[1], heavy) {
				t.Errorf("the metadata call initialised %s before it answered", f[1])
			}
		}
	}
	if inits > 40 {
		t.Errorf("the metadata call initialised %d packages before it answered (the fast path runs after os):\n%s", inits, fast.String())
	}

	// Cheap as well on the full path (the cobra tree answers the call
	// when it has other arguments): the project's packages do next to no
	// work at start (a regexp with a bounded repetition, compiled in a
	// package variable, once cost 450 kB and 6,000 allocations on every
	// call).
	cmd = osexec.Command(pluginBin, "docker-cli-plugin-metadata", "full-path")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+cfg, "DOCKER_HOST=unix:///nonexistent.sock", "DOCKER_CONTEXT=", "GODEBUG=inittrace=1")
	var trace strings.Builder
	cmd.Stderr = &trace
	full, err := cmd.Output()
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	if !bytes.Equal(full, want.Bytes()) {
		t.Errorf("metadata through the cobra tree:\n got %q\nwant %q", full, want.Bytes())
	}
	n := 0
	for _, line := range strings.Split(trace.String(), "\n") {
		// init PKG @T ms, D ms clock, B bytes, A allocs
		f := strings.Fields(line)
		if len(f) < 10 || f[0] != "init" || !strings.HasPrefix(f[1], "github.com/docker-sandbox/docker-sandbox/") {
			continue
		}
		n++
		var bytes int
		if _, err := fmt.Sscan(f[7], &bytes); err != nil || bytes > 100_000 {
			t.Errorf("package %s allocates %s bytes at start", f[1], f[7])
		}
	}
	if n == 0 {
		t.Errorf("no init trace of the project's packages:\n%s", trace.String())
	}
}

type versionOut struct {
	Plugin struct {
		Version string `json:"version"`
	} `json:"plugin"`
	Context string `json:"context"`
	Host    string `json:"host"`
	Engine  *struct {
		APIVersion string `json:"api_version"`
	} `json:"engine"`
}

func decodeVersion(t *testing.T, r result) versionOut {
	t.Helper()
	wantCode(t, r, 0)
	var v versionOut
	if err := json.Unmarshal([]byte(r.Stdout), &v); err != nil || v.Engine == nil {
		t.Fatalf("version --format json: %v\n%s", err, r)
	}
	return v
}

// tcpForward starts socat: a loopback TCP listener forwarding to the
// engine's socket, as a second way to reach the same engine.
func tcpForward(t *testing.T) string {
	t.Helper()
	if _, err := osexec.LookPath("socat"); err != nil {
		t.Fatalf("socat is needed for the second-context test (scripts/test.sh installs it): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	sock := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		sock = strings.TrimPrefix(h, "unix://")
	}
	// -t: after one side half-closes (the exec stdin EOF), keep the other
	// direction open long enough for the answer (socat closes after 0.5 s).
	cmd := osexec.Command("socat", "-t", "120", fmt.Sprintf("TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork", port), "UNIX-CONNECT:"+sock)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	poll(t, 10*time.Second, func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
	return "tcp://" + addr
}

// The plugin reuses the CLI's context: --context, -H, DOCKER_HOST and
// DOCKER_CONTEXT all reach the plugin, and version says which was used.
func TestPluginContextReuse(t *testing.T) {
	needE2E(t)
	host := tcpForward(t)
	cfg := privateConfig(t)
	env := []string{"DOCKER_CONFIG=" + cfg}
	// `docker context create` in the private config.
	cmd := osexec.Command("docker", "context", "create", "sbtest", "--docker", "host="+host)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker context create: %v\n%s", err, out)
	}

	v := decodeVersion(t, sbRun(t, run{env: env, args: []string{"version", "--format", "json"}}))
	if v.Context != "default" {
		t.Errorf("without flags, context = %q, want default", v.Context)
	}
	v = decodeVersion(t, sbRun(t, run{env: env, global: []string{"--context", "sbtest"}, args: []string{"version", "--format", "json"}}))
	if v.Context != "sbtest" || v.Host != host {
		t.Errorf("--context sbtest: context %q host %q, want sbtest %s", v.Context, v.Host, host)
	}
	v = decodeVersion(t, sbRun(t, run{env: append(env, "DOCKER_CONTEXT=sbtest"), args: []string{"version", "--format", "json"}}))
	if v.Context != "sbtest" || v.Host != host {
		t.Errorf("DOCKER_CONTEXT=sbtest: context %q host %q", v.Context, v.Host)
	}
	v = decodeVersion(t, sbRun(t, run{env: env, global: []string{"-H", host}, args: []string{"version", "--format", "json"}}))
	if v.Host != host {
		t.Errorf("-H %s: host %q", host, v.Host)
	}
	v = decodeVersion(t, sbRun(t, run{env: append(env, "DOCKER_HOST="+host), args: []string{"version", "--format", "json"}}))
	if v.Host != host {
		t.Errorf("DOCKER_HOST=%s: host %q", host, v.Host)
	}
	// Standalone, with the same global flags.
	v = decodeVersion(t, sbRun(t, run{env: env, standalone: true, global: []string{"--context", "sbtest"}, args: []string{"version", "--format", "json"}}))
	if v.Context != "sbtest" || v.Host != host {
		t.Errorf("standalone --context sbtest: context %q host %q", v.Context, v.Host)
	}
	// A real exec through the TCP context.
	scope := newScope(t)
	r := sbRun(t, run{env: env, global: []string{"--context", "sbtest"}, stdin: strings.NewReader("print(6*7)"), args: []string{"exec", "-s", scope, "--lang", "python"}})
	wantCode(t, r, 0)
	if strings.TrimSpace(r.Stdout) != "42" {
		t.Fatalf("exec through the tcp context: %s", r)
	}
	// And a broken context is an engine error, not a silent fallback.
	r = sbRun(t, run{env: env, global: []string{"-H", "tcp://127.0.0.1:1"}, args: []string{"exec", "-s", scope, "--format", "json", "-c", "true"}})
	wantCode(t, r, 125)
	if e := decodeErr(t, r); e.Error.Code != "engine_unreachable" {
		t.Fatalf("unreachable -H: %+v", e)
	}
}

// The standalone binary behaves as the plugin does.
func TestPluginStandalone(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	a := sbRun(t, run{args: []string{"exec", "-s", scope, "--format", "json", "-c", "echo hi; exit 3"}})
	b := sbRun(t, run{standalone: true, args: []string{"exec", "-s", scope, "--format", "json", "-c", "echo hi; exit 3"}})
	wantCode(t, a, 3)
	wantCode(t, b, 3)
	ja, jb := decodeExec(t, a), decodeExec(t, b)
	if ja.Stdout != "hi\n" || jb.Stdout != "hi\n" || ja.Container != jb.Container {
		t.Fatalf("plugin and standalone differ:\n%+v\n%+v", ja, jb)
	}
	r := sbRun(t, run{standalone: true, args: []string{"--help"}})
	wantCode(t, r, 0)
	if !strings.Contains(r.Stdout, "exec") {
		t.Fatalf("standalone --help: %s", r)
	}
}

// Shell completion reaches the plugin through the docker CLI's own
// completion (docker __complete sandbox ...), through the standalone
// binary's __complete, and through the script `completion bash` prints,
// run by bash: scopes and sessions from the engine, languages.
func TestPluginCompletion(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	wantCode(t, sb(t, "exec", "-s", scope, "--session", "chat", "-c", "true"), 0)
	lines := func(args []string, out []byte, err error) ([]string, string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		ls := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		var names []string
		for _, l := range ls[:len(ls)-1] {
			n, _, _ := strings.Cut(l, "\t")
			names = append(names, n)
		}
		return names, ls[len(ls)-1]
	}
	// The docker CLI's completion, as `docker sandbox inspect <TAB>`.
	args := []string{"__complete", "sandbox", "inspect", scope}
	out, err := osexec.Command("docker", args...).Output()
	names, directive := lines(args, out, err)
	if strings.Join(names, " ") != scope+" "+scope+"/chat" || directive != ":4" {
		t.Errorf("docker %v: %q %s", args, names, directive)
	}
	args = []string{"__complete", "sandbox", "exec", "-s", scope, "--session", ""}
	out, err = osexec.Command("docker", args...).Output()
	if names, _ := lines(args, out, err); strings.Join(names, " ") != "chat" {
		t.Errorf("docker %v: %q", args, names)
	}
	// `docker sandbox __complete ...` (the plugin's own __complete).
	r0 := sb(t, "__complete", "inspect", scope+"/")
	wantCode(t, r0, 0)
	if names, _ := lines(args, []byte(r0.Stdout), nil); strings.Join(names, " ") != scope+"/chat" {
		t.Errorf("docker sandbox __complete inspect %s/: %q", scope, names)
	}
	// The standalone binary.
	args = []string{"__complete", "exec", "--lang", ""}
	out, err = osexec.Command(pluginBin, args...).Output()
	if names, _ := lines(args, out, err); strings.Join(names, " ") != "python node bash sh" {
		t.Errorf("docker-sandbox %v: %q", args, names)
	}
	// The bash script, run by bash, as `docker-sandbox cp SCOPE/<TAB>`.
	script := filepath.Join(t.TempDir(), "completion.bash")
	r := sbRun(t, run{standalone: true, args: []string{"completion", "bash"}})
	wantCode(t, r, 0)
	if err := os.WriteFile(script, []byte(r.Stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if filepath.Base(pluginBin) != "docker-sandbox" {
		t.Fatalf("the plugin binary is %s: the script completes docker-sandbox", pluginBin)
	}
	line := "docker-sandbox cp " + scope + "/"
	// _get_comp_words_by_ref stands in for the bash-completion package's,
	// which cobra's script needs (and users have).
	bash := osexec.Command("bash", "--norc", "--noprofile", "-c", `_get_comp_words_by_ref() {
	cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]:0:COMP_CWORD+1}"); cword=$COMP_CWORD
}
source "$1"
COMP_WORDS=(docker-sandbox cp "$2"); COMP_CWORD=2; COMP_LINE="docker-sandbox cp $2"; COMP_POINT=${#COMP_LINE}
__start_docker-sandbox
printf '%s\n' "${COMPREPLY[@]}"`, "bash", script, scope+"/")
	bash.Env = append(os.Environ(), "PATH="+filepath.Dir(pluginBin)+":"+os.Getenv("PATH"))
	got, err := bash.Output() // (compopt complains on stderr outside a real completion)
	if err != nil || strings.TrimSpace(string(got)) != scope+"/chat:" {
		t.Errorf("bash completion of %q: %v\n%s", line, err, got)
	}
}
