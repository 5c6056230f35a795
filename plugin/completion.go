package plugin

// Shell completion.
//
// The docker CLI's own completion reaches the plugin: `docker sandbox
// ex<TAB>` makes the docker CLI run `docker-sandbox __complete sandbox ex`,
// which cobra answers from this command tree. For the standalone
// docker-sandbox, `docker-sandbox completion bash|zsh|fish|powershell`
// prints cobra's script; that script runs `docker-sandbox __complete ...`,
// which the hidden sandbox-level __complete below hands to the same place.
//
// Scopes and sessions come from the engine: one container list and one
// volume list, bounded in time, of the objects that are the plugin's own
// (name, labels, kind and mounts, as ls decides). Images and networks come
// from one list each. Names from the engine are hostile (a label, an image
// tag, a network name can be anything): only names that the plugin would
// accept are offered, so none can put a line or an escape sequence into
// the shell's completion. Nothing is run in a sandbox.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/docker/cli/cli-plugins/metadata"
	"github.com/docker/cli/cli/command"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// completionEngine is what completion asks the engine.
type completionEngine interface {
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	VolumeList(ctx context.Context, options volume.ListOptions) (volume.ListResponse, error)
	ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error)
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
}

// completionTimeout bounds the engine calls of one completion: a slow or
// unreachable engine gives no names, not a stuck shell.
const completionTimeout = 3 * time.Second

// standaloneName is the standalone command's name (docker-sandbox).
const standaloneName = metadata.NamePrefix + Name

func newCompletionCommand() *cobra.Command {
	shells := []string{"bash", "zsh", "fish", "powershell"}
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print the shell completion script of the standalone docker-sandbox command",
		Long: `Print the shell completion script of the standalone docker-sandbox command.
The docker CLI's own completion (docker completion) already completes
"docker sandbox ...": scopes, sessions, languages, images and networks.`,
		Example: `  source <(docker-sandbox completion bash)
  docker-sandbox completion zsh > "${fpath[1]}/_docker-sandbox"
  docker-sandbox completion fish > ~/.config/fish/completions/docker-sandbox.fish`,
		ValidArgs: shells,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || !slices.Contains(shells, args[0]) {
				return usageError(cmd, "%q requires one argument: %s", cmd.CommandPath(), strings.Join(shells, ", "))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// The scripts depend only on the command's name: they ask the
			// program itself (__complete) for everything else.
			prog := &cobra.Command{Use: standaloneName}
			out := cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return prog.GenBashCompletionV2(out, true)
			case "zsh":
				return prog.GenZshCompletion(out)
			case "fish":
				return prog.GenFishCompletion(out, true)
			default:
				return prog.GenPowerShellCompletionWithDesc(out)
			}
		},
	}
}

// newStandaloneCompleteCommand answers the standalone script's
// `docker-sandbox __complete ARGS` (which reaches the plugin as `sandbox
// __complete ARGS`): it is cobra's `__complete sandbox ARGS`.
func newStandaloneCompleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:                cobra.ShellCompRequestCmd,
		Aliases:            []string{cobra.ShellCompNoDescRequestCmd},
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			root.SetArgs(append([]string{cmd.CalledAs(), cmd.Parent().Name()}, args...))
			return root.ExecuteContext(cmd.Context())
		},
	}
}

// completeEngine returns the engine client for completion, or nil (no
// names) when there is none.
func completeEngine(dockerCli command.Cli) completionEngine {
	if dockerCli == nil {
		return nil
	}
	c := engineAPI(dockerCli)
	if c == nil {
		return nil
	}
	return c
}

