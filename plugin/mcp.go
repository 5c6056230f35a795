package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/docker/cli/cli"
	"github.com/docker/cli/cli/command"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/audit"
	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/files"
	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
	"github.com/docker-sandbox/docker-sandbox/mcpserver"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

type mcpOptions struct {
	scope    string
	session  string
	sessions bool
	env      []string
	envFiles []string
	egress   egressRuleFlags
}

func newMCPCommand(dockerCli command.Cli) *cobra.Command {
	var o mcpOptions
	cmd := &cobra.Command{
		Use:   "mcp [OPTIONS]",
		Short: "Serve a sandbox's tools to an MCP client over standard input and output",
		Long: `Serve the tools of one sandbox to a Model Context Protocol client (stdio):
run_code, run_command, read_file, write_file, list_files, delete_file,
copy_from_session and reset; with --sessions also create_session,
list_sessions and stop_session under the same scope. The scope, session,
policy and limits come from the flags and the configuration files, as for
exec; a tool's input can never name another scope.`,
		Example: `  docker sandbox mcp --scope agent1
  docker sandbox mcp --scope agent1 --sessions --allow pypi.org --memory 2g`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Standard output carries the protocol: errors go to stderr only.
			return fail(io.Discard, "", runMCP(cmd.Context(), dockerCli, cmd, &o))
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	f := cmd.Flags()
	f.StringVarP(&o.scope, "scope", "s", "", "Scope that owns the data (default \"default\" or config default_scope)")
	f.StringVar(&o.session, "session", "", "Session under the scope (default: the scope's own sandbox)")
	f.BoolVar(&o.sessions, "sessions", false, "Let the model create, list and stop sessions of the scope, and address them in the other tools")
	f.StringArrayVarP(&o.env, "env", "e", nil, "Set an environment variable of every program (KEY=VALUE, or KEY to pass the host's value)")
	f.StringArrayVar(&o.envFiles, "env-file", nil, "Read environment variables from a file")
	o.egress.add(f, true)
	config.AddFlags(f, config.FlagsRun, config.FlagsSandbox)
	return cmd
}

// runMCP serves until the client closes standard input, or SIGINT/SIGTERM
// (running programs are then stopped).
func runMCP(ctx context.Context, dockerCli command.Cli, cmd *cobra.Command, o *mcpOptions) error {
	c, err := loadConfig()
	if err != nil {
		return err
	}
	if err := applyFlags(cmd.Flags(), c); err != nil {
		return err
	}
	egRules, err := execEgress(cmd, c, o.egress)
	if err != nil {
		return err
	}
	target, err := execTarget(c, &execOptions{scope: o.scope, session: o.session}, cmd.Flags().Changed("scope"))
	if err != nil {
		return err
	}
	env, err := execEnv(o.env, o.envFiles, os.LookupEnv)
	if err != nil {
		return err
	}
	limits, err := copyLimits(c, nil)
	if err != nil {
		return err
	}
	a := &mcpSandbox{cli: dockerCli, loaded: c, egRules: egRules, env: env, limits: limits}
	srv := mcpserver.New(mcpserver.Config{
		Target: target, Sessions: o.sessions,
		Runner: a, Files: mcpFiles{a}, Sandboxes: a,
		RunSchema:  execSchema(),
		MaxTimeout: c.MaxTimeout, MaxRead: c.MaxOutput, Version: Version,
	})
	ctx, cancel := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer cancel()
	err = srv.Serve(ctx, os.Stdin, os.Stdout)
	if err == nil || errors.Is(err, io.EOF) || ctx.Err() != nil {
		return nil // the client went away, or we were told to stop
	}
	return core.Wrap(core.CodeInternal, err, "mcp server")
}

// execSchema is the JSON schema of exec's --format json result.
func execSchema() *jsonschema.Schema {
	s, err := jsonschema.For[execJSON](nil)
	if err != nil {
		panic(err)
	}
	return s
}

// mcpSandbox implements the MCP server's Runner and Sandboxes over the
// code paths of exec and stop, and (mcpFiles) its Files over the copier of
// files and cp.
type mcpSandbox struct {
	cli     command.Cli
	loaded  *config.Config // as loaded, with the flags
	egRules *policy.Rules
	env     []string
	limits  tarsafe.Limits

	mu     sync.Mutex
	ready  *config.Config // loaded, with its runtime resolved
	copier *files.Copier
}

// config is the configuration with its runtime resolved against the
// engine, on the first call that reaches the engine (a call while it is
// unreachable fails; a later one tries again).
func (a *mcpSandbox) config(ctx context.Context) (*config.Config, *files.Copier, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ready == nil {
		c := *a.loaded
		if err := resolveConfigRuntime(ctx, engineAPI(a.cli), &c); err != nil {
			return nil, nil, err
		}
		a.ready, a.copier = &c, copier(a.cli, &c, a.limits, false)
	}
	return a.ready, a.copier, nil
}

func (a *mcpSandbox) CheckLanguage(name string) error {
	_, err := sbexec.DetectLanguage(name, "", nil, a.loaded.DefaultLang, configuredLanguages(a.loaded)...)
	return err
}

// Run runs r as `exec --format json` does and returns its JSON.
func (a *mcpSandbox) Run(ctx context.Context, t core.Target, r mcpserver.Run) (json.RawMessage, error) {
	c, _, err := a.config(ctx)
	if err != nil {
		return nil, err
	}
	name := r.Language
	if r.Command {
		name = "sh"
	}
	lang, err := sbexec.DetectLanguage(name, "", r.Code, c.DefaultLang, configuredLanguages(c)...)
	if err != nil {
		return nil, err
	}
	workdir, err := sbexec.ResolveWorkdir(r.Workdir)
	if err != nil {
		return nil, err
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = c.Timeout
	}
	// run_code in python or node runs in the sandbox's kernel unless the
	// call said stateless (exec --kernel).
	_, kernel := sbexec.KernelOf(lang)
	kernel = kernel && r.Kernel && !r.Command
	var outBuf, errBuf bytes.Buffer
	req := sbexec.Request{Lang: lang, Code: r.Code, Env: a.env, Workdir: workdir,
		Timeout: timeout, MaxOutput: c.MaxOutput, Stdout: &outBuf, Stderr: &errBuf, Kernel: kernel}
	// The audit trail: one record per tool call that ran something, with
	// the MCP client's name.
	au := newAuditor(a.cli, c)
	var outCap, errCap *audit.Capture
	req.Stdout, outCap = au.tee(req.Stdout)
	req.Stderr, errCap = au.tee(req.Stderr)
	record := func(res sbexec.Result, runErr error) {
		rec := execRecord(t, lang.Name, r.Code, au.maxCode(), nil, a.env, 0, res, runErr, ctx.Err() != nil)
		if kernel {
			kernelRecord(&rec, res.Status, false)
		}
		rec.Command = strings.TrimSpace("mcp " + r.Tool + strings.TrimPrefix(rec.Command, "exec"))
		rec.MCPClient = r.Client
		au.record(rec, outCap, errCap)
	}
	out, err := execute(ctx, a.cli, c, t, a.egRules, req, false, true, record)
	if err != nil {
		return nil, err
	}
	out.stdout, out.stderr = outBuf.String(), errBuf.String()
	var js bytes.Buffer
	if err := out.reportJSON(&js, "json"); err != nil {
		var st cli.StatusError
		if !errors.As(err, &st) { // a non-zero exit is in the JSON
			return nil, err
		}
	}
	return json.RawMessage(bytes.TrimSpace(js.Bytes())), nil
}

// Stop removes t's own container, as stop does for a listed sandbox.
func (a *mcpSandbox) Stop(ctx context.Context, t core.Target, force bool) (bool, error) {
	return manager(a.cli, nil).StopExact(ctx, t, force)
}

// List lists the scope's sandboxes, as ls -a --filter scope=SCOPE.
func (a *mcpSandbox) List(ctx context.Context, scope string) ([]*sbexec.Sandbox, error) {
	return manager(a.cli, nil).List(ctx, sbexec.ListOptions{All: true, Filter: sbexec.Filter{Scopes: []string{scope}}})
}

// mcpFiles is the files copier of files and cp, once the runtime is
// resolved.
type mcpFiles struct{ a *mcpSandbox }

func (f mcpFiles) cp(ctx context.Context) (*files.Copier, error) {
	_, cp, err := f.a.config(ctx)
	return cp, err
}

// record writes the audit records of the tool call of ctx that moved
// something, with the MCP client's name (the config as loaded: a call whose
// engine setup failed is recorded too).
func (f mcpFiles) record(ctx context.Context, recs ...audit.Record) {
	for i := range recs {
		recs[i].MCPClient = mcpserver.Client(ctx)
	}
	au := newAuditor(f.a.cli, f.a.loaded)
	au.recordEach(recs, nil, nil)
}

func (f mcpFiles) List(ctx context.Context, loc files.Location, recursive bool, each func(fsproto.Entry) error) error {
	cp, err := f.cp(ctx)
	if err != nil {
		return err
	}
	return cp.List(ctx, loc, recursive, each)
}

func (f mcpFiles) Cat(ctx context.Context, loc files.Location, w io.Writer) error {
	cp, err := f.cp(ctx)
	if err != nil {
		return err
	}
	return cp.Cat(ctx, loc, w)
}

func (f mcpFiles) Put(ctx context.Context, loc files.Location, r io.Reader, mode string) (res fsproto.PutResult, err error) {
	in := &audit.CountingReader{R: r}
	defer func() { f.record(ctx, filesRecord("mcp write_file", loc, in.N, err)) }()
	cp, err := f.cp(ctx)
	if err != nil {
		return fsproto.PutResult{}, err
	}
	return cp.Put(ctx, loc, in, mode)
}

func (f mcpFiles) Remove(ctx context.Context, loc files.Location, recursive, force bool) (res fsproto.RmResult, err error) {
	defer func() { f.record(ctx, filesRecord("mcp delete_file", loc, 0, err)) }()
	cp, err := f.cp(ctx)
	if err != nil {
		return fsproto.RmResult{}, err
	}
	return cp.Remove(ctx, loc, recursive, force)
}

func (f mcpFiles) Copy(ctx context.Context, src, dst files.Location, stdin io.Reader, stdout io.Writer) (res *tarsafe.Result, err error) {
	defer func() {
		recs := cpRecords(cpArgs{src: src, dst: dst, srcArg: src.String(), dstArg: dst.String()}, res, err)
		for i := range recs {
			recs[i].Command = "mcp copy_from_session"
		}
		f.record(ctx, recs...)
	}()
	cp, err := f.cp(ctx)
	if err != nil {
		return nil, err
	}
	return cp.Copy(ctx, src, dst, stdin, stdout)
}
