package plugin

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/docker/cli/cli"
	"github.com/docker/cli/cli/command"
	"github.com/docker/cli/opts"
	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/audit"
	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

type execOptions struct {
	code     string
	codeSet  bool
	lang     string
	scope    string
	session  string
	env      []string
	envFiles []string
	workdir  string
	egress   egressRuleFlags
	rm       bool
	format   string
}

func newExecCommand(dockerCli command.Cli) *cobra.Command {
	var o execOptions
	cmd := &cobra.Command{
		Use:   "exec [OPTIONS] [FILE|-] [-- ARGS...]",
		Short: "Run code in a sandbox: from FILE, -c CODE, or standard input",
		Example: `  echo 'print(6*7)' | docker sandbox exec --lang python
  docker sandbox exec script.py -- --verbose input.txt
  docker sandbox exec -s u1 --session chatA -c 'echo hi > notes.txt'
  docker sandbox exec --format json -c 'console.log(1)' --lang node`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.codeSet = cmd.Flags().Changed("code")
			return fail(dockerCli.Out(), o.format, runExec(cmd.Context(), dockerCli, cmd, args, &o))
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	f := cmd.Flags()
	f.SetInterspersed(false) // flags after FILE belong to the program
	f.StringVarP(&o.code, "code", "c", "", "Code to run")
	f.StringVar(&o.lang, "lang", "", "Language: python, node, bash, sh (default: from FILE's extension, the shebang, config, else sh)")
	f.StringVarP(&o.scope, "scope", "s", "", "Scope that owns the data (default \"default\" or config default_scope)")
	f.StringVar(&o.session, "session", "", "Session under the scope, with its own workspace")
	f.StringArrayVarP(&o.env, "env", "e", nil, "Set an environment variable (KEY=VALUE, or KEY to pass the host's value)")
	f.StringArrayVar(&o.envFiles, "env-file", nil, "Read environment variables from a file")
	f.StringVarP(&o.workdir, "workdir", "w", "", "Working directory inside the workspace (relative to /opt/workspace)")
	o.egress.add(f, true)
	config.AddFlags(f, config.FlagsRun, config.FlagsSandbox)
	f.BoolVar(&o.rm, "rm", false, "One-shot: remove the sandbox's container and data after the run")
	f.StringVar(&o.format, "format", "", "Output format: json, or a Go template (default: the program's own output)")
	return cmd
}

// execJSON is the --format json schema of exec.
type execJSON struct {
	Scope     string  `json:"scope"`
	Session   string  `json:"session"`
	Container string  `json:"container"`
	Image     string  `json:"image"`
	Runtime   string  `json:"runtime"`
	Lang      string  `json:"lang"`
	ExitCode  int     `json:"exit_code"`
	Signal    *string `json:"signal"`
	TimedOut  bool    `json:"timed_out"`
	OOMKilled bool    `json:"oom_killed"`
	// SandboxRestarted: the program's memory use killed its whole sandbox
	// container (gVisor): processes and files outside the volumes are
	// gone, and the next call starts a new container.
	SandboxRestarted bool   `json:"sandbox_restarted"`
	Stdout           string `json:"stdout"`
	Stderr           string `json:"stderr"`
	StdoutTruncated  bool   `json:"stdout_truncated"`
	StderrTruncated  bool   `json:"stderr_truncated"`
	DurationMS       int64  `json:"duration_ms"`
	Created          bool   `json:"created"`
	// Kernel calls (--kernel) only: the value of the last expression
	// (result), whether this call started a fresh kernel or killed it
	// (kernel_restarted), and whether the kernel's state is gone
	// (state_lost).
	Result          *string `json:"result,omitempty"`
	KernelRestarted bool    `json:"kernel_restarted,omitempty"`
	StateLost       bool    `json:"state_lost,omitempty"`
	// Error is set when the sandbox stopped the program (disk_limit,
	// lifetime_reached) or its kernel died (kernel_died): the output up to
	// then is above.
	Error *errorBody `json:"error,omitempty"`
}

// runExec runs the code of one exec call, in steps: the configuration and
// flags, the target, the environment, the code, the Spec, the network, the
// run, the --rm cleanup and the result.
func runExec(ctx context.Context, dockerCli command.Cli, cmd *cobra.Command, args []string, o *execOptions) error {
	core.Debugf("runExec start")
	c, err := loadConfig()
	if err != nil {
		return err
	}
	core.Debugf("config loaded")
	if err := applyFlags(cmd.Flags(), c); err != nil {
		return err
	}
	egRules, err := execEgress(cmd, c, o.egress)
	if err != nil {
		return err
	}
	target, err := execTarget(c, o, cmd.Flags().Changed("scope"))
	if err != nil {
		return err
	}
	workdir, err := sbexec.ResolveWorkdir(o.workdir)
	if err != nil {
		return err
	}
	env, err := execEnv(o.env, o.envFiles, os.LookupEnv)
	if err != nil {
		return err
	}
	src, err := execCode(dockerCli.In(), cmd.ArgsLenAtDash(), args, o)
	if err != nil {
		return err
	}
	lang, err := sbexec.DetectLanguage(o.lang, src.fileName, src.code, c.DefaultLang, configuredLanguages(c)...)
	if err != nil {
		return err
	}

	useKernel := c.Kernel || c.KernelReset
	if _, ok := sbexec.KernelOf(lang); useKernel && !ok {
		// Asked for on the command line: an error; by the configuration
		// (kernel = true): python and node only, other code runs as usual.
		if cmd.Flags().Changed("kernel") || cmd.Flags().Changed("kernel-reset") {
			return core.Errorf(core.CodeBadFlag, "--kernel runs python and node code, not %s: drop --kernel, or choose --lang python or --lang node", lang.Name)
		}
		useKernel = false
	}
	if useKernel && len(src.args) > 0 {
		return core.Errorf(core.CodeBadFlag, "--kernel takes no program arguments (got %q): the kernel runs code, not a program", src.args)
	}

	jsonMode := o.format != ""
	var outBuf, errBuf bytes.Buffer
	req := sbexec.Request{
		Lang: lang, Code: src.code, Args: src.args, Env: env, Workdir: workdir,
		Timeout: c.Timeout, MaxOutput: c.MaxOutput, Stdin: src.stdin,
		Stdout: dockerCli.Out(), Stderr: dockerCli.Err(),
		Kernel: useKernel, KernelReset: c.KernelReset,
	}
	if useKernel {
		req.Stdin = nil // a kernel reads no standard input
	}
	if jsonMode {
		req.Stdout, req.Stderr = &outBuf, &errBuf
	}
	// The audit trail keeps the first audit_max_output bytes of each stream.
	au := newAuditor(dockerCli, c)
	stdin := &audit.CountingReader{R: req.Stdin}
	if au.on() && req.Stdin != nil {
		req.Stdin = stdin
	}
	var outCap, errCap *audit.Capture
	req.Stdout, outCap = au.tee(req.Stdout)
	req.Stderr, errCap = au.tee(req.Stderr)

	// Ctrl-C: stop waiting; closing the stream ends the program's exec.
	ctx, cancel := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer cancel()
	record := func(res sbexec.Result, runErr error) {
		rec := execRecord(target, lang.Name, src.code, au.maxCode(), src.args, env, stdin.N, res, runErr, ctx.Err() != nil)
		if useKernel {
			kernelRecord(&rec, res.Status, c.KernelReset)
		}
		au.record(rec, outCap, errCap)
	}
	r, err := execute(ctx, dockerCli, c, target, egRules, req, o.rm, jsonMode, record)
	if err != nil {
		return err
	}
	r.stdout, r.stderr = outBuf.String(), errBuf.String()
	if !jsonMode {
		return r.reportPlain(dockerCli.Out(), dockerCli.Err())
	}
	return r.reportJSON(dockerCli.Out(), o.format)
}

// execute runs req in target's sandbox, as exec and the MCP server's run
// tools do: the Spec, its runtime, the network (egRules from execEgress),
// the run, the cleanup (rm: --rm) and the outcome; jsonMode also finds the
// runtime and container for the JSON result. A cancelled ctx stops the
// program (interrupted). after (when not nil) gets the run's result and
// error once it ended and was cleaned up (the audit record).
func execute(ctx context.Context, dockerCli command.Cli, c *config.Config, target core.Target, egRules *policy.Rules, req sbexec.Request, rm, jsonMode bool, after func(sbexec.Result, error)) (*execOutcome, error) {
	b := builder(dockerCli, c)
	spec := sandboxSpec(c, b, target)
	var err error
	// The runtime for the sandbox's network (auto; proxy mode under gVisor
	// needs a --network=host runtime), before the egress side makes anything.
	if spec.Runtime, err = resolveRuntime(ctx, engineAPI(dockerCli), spec.Runtime, spec.Network); err != nil {
		return nil, err
	}
	m := manager(dockerCli, c)
	joined, err := joinNetwork(ctx, dockerCli, m, c, &spec, egRules)
	if err != nil {
		return nil, err
	}
	core.Debugf("before run")
	req.OneShot = rm
	res, runErr := m.Run(ctx, spec, req)
	core.Debugf("after run")
	if runErr != nil {
		joined.Failed(ctx, res.Created)
	}
	// The runtime it ran under and its container, for the JSON result
	// (before --rm removes the container).
	var ranUnder, ctrID string
	if jsonMode && runErr == nil {
		ranUnder, ctrID = m.SandboxRuntime(ctx, spec)
	}
	removed, runErr := execCleanup(ctx, m, dockerCli.Err(), target, res, runErr, rm)
	if after != nil {
		after(res, runErr)
	}
	if ctx.Err() != nil {
		// Ctrl-C: the helper was told to stop the program.
		return nil, &core.Error{Code: "interrupted", Message: "interrupted: the program was stopped", Exit: 130}
	}
	if runErr != nil {
		return nil, runErr
	}
	return &execOutcome{c: c, spec: spec, lang: req.Lang, res: res, removed: removed, runtime: ranUnder, ctrID: ctrID}, nil
}

// execTarget is the sandbox of the call: --scope (else the configured
// default scope) and --session.
func execTarget(c *config.Config, o *execOptions, scopeSet bool) (core.Target, error) {
	scope := c.DefaultScope
	if scopeSet {
		scope = o.scope
	}
	target := core.Target{Scope: scope, Session: o.session}
	return target, target.Validate()
}

// execEnv is the program's environment from -e and --env-file: -e KEY
// takes the host's value (lookup) and is dropped when the host has none, as
// with docker run; -e wins over the files.
func execEnv(flags, files []string, lookup func(string) (string, bool)) ([]string, error) {
	var flagEnv []string
	for _, kv := range flags {
		if !strings.Contains(kv, "=") {
			v, ok := lookup(kv)
			if !ok {
				continue
			}
			kv += "=" + v
		}
		flagEnv = append(flagEnv, kv)
	}
	env, err := opts.ReadKVEnvStrings(files, flagEnv)
	if err != nil {
		return nil, core.Wrap(core.CodeBadFlag, err, "invalid --env or --env-file")
	}
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == "" || strings.ContainsAny(k, " \x00") {
			return nil, core.Errorf(core.CodeBadFlag, "invalid environment variable %q: the name must be non-empty and have no spaces", kv)
		}
	}
	return env, nil
}

