package plugin_test

// README examples are tests (issue 13). TestReadmeExamples runs every ```sh
// block of README.md against the real engine, as a user would type it; a
// marker, an HTML comment right before the block (blank lines may sit
// between; GitHub does not render it), says how:
//
//	<!-- readme-test: skip: needs a terminal (TestLifecycleShell covers it) -->
//
//	<!-- readme-test: run
//	scopes: u1 u2
//	setup: printf 'import sys\nprint(sys.argv[1:])\n' > script.py
//	stdout: ['--verbose', 'input.txt']
//	exit: 3
//	-->
//
// The first line is the mode: `run`, `skip: REASON` (the reason is
// required), or `file NAME` on a block of another language (a Makefile):
// its content is written as NAME into the folder of the next run block.
// A ```sh block without a marker fails the test, and so does a block of
// another language that shows a `$ ` prompt (commands belong in sh blocks).
// The directives of a run block, one per line (an unknown one fails):
//
//	scopes: NAME...      these scope names are rewritten, as whole words, to names
//	                     unique to the run (u1 -> u1-3fa2c1), in the block and in
//	                     setup and check lines
//	setup: SHELL         run first, in the block's shell and folder, output kept
//	                     apart (repeatable): the files and sandboxes it needs
//	check: SHELL         run after the block, in its folder and environment; must
//	                     exit 0 (repeatable)
//	stdout: TEXT         the block's standard output contains TEXT (repeatable)
//	stderr: TEXT         likewise for standard error
//	exit: N              the block's exit status (default 0)
//	rewrite: OLD => NEW  a literal replacement, for what must not run here as
//	                     written: `stop --all` acts on every sandbox of the engine,
//	                     so it is narrowed to this run's with a label filter
//	egress               the block needs the egress sidecar and the test upstream
//
// A block whose lines start with `$ ` is a transcript: only those lines run
// (the others are example output). Everything else runs as written, under
// `bash` with `set -euo pipefail`, in a fresh folder, with:
//
//	HOME               a fresh folder; DOCKER_CONFIG is $HOME/.docker, holding the
//	                   test's plugin, so trust records and user files start empty
//	DOCKER_SANDBOX_TEST_RUN   a label of the block's own (RUN-readme-N): everything
//	                   it makes is found by it and removed after the block, which
//	                   then checks that nothing with that label is left
//	DOCKER_SANDBOX_DEFAULT_SCOPE  a unique scope, for the examples without -s
//	README_REPO        the checkout (scripts/install.sh runs from it)
//	README_ID          a unique word (a CI job's id, for the CI example)
//
// An egress block runs against the project's test upstream
// (egress/internal/testupstream), never the internet: the sidecar's outbound
// network is an internal bridge the test makes, holding only the upstream,
// and the sidecar resolves only the names it is given (--no-dns, --add-host
// pypi.org=... and the others the README uses). Its subnet is an unrouted
// public range, so that `--allow pypi.org` alone lets the request through as
// it would for the real pypi.org (a private address would also need
// --allow-cidr); packets to it never leave the bridge. The upstream's
// certificate names those hosts, and the block's sandboxes run an image made
// from the runtime image with that certificate added to the system's CA
// bundle (DOCKER_SANDBOX_IMAGE), so `https://pypi.org/simple/` verifies.

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
)

// rdBlock is one fenced block of the README.
type rdBlock struct {
	line    int // of the opening fence
	lang    string
	content string
	marker  *rdMarker
}

// rdMarker is a parsed readme-test comment.
type rdMarker struct {
	mode     string // run, skip, file
	reason   string // skip
	file     string // file
	scopes   []string
	setup    []string
	check    []string
	stdout   []string
	stderr   []string
	exit     int
	rewrites [][2]string
	egress   bool
}

var rdFence = regexp.MustCompile("^```([A-Za-z0-9_+-]*)\\s*$")

