package plugin

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/docker/cli/cli/command"
	cliconfig "github.com/docker/cli/cli/config"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// fakeCli is the docker CLI as the command tree sees it: only Client is
// there (anything else panics), and it counts its calls.
type fakeCli struct {
	command.Cli
	mu      sync.Mutex
	clients int
	api     *fakeEngine
}

func (f *fakeCli) Client() client.APIClient {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clients++
	return f.api
}

// fakeEngine answers the four list calls completion makes (anything else
// panics) and records them.
type fakeEngine struct {
	client.APIClient
	containers []container.Summary
	volumes    []*volume.Volume
	images     []image.Summary
	networks   []network.Summary
	calls      []string
}

func (f *fakeEngine) ContainerList(ctx context.Context, o container.ListOptions) ([]container.Summary, error) {
	f.calls = append(f.calls, "ContainerList "+strings.Join(slices.Sorted(slices.Values(o.Filters.Get("label"))), ","))
	return f.containers, nil
}

func (f *fakeEngine) VolumeList(ctx context.Context, o volume.ListOptions) (volume.ListResponse, error) {
	f.calls = append(f.calls, "VolumeList "+strings.Join(o.Filters.Get("label"), ","))
	return volume.ListResponse{Volumes: f.volumes}, nil
}

func (f *fakeEngine) ImageList(ctx context.Context, o image.ListOptions) ([]image.Summary, error) {
	f.calls = append(f.calls, "ImageList")
	return f.images, nil
}

func (f *fakeEngine) NetworkList(ctx context.Context, o network.ListOptions) ([]network.Summary, error) {
	f.calls = append(f.calls, "NetworkList")
	return f.networks, nil
}

// sandboxSummary is the list entry of t's sandbox container (mounts as
// the plugin makes them unless mounts is given).
func sandboxSummary(t core.Target, name string, labels map[string]string, mounts []container.MountPoint) container.Summary {
	if labels == nil {
		labels = map[string]string{core.LabelManaged: "true", core.LabelKind: core.KindSandbox, core.LabelScope: t.Scope, core.LabelSession: t.Session}
	}
	if mounts == nil {
		mounts = []container.MountPoint{
			{Type: mount.TypeVolume, Name: t.WorkspaceVolume(), Destination: core.WorkspaceDir, RW: true},
			{Type: mount.TypeVolume, Name: t.UserVolume(), Destination: core.UserDir, RW: true},
			{Type: mount.TypeVolume, Name: "docker-sandbox.helper.x", Destination: core.HelperDir},
		}
		if t.Session == "" {
			mounts[0].Name = t.UserVolume()
		}
	}
	if name == "" {
		name = t.ContainerName()
	}
	return container.Summary{Names: []string{"/" + name}, Labels: labels, Mounts: mounts}
}

func volumeOf(name string, t core.Target, kind string) *volume.Volume {
	return &volume.Volume{Name: name, Labels: map[string]string{core.LabelManaged: "true", core.LabelKind: kind, core.LabelScope: t.Scope, core.LabelSession: t.Session}}
}

// completionEngineFixture: sandboxes u1, u1/chat (containers), u2/old
// (data only); and hostile objects that must never be offered.
func completionEngineFixture() *fakeEngine {
	u1, chat, old := core.Target{Scope: "u1"}, core.Target{Scope: "u1", Session: "chat"}, core.Target{Scope: "u2", Session: "old"}
	evil := core.Target{Scope: "evil"}
	return &fakeEngine{
		containers: []container.Summary{
			sandboxSummary(u1, "", nil, nil),
			sandboxSummary(chat, "", nil, nil),
			// A look-alike: the labels copied, the mounts not.
			sandboxSummary(evil, "", nil, []container.MountPoint{}),
			// Labels that name another target than the name.
			sandboxSummary(core.Target{Scope: "x"}, "docker-sandbox-y", nil, nil),
			// A name with an escape sequence and a newline.
			sandboxSummary(core.Target{Scope: "a\x1b[31m\nb"}, "", nil, nil),
		},
		volumes: []*volume.Volume{
			volumeOf(old.WorkspaceVolume(), old, core.KindWorkspace),
			volumeOf(u1.UserVolume(), u1, core.KindUser),
			volumeOf("docker-sandbox-z\x1b]0;x\a.user", core.Target{Scope: "z\x1b]0;x\a"}, core.KindUser),
			// Labelled as another scope's.
			volumeOf("docker-sandbox-w.user", core.Target{Scope: "other"}, core.KindUser),
		},
		images: []image.Summary{
			{RepoTags: []string{"python:3.13-slim", "docker-sandbox-runtime:0.1.0-abc"}},
			{RepoTags: []string{"<none>:<none>"}},
			{RepoTags: []string{"evil:\x1b[2J", "x:y\nz", "ok:1"}},
		},
		networks: []network.Summary{
			{Name: "bridge"}, {Name: "host"}, {Name: "none"}, {Name: "corp-net"},
			{Name: "docker-sandbox.net.u1", Labels: map[string]string{core.LabelManaged: "true"}},
			{Name: "lookalike", Labels: map[string]string{core.LabelScope: "u1"}},
			{Name: "bad\x1b[31m"},
		},
	}
}