// execSource is the code of a call, where it came from, and the program's
// arguments and stdin.
type execSource struct {
	code     []byte
	fileName string // FILE, "" for -c and standard input
	args     []string
	stdin    io.Reader // nil when the code came on standard input
}

// execCode reads the code: -c CODE, FILE, or standard input (in).
func execCode(in io.Reader, dash int, args []string, o *execOptions) (execSource, error) {
	src, fileName, progArgs := splitExecArgs(dash, args, o.codeSet)
	s := execSource{fileName: fileName, args: progArgs}
	switch src {
	case codeFromFlag:
		s.code, s.stdin = []byte(o.code), in
	case codeFromStdin:
		code, err := io.ReadAll(io.LimitReader(in, wire.MaxCode+1))
		if err != nil {
			return s, core.Wrap(core.CodeBadFlag, err, "cannot read the code from standard input")
		}
		if len(code) > wire.MaxCode {
			return s, core.Errorf(core.CodeBadFlag, "the code on standard input is over the %d MiB limit", wire.MaxCode>>20)
		}
		s.code = code
	default:
		fi, err := os.Stat(fileName)
		if err != nil {
			return s, core.Errorf(core.CodeFileNotFound, "cannot read FILE %s: %v", fileName, strings.TrimPrefix(err.Error(), "stat "+fileName+": "))
		}
		if fi.IsDir() {
			return s, core.Errorf(core.CodeFileNotFound, "FILE %s is a directory: give a file of code", fileName)
		}
		if fi.Size() > wire.MaxCode {
			return s, core.Errorf(core.CodeBadFlag, "FILE %s is over the %d MiB limit for code", fileName, wire.MaxCode>>20)
		}
		code, err := os.ReadFile(fileName)
		if err != nil {
			return s, core.Errorf(core.CodeFileNotFound, "cannot read FILE %s: %v", fileName, err)
		}
		s.code, s.stdin = code, in
	}
	return s, nil
}