// rdParse splits a README into its fenced blocks with their markers.
func rdParse(text string) ([]rdBlock, error) {
	lines := strings.Split(text, "\n")
	var blocks []rdBlock
	for i := 0; i < len(lines); i++ {
		m := rdFence.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		b := rdBlock{line: i + 1, lang: m[1]}
		j := i + 1
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
		}
		if j == len(lines) {
			return nil, fmt.Errorf("README.md:%d: a fenced block that does not end", i+1)
		}
		b.content = strings.Join(lines[i+1:j], "\n") + "\n"
		mk, err := rdMarkerBefore(lines, i)
		if err != nil {
			return nil, fmt.Errorf("README.md:%d: %v", i+1, err)
		}
		b.marker = mk
		blocks = append(blocks, b)
		i = j
	}
	return blocks, nil
}

// rdMarkerBefore finds the readme-test comment that ends right before line
// i (blank lines between are allowed): nil when there is none.
func rdMarkerBefore(lines []string, i int) (*rdMarker, error) {
	k := i - 1
	for k >= 0 && strings.TrimSpace(lines[k]) == "" {
		k--
	}
	if k < 0 || !strings.HasSuffix(strings.TrimSpace(lines[k]), "-->") {
		return nil, nil
	}
	end := k
	for k >= 0 && !strings.Contains(lines[k], "<!--") {
		k--
	}
	if k < 0 {
		return nil, nil
	}
	text := strings.Join(lines[k:end+1], "\n")
	text = strings.TrimSpace(text[strings.Index(text, "<!--")+4 : strings.LastIndex(text, "-->")])
	rest, ok := strings.CutPrefix(text, "readme-test:")
	if !ok {
		return nil, nil
	}
	return rdParseMarker(rest)
}

func rdParseMarker(text string) (*rdMarker, error) {
	ls := strings.Split(strings.TrimSpace(text), "\n")
	mk := &rdMarker{}
	mode := strings.TrimSpace(ls[0])
	switch {
	case mode == "run":
		mk.mode = "run"
	case strings.HasPrefix(mode, "skip:"):
		mk.mode, mk.reason = "skip", strings.TrimSpace(strings.TrimPrefix(mode, "skip:"))
		if mk.reason == "" {
			return nil, fmt.Errorf("readme-test: skip needs a reason")
		}
	case strings.HasPrefix(mode, "file "):
		mk.mode, mk.file = "file", strings.TrimSpace(strings.TrimPrefix(mode, "file "))
		if mk.file == "" || strings.ContainsAny(mk.file, "/\\") {
			return nil, fmt.Errorf("readme-test: file needs a plain file name")
		}
	default:
		return nil, fmt.Errorf("readme-test: unknown mode %q (run, skip: REASON, file NAME)", mode)
	}
	for _, l := range ls[1:] {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if mk.mode != "run" {
			return nil, fmt.Errorf("readme-test: %s takes no directives (%q)", mk.mode, l)
		}
		if l == "egress" {
			mk.egress = true
			continue
		}
		key, val, ok := strings.Cut(l, ":")
		if !ok {
			return nil, fmt.Errorf("readme-test: %q is not KEY: VALUE", l)
		}
		val = strings.TrimSpace(val)
		switch key {
		case "scopes":
			mk.scopes = append(mk.scopes, strings.Fields(val)...)
		case "setup":
			mk.setup = append(mk.setup, val)
		case "check":
			mk.check = append(mk.check, val)
		case "stdout":
			mk.stdout = append(mk.stdout, val)
		case "stderr":
			mk.stderr = append(mk.stderr, val)
		case "exit":
			n, err := strconv.Atoi(val)
			if err != nil {
				return nil, fmt.Errorf("readme-test: exit: %v", err)
			}
			mk.exit = n
		case "rewrite":
			old, neu, ok := strings.Cut(val, " => ")
			if !ok || old == "" {
				return nil, fmt.Errorf("readme-test: rewrite wants OLD => NEW, got %q", val)
			}
			mk.rewrites = append(mk.rewrites, [2]string{old, neu})
		default:
			return nil, fmt.Errorf("readme-test: unknown directive %q", key)
		}
	}
	return mk, nil
}