// engineTargets are the sandboxes the engine holds: with a container, or
// with data.
func engineTargets(ctx context.Context, e completionEngine) []core.Target {
	if e == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	seen := map[core.Target]bool{}
	var ts []core.Target
	add := func(t core.Target) {
		if !seen[t] {
			seen[t] = true
			ts = append(ts, t)
		}
	}
	managed := filters.Arg("label", core.LabelManaged+"=true")
	cs, err := e.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(managed, filters.Arg("label", core.LabelKind+"="+core.KindSandbox))})
	if err == nil {
		for _, c := range cs {
			if t, ok := sbexec.OwnSandbox(containerName(c.Names), c.Labels, c.Mounts); ok {
				add(t)
			}
		}
	}
	vs, err := e.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(managed)})
	if err == nil {
		for _, v := range vs.Volumes {
			if t, _, ok := sbexec.OwnVolume(v); ok {
				add(t)
				add(core.Target{Scope: t.Scope}) // a session's scope exists with it
			}
		}
	}
	slices.SortFunc(ts, func(a, b core.Target) int { return strings.Compare(a.String(), b.String()) })
	return ts
}

// containerName is a container's own name from a list entry's Names
// (which also holds link aliases, "/other/alias").
func containerName(names []string) string {
	for _, n := range names {
		n = strings.TrimPrefix(n, "/")
		if n != "" && !strings.Contains(n, "/") {
			return n
		}
	}
	return ""
}

// completion is a completion function.
type completion = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective)