// execCleanup removes what the run created (RemoveCreated) with --rm, and
// when the image could not run the language at all (interpreter missing or
// not executable: a setup failure, and a container kept with that image
// would refuse the next call as a mismatch). A sandbox that existed before
// (with its data, maybe running other execs) stays; with --rm a line on
// errOut says so. It reports whether the container was removed, and the
// run's error, else the cleanup's.
func execCleanup(ctx context.Context, m *sbexec.Manager, errOut io.Writer, target core.Target, res sbexec.Result, runErr error, rm bool) (bool, error) {
	setupFailed := res.Status.ErrorCode == wire.ErrInterpreterNotFound || res.Status.ErrorCode == wire.ErrInterpreterNoExec
	if !rm && !(setupFailed && res.Created) {
		return false, runErr
	}
	if !res.Created && runErr == nil && rm {
		fmt.Fprintf(errOut, "docker sandbox: --rm: sandbox %s existed before this call and stays; remove it with `docker sandbox rm %s`\n", target, target)
	}
	bg, done := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer done()
	removed, rmErr := m.RemoveCreated(bg, target, res)
	if runErr == nil {
		runErr = rmErr
	}
	return removed, runErr
}

// execOutcome is a finished run, to report.
type execOutcome struct {
	c              *config.Config
	spec           sbexec.Spec
	lang           sbexec.Language
	res            sbexec.Result
	removed        bool   // --rm removed the container
	runtime        string // the runtime it ran under (JSON mode)
	ctrID          string // its container's short ID before any --rm (JSON mode)
	stdout, stderr string // the output, in JSON mode
}