// complete runs `docker __complete sandbox ARGS` (as the docker CLI does
// for a plugin) on the command tree and returns the offered names and the
// directive line.
func complete(t *testing.T, cli *fakeCli, args ...string) ([]string, string) {
	t.Helper()
	return runTree(t, cli, append([]string{cobra.ShellCompRequestCmd, Name}, args...)...)
}

// runTree runs the plugin's tree under a top-level command shaped as
// docker/cli's plugin one.
func runTree(t *testing.T, cli *fakeCli, args ...string) ([]string, string) {
	t.Helper()
	top := &cobra.Command{Use: "docker", TraverseChildren: true, SilenceErrors: true, SilenceUsage: true}
	top.AddCommand(NewRootCommand(cli))
	var out, errOut bytes.Buffer
	top.SetOut(&out)
	top.SetErr(&errOut)
	top.SetArgs(args)
	if err := top.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, errOut.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], ":") {
		t.Fatalf("%v: no directive in %q", args, out.String())
	}
	return lines[:len(lines)-1], lines[len(lines)-1]
}

const (
	noFiles       = ":4"  // ShellCompDirectiveNoFileComp
	noFilesNoSp   = ":6"  // NoSpace | NoFileComp
	noFilesInOrd  = ":36" // NoFileComp | KeepOrder
	shellDefault  = ":0"
	namesOfTarget = "u1 u1/chat u2 u2/old"
)