// rdScopeWord matches a scope name as a whole word: not inside another
// name, a path's last component or a longer scope name.
func rdScopeWord(name string) *regexp.Regexp {
	return regexp.MustCompile(`(^|[^A-Za-z0-9_.-])` + regexp.QuoteMeta(name) + `($|[^A-Za-z0-9_-])`)
}

// rdRename rewrites each scope name in s.
func rdRename(s string, names map[string]string) string {
	for old, neu := range names {
		re := rdScopeWord(old)
		// Twice: adjacent matches share a separator.
		for range 2 {
			s = re.ReplaceAllString(s, "${1}"+neu+"${2}")
		}
	}
	return s
}

// rdCommands is what runs of a block: all of it, or a transcript's `$ `
// lines.
func rdCommands(content string) string {
	var cmds []string
	transcript := false
	for _, l := range strings.Split(content, "\n") {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			transcript = true
			cmds = append(cmds, c)
		}
	}
	if !transcript {
		return content
	}
	return strings.Join(cmds, "\n") + "\n"
}

// TestReadmeMarkers checks the markers alone (no engine): every sh block
// has one, and the parser refuses what it should.
func TestReadmeMarkers(t *testing.T) {
	blocks := rdReadme(t)
	for _, b := range blocks {
		rdCheckBlock(t, b)
	}
	for _, bad := range []string{"", "runn", "skip:", "skip:   ", "file ", "file a/b", "run\nbogus: 1", "run\nexit: x", "run\nrewrite: a", "skip: x\nsetup: y", "run\nno colon"} {
		if _, err := rdParseMarker(bad); err == nil {
			t.Errorf("marker %q accepted", bad)
		}
	}
	mk, err := rdParseMarker("run\nscopes: u1 u2\nsetup: a: b\nexit: 3\nrewrite: x => y => z\negress")
	if err != nil || len(mk.scopes) != 2 || mk.setup[0] != "a: b" || mk.exit != 3 || mk.rewrites[0] != [2]string{"x", "y => z"} || !mk.egress {
		t.Errorf("marker parsed as %+v, %v", mk, err)
	}
	got := rdRename("docker sandbox cp u1:src u1/chatA: u10:x x-u1 u1_ u1 u1 scope=u1\nu1", map[string]string{"u1": "u1-z"})
	if want := "docker sandbox cp u1-z:src u1-z/chatA: u10:x x-u1 u1_ u1-z u1-z scope=u1-z\nu1-z"; got != want {
		t.Errorf("rename:\n got %s\nwant %s", got, want)
	}
	if got := rdCommands("$ a b\nout\n$ c\n"); got != "a b\nc\n" {
		t.Errorf("transcript commands: %q", got)
	}
	// A README without markers fails.
	bs, err := rdParse("x\n```sh\ndocker sandbox ls\n```\n\n<!-- other -->\n```sh\nls\n```\n")
	if err != nil || len(bs) != 2 || bs[0].marker != nil || bs[1].marker != nil {
		t.Errorf("unmarked blocks: %+v %v", bs, err)
	}
}

func rdReadme(t *testing.T) []rdBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := rdParse(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return blocks
}

// rdCheckBlock fails a block that breaks the rules of the markers.
func rdCheckBlock(t *testing.T, b rdBlock) {
	t.Helper()
	switch {
	case b.lang == "sh" && b.marker == nil:
		t.Errorf("README.md:%d: a ```sh block without a readme-test marker: run it (<!-- readme-test: run ... -->) or say why not (<!-- readme-test: skip: REASON -->)", b.line)
	case b.lang == "sh" && b.marker.mode == "file":
		t.Errorf("README.md:%d: a ```sh block cannot be a file", b.line)
	case b.lang != "sh" && b.marker != nil && b.marker.mode == "run":
		t.Errorf("README.md:%d: only ```sh blocks run (this one is %q)", b.line, b.lang)
	case b.lang == "bash" || b.lang == "shell" || b.lang == "console":
		t.Errorf("README.md:%d: commands go in ```sh blocks, not %q", b.line, b.lang)
	case b.lang != "sh" && regexp.MustCompile(`(?m)^\$ `).MatchString(b.content):
		t.Errorf("README.md:%d: a ```%s block with a `$ ` command: make it a ```sh block with a marker", b.line, b.lang)
	}
}