// stopped maps the run's status to the error the call ends with (err), or
// to the error object of a program the sandbox stopped after it ran
// (disk_limit, lifetime_reached: its output up to then is reported).
func (r *execOutcome) stopped() (stoppedBy *errorBody, err error) {
	st := r.res.Status
	switch st.ErrorCode {
	case "":
		return nil, nil
	case wire.ErrDiskLimit, wire.ErrLifetime:
		code := core.CodeDiskLimit
		if st.ErrorCode == wire.ErrLifetime {
			code = core.CodeLifetimeReached
		}
		return &errorBody{Code: code, Message: st.Error}, nil
	case wire.ErrKernelDied:
		return &errorBody{Code: core.CodeKernelDied, Message: st.Error}, nil
	case wire.ErrInterpreterNotFound, wire.ErrInterpreterNoExec:
		code := core.CodeInterpreterMissing
		if st.ErrorCode == wire.ErrInterpreterNoExec {
			code = core.CodeInterpreterNoExec
		}
		return nil, &core.Error{Code: code, Message: fmt.Sprintf("%s (image %s)", st.Error, r.spec.Image), Exit: st.ExitCode}
	default:
		return nil, core.Errorf(st.ErrorCode, "%s", st.Error)
	}
}

// exit is the call's end: the program's exit status.
func (r *execOutcome) exit() error {
	if r.res.Status.ExitCode != 0 {
		return cli.StatusError{StatusCode: r.res.Status.ExitCode}
	}
	return nil
}

// reportPlain reports the run when the output streamed: a kernel's result
// on out, why the sandbox stopped the program, if it did, on errOut.
func (r *execOutcome) reportPlain(out, errOut io.Writer) error {
	stoppedBy, err := r.stopped()
	if err != nil {
		return err
	}
	st := r.res.Status
	if st.Result != nil {
		fmt.Fprintln(out, *st.Result)
	}
	switch {
	case stoppedBy != nil:
		fmt.Fprintf(errOut, "docker sandbox: %s\n", stoppedBy.Message)
	case st.TimedOut && st.StateLost:
		fmt.Fprintf(errOut, "docker sandbox: killed at --timeout %s: the kernel did not stop when interrupted, it was restarted and its state is lost\n", r.c.Timeout)
	case st.TimedOut && (r.c.Kernel || r.c.KernelReset):
		fmt.Fprintf(errOut, "docker sandbox: interrupted at --timeout %s; the kernel keeps its state\n", r.c.Timeout)
	case st.KernelRestarted && st.Error != "":
		fmt.Fprintf(errOut, "docker sandbox: %s\n", st.Error)
	case st.TimedOut:
		fmt.Fprintf(errOut, "docker sandbox: killed at --timeout %s\n", r.c.Timeout)
	case st.OOMKilled && r.res.SandboxRestarted:
		fmt.Fprintf(errOut, "docker sandbox: killed: out of memory (--memory %s); the sandbox's container went with it (gVisor): the next call starts a new one, with the same volumes\n", units.BytesSize(float64(r.c.Memory)))
	case st.OOMKilled:
		fmt.Fprintf(errOut, "docker sandbox: killed: out of memory (--memory %s)\n", units.BytesSize(float64(r.c.Memory)))
	case r.res.SandboxRestarted:
		fmt.Fprintf(errOut, "docker sandbox: killed: the program took the sandbox's container down (gVisor: e.g. at the --pids limit %d); the next call starts a new one, with the same volumes\n", r.c.Pids)
	}
	if st.StdoutTruncated || st.StderrTruncated {
		fmt.Fprintf(errOut, "docker sandbox: output truncated at --max-output %s per stream\n", units.BytesSize(float64(r.c.MaxOutput)))
	}
	return r.exit()
}