// withPrefix keeps the names that start with prefix.
func withPrefix(names []string, prefix string) []string {
	out := []string{}
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

// completeTargets completes SCOPE[/SESSION] arguments (max of them; 0: any
// number), each once.
func completeTargets(dockerCli command.Cli, max int) completion {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if max > 0 && len(args) >= max {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for _, t := range engineTargets(cmd.Context(), completeEngine(dockerCli)) {
			if !slices.Contains(args, t.String()) {
				names = append(names, t.String())
			}
		}
		return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeScopes completes SCOPE arguments (max of them).
func completeScopes(dockerCli command.Cli, max int) completion {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if max > 0 && len(args) >= max {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return withPrefix(scopeNames(cmd.Context(), completeEngine(dockerCli)), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

func scopeNames(ctx context.Context, e completionEngine) []string {
	var names []string
	for _, t := range engineTargets(ctx, e) {
		if t.Session == "" {
			names = append(names, t.Scope)
		}
	}
	return names
}

// completeLocations completes cp's SRC and DST: SCOPE[/SESSION]: for a
// sandbox path; anything else is a host path, which the shell completes
// (files: false, for files' PATH, which is never a host path).
func completeLocations(dockerCli command.Cli, max int, hostPaths bool) completion {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if max > 0 && len(args) >= max || strings.Contains(toComplete, ":") {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for _, t := range engineTargets(cmd.Context(), completeEngine(dockerCli)) {
			names = append(names, t.String()+":")
		}
		names = withPrefix(names, toComplete)
		if len(names) == 0 && hostPaths {
			return nil, cobra.ShellCompDirectiveDefault
		}
		return names, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
	}
}

// completeSessions completes --session: the sessions of the --scope given,
// else of the default scope.
func completeSessions(dockerCli command.Cli) completion {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		scope := ""
		if f := cmd.Flags().Lookup("scope"); f != nil && f.Changed {
			scope = f.Value.String()
		} else if c, err := loadConfigQuiet(); err == nil {
			scope = c.DefaultScope
		}
		var names []string
		for _, t := range engineTargets(cmd.Context(), completeEngine(dockerCli)) {
			if t.Session != "" && t.Scope == scope {
				names = append(names, t.Session)
			}
		}
		return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeList completes from a fixed list.
func completeList(names ...string) completion {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// plainName reports whether s is a name completion may offer: 1 to 255
// bytes, a letter or digit first, then letters, digits and the bytes of
// more (no space, control character or quote a shell or terminal would
// act on). A plain loop: the tree is built on every `docker --help`, and a
// bounded regexp would be compiled then.
func plainName(s, more string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i, c := range []byte(s) {
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || strings.IndexByte(more, c) < 0) {
			return false
		}
	}
	return true
}

// imageRefChars and networkNameChars are what an image reference and a
// network name that completion offers may hold besides letters and digits.
const (
	imageRefChars    = "._/:@-"
	networkNameChars = "._-"
)

// completeImages completes an image: the engine's tagged images.
func completeImages(dockerCli command.Cli) completion {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		e := completeEngine(dockerCli)
		if e == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		imgs, err := e.ImageList(ctx, image.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for _, im := range imgs {
			for _, rt := range im.RepoTags {
				if rt != "<none>:<none>" && plainName(rt, imageRefChars) {
					names = append(names, rt)
				}
			}
		}
		slices.Sort(names)
		return withPrefix(slices.Compact(names), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeNetworks completes a network: fixed names first (none and proxy
// for a sandbox), then the engine's networks that a sandbox may join (not
// the plugin's own, nor host).
func completeNetworks(dockerCli command.Cli, fixed ...string) completion {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		names := append([]string(nil), fixed...)
		if e := completeEngine(dockerCli); e != nil {
			ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
			defer cancel()
			if nets, err := e.NetworkList(ctx, network.ListOptions{}); err == nil {
				var more []string
				for _, n := range nets {
					if plainName(n.Name, networkNameChars) && n.Name != "host" && n.Name != "none" && pluginNetwork(n.Name, n.Labels) == "" {
						more = append(more, n.Name)
					}
				}
				slices.Sort(more)
				names = append(names, more...)
			}
		}
		return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
	}
}

// completeFilters completes --filter KEY=VALUE: the keys, then states and
// names.
func completeFilters(dockerCli command.Cli, keys ...string) completion {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		key, _, ok := strings.Cut(toComplete, "=")
		if !ok {
			var ks []string
			for _, k := range keys {
				ks = append(ks, k+"=")
			}
			return withPrefix(ks, toComplete), cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
		}
		var values []string
		switch key {
		case "state":
			values = []string{sbexec.StateRunning, sbexec.StateIdle, sbexec.StateExpired, "starting", "paused", "stopping"}
		case "scope":
			values = scopeNames(cmd.Context(), completeEngine(dockerCli))
		case "session":
			for _, t := range engineTargets(cmd.Context(), completeEngine(dockerCli)) {
				if t.Session != "" && !slices.Contains(values, t.Session) {
					values = append(values, t.Session)
				}
			}
		}
		var out []string
		for _, v := range values {
			out = append(out, key+"="+v)
		}
		return withPrefix(out, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// registerFlagCompletions gives every command's flags of these names their
// completion: --scope, --session, --lang, --image, --base, --network,
// --outbound-network, --filter and --format.
func registerFlagCompletions(dockerCli command.Cli, root *cobra.Command) {
	flagCompletions := map[string]completion{
		"scope":            completeScopes(dockerCli, 0),
		"session":          completeSessions(dockerCli),
		"lang":             completeLangs(),
		"image":            completeImages(dockerCli),
		"base":             completeImages(dockerCli),
		"network":          completeNetworks(dockerCli, "none", "proxy"),
		"outbound-network": completeNetworks(dockerCli),
	}
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		for name, fn := range flagCompletions {
			if cmd.LocalFlags().Lookup(name) != nil {
				mustRegister(cmd, name, fn)
			}
		}
		if f := cmd.LocalFlags().Lookup("filter"); f != nil {
			keys := []string{"scope", "session", "state", "label"}
			if cmd.Name() == "prune" {
				keys = []string{"label"}
			}
			mustRegister(cmd, "filter", completeFilters(dockerCli, keys...))
		}
		if f := cmd.LocalFlags().Lookup("format"); f != nil {
			formats := []string{"json"}
			if strings.Contains(f.Usage, "table") {
				formats = append(formats, "table")
			}
			mustRegister(cmd, "format", completeList(formats...))
		}
		for _, c := range cmd.Commands() {
			walk(c)
		}
	}
	walk(root)
}

func mustRegister(cmd *cobra.Command, flag string, fn completion) {
	if err := cmd.RegisterFlagCompletionFunc(flag, fn); err != nil {
		panic(fmt.Sprintf("completion of --%s of %s: %v", flag, cmd.CommandPath(), err))
	}
}