func TestCompletion(t *testing.T) {
	t.Setenv("DOCKER_SANDBOX_DEFAULT_SCOPE", "u1")
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		args      []string
		want      string // names, space-separated
		directive string
		calls     []string
	}{
		// Positional targets: from one container and one volume list of
		// the plugin's own objects; each offered once, not again.
		{args: []string{"inspect", ""}, want: namesOfTarget, directive: noFiles,
			calls: []string{"ContainerList com.docker.sandbox.kind=sandbox,com.docker.sandbox.managed=true", "VolumeList com.docker.sandbox.managed=true"}},
		{args: []string{"stop", "u1", "u1"}, want: "u1/chat", directive: noFiles}, // u1 is given already
		{args: []string{"rm", "u1", ""}, want: "u1/chat u2 u2/old", directive: noFiles},
		{args: []string{"shell", "u1/"}, want: "u1/chat", directive: noFiles},
		{args: []string{"shell", "u1", ""}, want: "", directive: noFiles, calls: []string{}},
		{args: []string{"egress", "policy", ""}, want: "u1 u2", directive: noFiles},
		// cp: SCOPE[/SESSION]: then the path; a host path is the shell's.
		{args: []string{"cp", "u"}, want: "u1: u1/chat: u2: u2/old:", directive: noFilesNoSp},
		{args: []string{"cp", "./sr"}, want: "", directive: shellDefault},
		{args: []string{"cp", "u1:src"}, want: "", directive: noFiles, calls: []string{}},
		{args: []string{"cp", "a", "b", ""}, want: "", directive: noFiles, calls: []string{}},
		{args: []string{"files", "ls", ""}, want: "u1: u1/chat: u2: u2/old:", directive: noFilesNoSp},
		{args: []string{"files", "cat", "./x"}, want: "", directive: noFilesNoSp},
		// Flags.
		{args: []string{"exec", "--scope", ""}, want: "u1 u2", directive: noFiles},
		{args: []string{"exec", "-s", "u2", "--session", ""}, want: "old", directive: noFiles},
		{args: []string{"exec", "--session", ""}, want: "chat", directive: noFiles}, // the default scope's
		{args: []string{"files", "put", "--scope", "u1", "--session", "c"}, want: "chat", directive: noFiles},
		{args: []string{"exec", "--lang", ""}, want: "python node bash sh", directive: noFiles, calls: []string{}},
		{args: []string{"exec", "--lang", "p"}, want: "python", directive: noFiles, calls: []string{}},
		{args: []string{"exec", "--image", ""}, want: "docker-sandbox-runtime:0.1.0-abc ok:1 python:3.13-slim", directive: noFiles, calls: []string{"ImageList"}},
		{args: []string{"images", "build", "--base", "py"}, want: "python:3.13-slim", directive: noFiles},
		{args: []string{"exec", "--network", ""}, want: "none proxy bridge corp-net", directive: noFilesInOrd, calls: []string{"NetworkList"}},
		{args: []string{"egress", "start", "--outbound-network", ""}, want: "bridge corp-net", directive: noFilesInOrd},
		{args: []string{"egress", "logs", "--scope", ""}, want: "u1 u2", directive: noFiles},
		{args: []string{"ls", "--filter", ""}, want: "scope= session= state= label=", directive: noFilesNoSp, calls: []string{}},
		{args: []string{"ls", "--filter", "state=i"}, want: "state=idle", directive: noFiles},
		{args: []string{"rm", "--filter", "scope="}, want: "scope=u1 scope=u2", directive: noFiles},
		{args: []string{"prune", "--filter", ""}, want: "label=", directive: noFilesNoSp},
		{args: []string{"ls", "--format", ""}, want: "json table", directive: noFiles},
		{args: []string{"exec", "--format", ""}, want: "json", directive: noFiles},
		// Subcommands, and the verbs without arguments offer nothing.
		{args: []string{"eg"}, want: "egress", directive: noFiles},
		{args: []string{"completion", ""}, want: "bash zsh fish powershell", directive: noFiles},
		{args: []string{"ls", ""}, want: "", directive: noFiles, calls: []string{}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			api := completionEngineFixture()
			got, directive := complete(t, &fakeCli{api: api}, tc.args...)
			// Without descriptions (names only, as the docker CLI with
			// DOCKER_CLI_DISABLE_COMPLETION_DESCRIPTION).
			for i, g := range got {
				got[i], _, _ = strings.Cut(g, "\t")
			}
			if d := cmp.Diff(strings.Fields(tc.want), got, cmp.Comparer(func(a, b []string) bool { return strings.Join(a, " ") == strings.Join(b, " ") })); d != "" {
				t.Errorf("names (-want +got):\n%s", d)
			}
			if directive != tc.directive {
				t.Errorf("directive %s, want %s", directive, tc.directive)
			}
			if tc.calls != nil {
				if d := cmp.Diff(tc.calls, api.calls, cmp.Comparer(func(a, b []string) bool { return strings.Join(a, "|") == strings.Join(b, "|") })); d != "" {
					t.Errorf("engine calls (-want +got):\n%s", d)
				}
			}
			// Nothing a shell or a terminal would act on.
			for _, g := range got {
				if strings.ContainsAny(g, "\x1b\a\n\r") {
					t.Errorf("offered %q", g)
				}
			}
		})
	}
}