func TestReadmeExamples(t *testing.T) {
	needE2E(t)
	blocks := rdReadme(t)
	run := os.Getenv("DOCKER_SANDBOX_TEST_RUN")
	if run == "" {
		run = "readme" + randID(3)
	}
	var eg *rdEgress
	for _, b := range blocks {
		rdCheckBlock(t, b)
		if b.marker != nil && b.marker.egress && eg == nil {
			eg = rdEgressSetup(t, run+"-readme-egress")
		}
	}
	if t.Failed() {
		return
	}
	start := time.Now()
	t.Run("blocks", func(t *testing.T) {
		var files []rdBlock
		for i, b := range blocks {
			if b.marker == nil {
				continue
			}
			switch b.marker.mode {
			case "file":
				files = append(files, b)
				continue
			case "skip":
				t.Logf("README.md:%d: not run here: %s", b.line, b.marker.reason)
				continue
			}
			b, fs, label := b, files, fmt.Sprintf("%s-readme-%d", run, i)
			files = nil
			t.Run(fmt.Sprintf("line%d", b.line), func(t *testing.T) {
				if !b.marker.egress {
					t.Parallel()
				}
				rdRunBlock(t, b, fs, label, eg)
			})
		}
	})
	t.Logf("the README's examples ran in %s", time.Since(start).Round(time.Millisecond))
}