// reportJSON reports the run as one execJSON object (--format).
func (r *execOutcome) reportJSON(out io.Writer, format string) error {
	stoppedBy, err := r.stopped()
	if err != nil {
		return err
	}
	st, res := r.res.Status, r.res
	j := execJSON{
		Scope: r.spec.Scope, Session: r.spec.Session, Container: res.Container, Image: r.spec.Image, Lang: r.lang.Name,
		Runtime: r.runtime, SandboxRestarted: res.SandboxRestarted,
		ExitCode: st.ExitCode, TimedOut: st.TimedOut, OOMKilled: st.OOMKilled,
		Stdout: r.stdout, Stderr: r.stderr,
		StdoutTruncated: st.StdoutTruncated, StderrTruncated: st.StderrTruncated,
		DurationMS: res.Duration.Milliseconds(), Created: res.Created, Error: stoppedBy,
		Result: st.Result, KernelRestarted: st.KernelRestarted, StateLost: st.StateLost,
	}
	if st.Signal != 0 {
		s := signalName(st.Signal)
		j.Signal = &s
	}
	switch {
	case r.removed:
		j.Container = "" // --rm removed it: there is no container
	case j.Container == "":
		j.Container = r.ctrID
	}
	if err := writeFormatted(out, format, j, nil); err != nil {
		return err
	}
	return r.exit()
}

// Where exec's code comes from.
const (
	codeFromFlag  = "flag"  // -c CODE
	codeFromStdin = "stdin" // no FILE, or FILE "-"
	codeFromFile  = "file"
)

// splitExecArgs tells where the code comes from and what the program's
// arguments are, from exec's positional arguments and the position of a "--"
// the flag parser took (dash, -1 for none). The first "--" ends the
// plugin's flags and is not passed on: before FILE or "-" the parser takes
// it (-c CODE -- ARGS, exec -- ARGS); directly after FILE or "-" (flags end
// at FILE, so the parser leaves it) it is dropped here. Any later "--" is the
// program's, as are arguments that look like flags.
func splitExecArgs(dash int, args []string, codeSet bool) (src, fileName string, progArgs []string) {
	positional := args
	if dash >= 0 {
		positional, progArgs = args[:dash], args[dash:]
	}
	afterFile := func(rest []string) []string {
		if dash < 0 && len(rest) > 0 && rest[0] == "--" {
			return rest[1:]
		}
		return rest
	}
	switch {
	case codeSet:
		return codeFromFlag, "", append(positional, progArgs...)
	case len(positional) == 0:
		return codeFromStdin, "", progArgs
	case positional[0] == "-":
		return codeFromStdin, "", append(afterFile(positional[1:]), progArgs...)
	default:
		return codeFromFile, positional[0], append(afterFile(positional[1:]), progArgs...)
	}
}

// linuxSignals names Linux's signal numbers: the program ran on a Linux
// engine, whatever the client's OS (whose numbers differ).
var linuxSignals = [...]string{1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT",
	7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE",
	14: "SIGALRM", 15: "SIGTERM", 16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP",
	21: "SIGTTIN", 22: "SIGTTOU", 23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ", 26: "SIGVTALRM", 27: "SIGPROF",
	28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS"}

func signalName(n int) string {
	if n > 0 && n < len(linuxSignals) && linuxSignals[n] != "" {
		return linuxSignals[n]
	}
	return fmt.Sprintf("SIG%d", n)
}