// The standalone script's `docker-sandbox __complete ARGS` reaches the
// plugin as `sandbox __complete ARGS` (the main program puts sandbox
// first): it answers as `__complete sandbox ARGS` does.
func TestCompletionStandalone(t *testing.T) {
	for _, args := range [][]string{{"inspect", "u1/"}, {"exec", "--lang", ""}, {""}} {
		want, wantDir := complete(t, &fakeCli{api: completionEngineFixture()}, args...)
		got, dir := runTree(t, &fakeCli{api: completionEngineFixture()}, append([]string{Name, cobra.ShellCompRequestCmd}, args...)...)
		if d := cmp.Diff(want, got); d != "" || dir != wantDir {
			t.Errorf("%v: (-want +got):\n%s %s %s", args, d, dir, wantDir)
		}
		if len(got) == 0 {
			t.Errorf("%v: nothing offered", args)
		}
	}
	// __completeNoDesc: no descriptions.
	got, _ := runTree(t, &fakeCli{api: completionEngineFixture()}, Name, cobra.ShellCompNoDescRequestCmd, "eg")
	if d := cmp.Diff([]string{"egress"}, got); d != "" {
		t.Error(d)
	}
}

// completion bash|zsh|fish|powershell: cobra's script for docker-sandbox,
// asking docker-sandbox __complete.
func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string][]string{
		"bash":       {"complete -o default -F __start_docker-sandbox docker-sandbox", "__complete"},
		"zsh":        {"#compdef docker-sandbox", "__complete"},
		"fish":       {"complete -c docker-sandbox", "__complete"},
		"powershell": {"Register-ArgumentCompleter", "docker-sandbox", "__complete"},
	} {
		cli := &fakeCli{api: completionEngineFixture()}
		top := &cobra.Command{Use: "docker", TraverseChildren: true, SilenceErrors: true, SilenceUsage: true}
		top.AddCommand(NewRootCommand(cli))
		var out bytes.Buffer
		top.SetOut(&out)
		top.SetArgs([]string{Name, "completion", shell})
		if err := top.Execute(); err != nil {
			t.Fatalf("%s: %v", shell, err)
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s script lacks %q", shell, w)
			}
		}
		if cli.clients != 0 {
			t.Errorf("%s: the script asked for the engine", shell)
		}
	}
	for _, args := range [][]string{{}, {"tcsh"}, {"bash", "zsh"}} {
		top := &cobra.Command{Use: "docker", TraverseChildren: true, SilenceErrors: true, SilenceUsage: true}
		top.AddCommand(NewRootCommand(&fakeCli{}))
		top.SetOut(&bytes.Buffer{})
		top.SetArgs(append([]string{Name, "completion"}, args...))
		err := top.Execute()
		if err == nil || core.AsError(err).Exit != 125 && !strings.Contains(err.Error(), "bash, zsh, fish, powershell") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// Building the command tree (which the metadata call does on every
// `docker --help`) asks nothing of the CLI or the engine.
func TestRootCommandNoIO(t *testing.T) {
	cli := &fakeCli{api: &fakeEngine{}}
	cmd := NewRootCommand(cli)
	if cli.clients != 0 || len(cli.api.calls) != 0 {
		t.Fatalf("building the tree called Client %d times, the engine %v", cli.clients, cli.api.calls)
	}
	if len(cmd.Commands()) == 0 {
		t.Fatal("no commands")
	}
}

// --lang offers the configured languages after the built-in ones.
func TestCompletionConfiguredLang(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("DOCKER_CONFIG", cfg)
	// cliconfig.Dir reads DOCKER_CONFIG once per process: point it here.
	old := cliconfig.Dir()
	cliconfig.SetDir(cfg)
	t.Cleanup(func() { cliconfig.SetDir(old) })
	t.Chdir(t.TempDir())
	if err := os.MkdirAll(filepath.Join(cfg, "sandbox"), 0o755); err != nil {
		t.Fatal(err)
	}
	text := "[lang.perl]\ninterpreter = [\"perl\"]\n\n[lang.awk]\ninterpreter = [\"awk\", \"-f\"]\n"
	if err := os.WriteFile(filepath.Join(cfg, "sandbox", "config.toml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got, dir := complete(t, &fakeCli{api: completionEngineFixture()}, "exec", "--lang", "")
	if d := cmp.Diff([]string{"python", "node", "bash", "sh", "awk", "perl"}, got); d != "" || dir != noFiles {
		t.Errorf("(-want +got):\n%s %s", d, dir)
	}
	got, _ = complete(t, &fakeCli{api: completionEngineFixture()}, "exec", "--lang", "pe")
	if d := cmp.Diff([]string{"perl"}, got); d != "" {
		t.Errorf("prefix pe (-want +got):\n%s", d)
	}
}