// rdRunBlock runs one block and checks what it says; everything the block
// made (its label) is removed afterwards, and the removal checked.
func rdRunBlock(t *testing.T, b rdBlock, files []rdBlock, label string, eg *rdEgress) {
	mk := b.marker
	suffix := randID(3)
	names := map[string]string{}
	for _, s := range mk.scopes {
		names[s] = s + "-" + suffix
	}
	defScope := "readme-" + suffix
	base := t.TempDir()
	home, work := filepath.Join(base, "home"), filepath.Join(base, "work")
	cfg := filepath.Join(home, ".docker")
	for _, d := range []string{work, filepath.Join(cfg, "cli-plugins")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The test's plugin, in a Docker config of the block's own.
	priv := os.Getenv("DOCKER_CONFIG")
	if err := os.Symlink(filepath.Join(priv, "cli-plugins", "docker-sandbox"), filepath.Join(cfg, "cli-plugins", "docker-sandbox")); err != nil {
		t.Fatal(err)
	}
	if c, err := os.ReadFile(filepath.Join(priv, "config.json")); err == nil {
		_ = os.WriteFile(filepath.Join(cfg, "config.json"), c, 0o600)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(work, f.marker.file), []byte(rdRename(f.content, names)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"HOME=" + home, "DOCKER_CONFIG=" + cfg, "DOCKER_SANDBOX_TEST_RUN=" + label,
		"DOCKER_SANDBOX_DEFAULT_SCOPE=" + defScope, "README_REPO=" + repoRoot, "README_ID=" + suffix}
	if mk.egress {
		env = append(env, "DOCKER_SANDBOX_IMAGE="+eg.image)
	}
	scopes := []string{defScope}
	for _, n := range names {
		scopes = append(scopes, n)
	}
	t.Cleanup(func() { rdCleanup(t, label, scopes, mk.egress) })

	cmds := rdCommands(b.content)
	for _, rw := range mk.rewrites {
		if !strings.Contains(cmds, rw[0]) {
			t.Fatalf("README.md:%d: rewrite %q: not in the block", b.line, rw[0])
		}
		cmds = strings.ReplaceAll(cmds, rw[0], rw[1])
	}
	cmds = rdRename(cmds, names)
	var script strings.Builder
	script.WriteString("set -euo pipefail\n{\n")
	for _, s := range mk.setup {
		script.WriteString(rdRename(s, names) + "\n")
	}
	fmt.Fprintf(&script, ": > %q\n} > %q 2>&1\n", filepath.Join(base, "setup.done"), filepath.Join(base, "setup.log"))
	script.WriteString(cmds)
	sh := filepath.Join(base, "block.sh")
	if err := os.WriteFile(sh, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := rdShell(t, work, env, sh)
	if _, err := os.Stat(filepath.Join(base, "setup.done")); err != nil {
		log, _ := os.ReadFile(filepath.Join(base, "setup.log"))
		t.Fatalf("README.md:%d: the setup failed (exit %d):\n%s", b.line, r.Code, log)
	}
	t.Logf("README.md:%d ran in %s:\n%s", b.line, r.Elapsed.Round(time.Millisecond), cmds)
	if r.Code != mk.exit {
		t.Errorf("README.md:%d: exit %d, want %d:\n%s", b.line, r.Code, mk.exit, r)
	}
	for _, s := range mk.stdout {
		if s = rdRename(s, names); !strings.Contains(r.Stdout, s) {
			t.Errorf("README.md:%d: stdout lacks %q:\n%s", b.line, s, r)
		}
	}
	for _, s := range mk.stderr {
		if s = rdRename(s, names); !strings.Contains(r.Stderr, s) {
			t.Errorf("README.md:%d: stderr lacks %q:\n%s", b.line, s, r)
		}
	}
	for _, c := range mk.check {
		c = rdRename(c, names)
		cr := rdShell(t, work, env, "-c", "set -euo pipefail\n"+c)
		if cr.Code != 0 {
			t.Errorf("README.md:%d: check failed: %s\n%s", b.line, c, cr)
		}
	}
}

// rdShell runs bash with args in dir, with env over the test's, in a
// process group of its own (killed at the deadline, with whatever it
// started).
func rdShell(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := osexec.CommandContext(ctx, "bash", append([]string{"--noprofile", "--norc"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Stdin = strings.NewReader("")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(start)}
	if ee, ok := err.(*osexec.ExitError); ok {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("bash %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("bash %v did not finish within 4 minutes:\n%s", args, r)
	}
	return r
}

// rdCleanup removes what a block made: its scopes' egress policies, then
// every container, network and volume with its label; then checks that
// nothing with the label, or of its scopes, is left.
func rdCleanup(t *testing.T, label string, scopes []string, egress bool) {
	ctx := context.Background()
	cli := engine(t)
	f := filters.NewArgs(filters.Arg("label", "com.docker.sandbox.test-run="+label))
	cs, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	for _, c := range cs {
		_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	}
	for _, c := range cs {
		waitContainerGone(cli, c.ID)
	}
	for _, s := range scopes {
		removeScope(t, s)
	}
	if egress {
		// The sandboxes are gone, so this removes each policy (and says so).
		for _, s := range scopes {
			if r := sb(t, "egress", "policy", s, "--clear"); r.Code != 0 {
				t.Errorf("egress policy %s --clear: %s", s, r)
			}
		}
	}
	ns, _ := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	for _, n := range ns {
		if full, err := cli.NetworkInspect(ctx, n.ID, network.InspectOptions{}); err == nil {
			for id := range full.Containers {
				_ = cli.NetworkDisconnect(ctx, n.ID, id, true)
			}
		}
		if err := cli.NetworkRemove(ctx, n.ID); err != nil {
			t.Errorf("cleanup: network %s: %v", n.Name, err)
		}
	}
	vs, _ := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	for _, v := range vs.Volumes {
		if err := cli.VolumeRemove(ctx, v.Name, true); err != nil {
			t.Errorf("cleanup: volume %s: %v", v.Name, err)
		}
	}
	// Nothing of the block is left.
	cs, _ = cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	ns, _ = cli.NetworkList(ctx, network.ListOptions{Filters: f})
	vs, _ = cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if len(cs)+len(ns)+len(vs.Volumes) > 0 {
		t.Errorf("left behind with label %s: %d containers, %d networks, %d volumes", label, len(cs), len(ns), len(vs.Volumes))
	}
	for _, s := range scopes {
		if c, v := objects(t, s); c+v > 0 {
			t.Errorf("left behind of scope %s: %d containers, %d volumes", s, c, v)
		}
	}
}

// rdEgress is the egress setup of the README's egress examples.
type rdEgress struct {
	image string // the runtime image, plus the upstream's certificate as a trusted CA
}

// rdEgressHosts are the names the README's egress examples use: each
// resolves (in the sidecar only) to the test upstream.
var rdEgressHosts = []string{"pypi.org", "files.pythonhosted.org", "api.github.com"}

// rdEgressSetup makes the upstream (on an internal network of an unrouted
// public range), the sidecar, and the image that trusts the upstream's
// certificate. label is put on all of it.
func rdEgressSetup(t *testing.T, label string) *rdEgress {
	t.Helper()
	ctx := context.Background()
	cli := engine(t)
	env := []string{"DOCKER_SANDBOX_TEST_RUN=" + label}
	labels := map[string]string{"com.docker.sandbox.egress-test": "readme", "com.docker.sandbox.test-run": label}
	if c, err := cli.ContainerInspect(ctx, egSidecar); err == nil {
		if c.Config.Labels["com.docker.sandbox.test-run"] == "" {
			t.Fatalf("an egress sidecar not made by a test runs on this engine: the README's egress examples would replace it")
		}
	}
	certPEM, keyPEM := rdCert(t, rdEgressHosts)
	ref := egUpstreamImage(t, certPEM, keyPEM)

	// 11.0.0.0/8 is public (allocated, not announced), so the proxy treats
	// it as any public host; the bridge is internal with no host address,
	// so nothing sent to it leaves the bridge.
	outNet := "docker-sandbox-readme-out-" + randID(3)
	subnet := fmt.Sprintf("11.213.%d.0/24", 1+int(randID(1)[0])%250)
	_, err := cli.NetworkCreate(ctx, outNet, network.CreateOptions{
		Driver: "bridge", Internal: true, Labels: labels,
		Options: map[string]string{"com.docker.network.bridge.inhibit_ipv4": "true"},
		IPAM:    &network.IPAM{Config: []network.IPAMConfig{{Subnet: subnet}}},
	})
	if err != nil {
		t.Fatalf("creating the outbound network: %v", err)
	}
	t.Cleanup(func() { _ = engine(t).NetworkRemove(context.Background(), outNet) })
	resp, err := cli.ContainerCreate(ctx, &container.Config{
		Image: ref, User: "65532:65532", Labels: labels,
		Cmd: []string{"--http", ":80", "--https", ":443", "--canary", egCanaryPorts},
	}, &container.HostConfig{
		NetworkMode: container.NetworkMode(outNet), CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"},
		ReadonlyRootfs: true, Sysctls: map[string]string{"net.ipv4.ip_unprivileged_port_start": "0"},
	}, nil, nil, "docker-sandbox-readme-upstream-"+randID(3))
	if err != nil {
		t.Fatalf("creating the upstream: %v", err)
	}
	t.Cleanup(func() {
		_ = engine(t).ContainerRemove(context.Background(), resp.ID, container.RemoveOptions{Force: true})
		waitContainerGone(engine(t), resp.ID)
	})
	if err := cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		t.Fatalf("starting the upstream: %v", err)
	}
	up := &egFixture{upID: resp.ID}
	poll(t, 20*time.Second, func() error {
		if !strings.Contains(egUpstreamLog(t, up), "READY") {
			return fmt.Errorf("upstream not ready:\n%s", egUpstreamLog(t, up))
		}
		return nil
	})
	c, err := cli.ContainerInspect(ctx, resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	upIP := c.NetworkSettings.Networks[outNet].IPAddress

	args := []string{"egress", "start", "--outbound-network", outNet, "--no-dns", "--replace"}
	for _, h := range rdEgressHosts {
		args = append(args, "--add-host", h+"="+upIP)
	}
	r := sbRun(t, run{args: args, env: env})
	t.Cleanup(func() {
		if r := sb(t, "egress", "stop", "--rm"); r.Code != 0 {
			t.Logf("egress stop --rm: %s", r)
		}
		vs, _ := engine(t).VolumeList(context.Background(), volume.ListOptions{Filters: filters.NewArgs(filters.Arg("name", egSidecar))})
		for _, v := range vs.Volumes {
			if v.Name == egSidecar && v.Labels["com.docker.sandbox.test-run"] != "" {
				_ = engine(t).VolumeRemove(context.Background(), v.Name, true)
			}
		}
		// Nothing but the sidecar reached the upstream, and no canary.
		sc := egUpstreamLog(t, up)
		if strings.Contains(sc, "CANARY") {
			t.Errorf("a connection reached a canary port of the upstream:\n%s", sc)
		}
	})
	wantCode(t, r, 0)
	return &rdEgress{image: rdCAImage(t, label, env, certPEM)}
}

// rdCert makes a self-signed certificate (its own CA) for names.
func rdCert(t *testing.T, names []string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "docker sandbox README test upstream"},
		DNSNames: names, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// rdCAImage commits the runtime image with certPEM appended to the
// system's CA bundle (a container that is never started).
func rdCAImage(t *testing.T, label string, env []string, certPEM []byte) string {
	t.Helper()
	ctx := context.Background()
	cli := engine(t)
	r := sbRun(t, run{args: []string{"exec", "--rm", "-s", "readme-img-" + randID(3), "--format", "json", "-c", "true"}, env: env})
	wantCode(t, r, 0)
	var j struct {
		Image string `json:"image"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &j); err != nil || j.Image == "" {
		t.Fatalf("the runtime image: %v\n%s", err, r)
	}
	resp, err := cli.ContainerCreate(ctx, &container.Config{Image: j.Image, Labels: map[string]string{"com.docker.sandbox.test-run": label}},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "docker-sandbox-readme-ca-"+randID(3))
	if err != nil {
		t.Fatalf("creating the CA image's container: %v", err)
	}
	defer func() {
		_ = cli.ContainerRemove(context.Background(), resp.ID, container.RemoveOptions{Force: true})
	}()
	const bundle = "/etc/ssl/certs/ca-certificates.crt"
	rc, _, err := cli.CopyFromContainer(ctx, resp.ID, bundle)
	if err != nil {
		t.Fatalf("reading %s of the runtime image: %v", bundle, err)
	}
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		t.Fatal(err)
	}
	cas, err := io.ReadAll(tr)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	cas = append(append(cas, '\n'), certPEM...)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: filepath.Base(bundle), Mode: 0o644, Size: int64(len(cas)), ModTime: time.Now()})
	_, _ = tw.Write(cas)
	_ = tw.Close()
	if err := cli.CopyToContainer(ctx, resp.ID, filepath.Dir(bundle), &buf, container.CopyToContainerOptions{}); err != nil {
		t.Fatalf("writing the CA bundle: %v", err)
	}
	ref := "docker-sandbox-readme-ca:" + randID(4)
	if _, err := cli.ContainerCommit(ctx, resp.ID, container.CommitOptions{Reference: ref,
		Changes: []string{"LABEL com.docker.sandbox.test-run=" + strings.SplitN(label, "-", 2)[0]}}); err != nil {
		t.Fatalf("committing the CA image: %v", err)
	}
	t.Cleanup(func() {
		_, _ = engine(t).ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	return ref
}
