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

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

type execOptions struct {
	code      string
	codeSet   bool
	lang      string
	scope     string
	session   string
	timeout   string
	env       []string
	envFiles  []string
	workdir   string
	image     string
	network   string
	allow     []string
	allowPort []string
	allowCIDR []string
	memory    string
	cpus      string
	pids      string
	runtime   string
	idleTTL   string
	maxLife   string
	disk      string
	rm        bool
	maxOutput string
	format    string
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
	f.StringVar(&o.timeout, "timeout", "", "Kill the program after this long (default 60s; at most config max_timeout, 1h by default: a larger value is refused)")
	f.StringArrayVarP(&o.env, "env", "e", nil, "Set an environment variable (KEY=VALUE, or KEY to pass the host's value)")
	f.StringArrayVar(&o.envFiles, "env-file", nil, "Read environment variables from a file")
	f.StringVarP(&o.workdir, "workdir", "w", "", "Working directory inside the workspace (relative to /opt/workspace)")
	f.StringVar(&o.image, "image", "", "Image to run in (default: the built-in runtime image)")
	f.StringVar(&o.network, "network", "", "Network: none (default), proxy (only through the egress proxy, under the scope's allowlist), or a Docker network's name")
	f.StringSliceVar(&o.allow, "allow", nil, "Allow egress to HOST: pypi.org, *.example.com, * (implies --network proxy; repeatable)")
	f.StringSliceVar(&o.allowPort, "allow-port", nil, "Allowed destination port (default 80 and 443; implies --network proxy; repeatable)")
	f.StringSliceVar(&o.allowCIDR, "allow-cidr", nil, "Allowed address range, private ones included (implies --network proxy; repeatable)")
	f.StringVarP(&o.memory, "memory", "m", "", "Memory limit, swap included (default 1g)")
	f.StringVar(&o.cpus, "cpus", "", "Number of CPUs (default 1)")
	f.StringVar(&o.pids, "pids", "", "Process limit (default 256)")
	f.StringVar(&o.runtime, "runtime", "", "Container runtime, e.g. runsc (must be registered on the engine)")
	f.StringVar(&o.idleTTL, "idle-ttl", "", "Remove the sandbox's container after this long idle (default 10m, 0 = never)")
	f.StringVar(&o.maxLife, "max-lifetime", "", "Remove the sandbox's container at this age, even while busy (default 0 = never; data stays)")
	f.StringVar(&o.disk, "disk", "", "Limit of what /opt/workspace and /opt/user may hold together (default 10GiB, 0 = none)")
	f.BoolVar(&o.rm, "rm", false, "One-shot: remove the sandbox's container and data after the run")
	f.StringVar(&o.maxOutput, "max-output", "", "Cap on each of stdout and stderr (default 1MiB)")
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
	// Error is set when the sandbox stopped the program (disk_limit,
	// lifetime_reached): the output up to then is above.
	Error *errorBody `json:"error,omitempty"`
}

func runExec(ctx context.Context, dockerCli command.Cli, cmd *cobra.Command, args []string, o *execOptions) error {
	core.Debugf("runExec start")
	c, err := loadConfig()
	if err != nil {
		return err
	}
	core.Debugf("config loaded")
	if err := applyFlags(cmd, c, map[string]string{
		"timeout": "timeout", "image": "image", "network": "network",
		"memory": "memory", "cpus": "cpus", "pids": "pids", "runtime": "runtime", "idle-ttl": "idle_ttl",
		"max-output": "max_output", "max-lifetime": "max_lifetime", "disk": "disk",
	}); err != nil {
		return err
	}
	egPlan, err := egPlanExec(cmd, c, o.allow, o.allowPort, o.allowCIDR)
	if err != nil {
		return err
	}
	scope := c.DefaultScope
	if cmd.Flags().Changed("scope") {
		scope = o.scope
	}
	target := core.Target{Scope: scope, Session: o.session}
	if err := target.Validate(); err != nil {
		return err
	}
	workdir, err := sbexec.ResolveWorkdir(o.workdir)
	if err != nil {
		return err
	}
	// -e KEY takes the host's value (and is dropped when the host has none),
	// as with docker run.
	var flagEnv []string
	for _, kv := range o.env {
		if !strings.Contains(kv, "=") {
			v, ok := os.LookupEnv(kv)
			if !ok {
				continue
			}
			kv += "=" + v
		}
		flagEnv = append(flagEnv, kv)
	}
	env, err := opts.ReadKVEnvStrings(o.envFiles, flagEnv)
	if err != nil {
		return core.Wrap(core.CodeBadFlag, err, "invalid --env or --env-file")
	}
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == "" || strings.ContainsAny(k, " \x00") {
			return core.Errorf(core.CodeBadFlag, "invalid environment variable %q: the name must be non-empty and have no spaces", kv)
		}
	}

	// Where the code comes from, and what the program's stdin is.
	var (
		code  []byte
		stdin io.Reader
	)
	src, fileName, progArgs := splitExecArgs(cmd.ArgsLenAtDash(), args, o.codeSet)
	switch src {
	case codeFromFlag:
		code = []byte(o.code)
		stdin = dockerCli.In()
	case codeFromStdin:
		code, err = io.ReadAll(io.LimitReader(dockerCli.In(), wire.MaxCode+1))
		if err != nil {
			return core.Wrap(core.CodeBadFlag, err, "cannot read the code from standard input")
		}
		if len(code) > wire.MaxCode {
			return core.Errorf(core.CodeBadFlag, "the code on standard input is over the %d MiB limit", wire.MaxCode>>20)
		}
	default:
		fi, err := os.Stat(fileName)
		if err != nil {
			return core.Errorf(core.CodeFileNotFound, "cannot read FILE %s: %v", fileName, strings.TrimPrefix(err.Error(), "stat "+fileName+": "))
		}
		if fi.IsDir() {
			return core.Errorf(core.CodeFileNotFound, "FILE %s is a directory: give a file of code", fileName)
		}
		if fi.Size() > wire.MaxCode {
			return core.Errorf(core.CodeBadFlag, "FILE %s is over the %d MiB limit for code", fileName, wire.MaxCode>>20)
		}
		code, err = os.ReadFile(fileName)
		if err != nil {
			return core.Errorf(core.CodeFileNotFound, "cannot read FILE %s: %v", fileName, err)
		}
		stdin = dockerCli.In()
	}
	lang, err := sbexec.DetectLanguage(o.lang, fileName, code, c.DefaultLang)
	if err != nil {
		return err
	}

	b := builder(dockerCli, c)
	imageRef := c.Image
	if imageRef == "" {
		imageRef = b.RuntimeRef()
	}
	spec := sandboxSpec(c, target, imageRef)
	jsonMode := o.format != ""
	var outBuf, errBuf bytes.Buffer
	req := sbexec.Request{
		Lang: lang, Code: code, Args: progArgs, Env: env, Workdir: workdir,
		Timeout: c.Timeout, MaxOutput: c.MaxOutput, Stdin: stdin,
		Stdout: dockerCli.Out(), Stderr: dockerCli.Err(),
	}
	if jsonMode {
		req.Stdout, req.Stderr = &outBuf, &errBuf
	}

	// Ctrl-C: stop waiting; closing the stream ends the program's exec.
	ctx, cancel := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer cancel()

	// The runtime for the sandbox's network (proxy mode under gVisor needs
	// a --network=host runtime), before the egress plan makes anything.
	if spec.Runtime, err = resolveRuntime(ctx, dockerCli.Client(), spec.Runtime, egPlan.mode); err != nil {
		return err
	}
	if err := egPlan.apply(ctx, dockerCli, c, &spec); err != nil {
		return err
	}
	m := &sbexec.Manager{Engine: dockerCli.Client(), Images: b, Version: Version, MaxSandboxes: c.MaxSandboxes}
	core.Debugf("before run")
	res, runErr := m.Run(ctx, spec, req)
	core.Debugf("after run")
	if runErr != nil {
		egPlan.failed(ctx, spec, res.Created)
	}
	// What this call created goes again with --rm (one-shot), and when the
	// image could not run the language at all (interpreter missing or not
	// executable: a setup failure, and a container kept with that image
	// would refuse the next call as a mismatch). A sandbox that existed
	// before (with its data, maybe running other execs) stays.
	// The runtime it ran under, for the JSON result (before --rm removes
	// the container).
	var ranUnder, ctrID string
	if jsonMode && runErr == nil {
		ranUnder, ctrID = m.SandboxRuntime(ctx, spec)
	}
	setupFailed := res.Status.ErrorCode == wire.ErrInterpreterNotFound || res.Status.ErrorCode == wire.ErrInterpreterNoExec
	removed := false
	if o.rm || (setupFailed && res.Created) {
		bg, done := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		var rmErr error
		if res.Created {
			_, rmErr = m.StopCreated(bg, target, res.CreatedID)
			removed = rmErr == nil
		} else if runErr == nil && o.rm {
			fmt.Fprintf(dockerCli.Err(), "docker sandbox: --rm: sandbox %s existed before this call and stays; remove it with `docker sandbox rm %s`\n", target, target)
		}
		for _, v := range res.FreshVolumes {
			if err := dockerCli.Client().VolumeRemove(bg, v, true); err != nil && rmErr == nil {
				rmErr = core.EngineError(err, "--rm: cannot remove volume "+v)
			}
		}
		done()
		if runErr == nil && rmErr != nil {
			runErr = rmErr
		}
	}
	if ctx.Err() != nil {
		// Ctrl-C: the helper was told to stop the program.
		return &core.Error{Code: "interrupted", Message: "interrupted: the program was stopped", Exit: 130}
	}
	if runErr != nil {
		return runErr
	}
	st := res.Status
	var stoppedBy *errorBody // the sandbox stopped (or refused) the program
	switch st.ErrorCode {
	case "":
	case wire.ErrDiskLimit, wire.ErrLifetime:
		code := core.CodeDiskLimit
		if st.ErrorCode == wire.ErrLifetime {
			code = core.CodeLifetimeReached
		}
		stoppedBy = &errorBody{Code: code, Message: st.Error}
	case wire.ErrInterpreterNotFound, wire.ErrInterpreterNoExec:
		code := core.CodeInterpreterMissing
		if st.ErrorCode == wire.ErrInterpreterNoExec {
			code = core.CodeInterpreterNoExec
		}
		return &core.Error{Code: code, Message: fmt.Sprintf("%s (image %s)", st.Error, spec.Image), Exit: st.ExitCode}
	default:
		return core.Errorf(st.ErrorCode, "%s", st.Error)
	}
	if !jsonMode {
		switch {
		case stoppedBy != nil:
			fmt.Fprintf(dockerCli.Err(), "docker sandbox: %s\n", stoppedBy.Message)
		case st.TimedOut:
			fmt.Fprintf(dockerCli.Err(), "docker sandbox: killed at --timeout %s\n", c.Timeout)
		case st.OOMKilled && res.SandboxRestarted:
			fmt.Fprintf(dockerCli.Err(), "docker sandbox: killed: out of memory (--memory %s); the sandbox's container went with it (gVisor): the next call starts a new one, with the same volumes\n", units.BytesSize(float64(c.Memory)))
		case st.OOMKilled:
			fmt.Fprintf(dockerCli.Err(), "docker sandbox: killed: out of memory (--memory %s)\n", units.BytesSize(float64(c.Memory)))
		case res.SandboxRestarted:
			fmt.Fprintf(dockerCli.Err(), "docker sandbox: killed: the program took the sandbox's container down (gVisor: e.g. at the --pids limit %d); the next call starts a new one, with the same volumes\n", c.Pids)
		}
		if st.StdoutTruncated || st.StderrTruncated {
			fmt.Fprintf(dockerCli.Err(), "docker sandbox: output truncated at --max-output %s per stream\n", units.BytesSize(float64(c.MaxOutput)))
		}
	} else {
		j := execJSON{
			Scope: target.Scope, Session: target.Session, Container: res.Container, Image: spec.Image, Lang: lang.Name,
			Runtime: ranUnder, SandboxRestarted: res.SandboxRestarted,
			ExitCode: st.ExitCode, TimedOut: st.TimedOut, OOMKilled: st.OOMKilled,
			Stdout: outBuf.String(), Stderr: errBuf.String(),
			StdoutTruncated: st.StdoutTruncated, StderrTruncated: st.StderrTruncated,
			DurationMS: res.Duration.Milliseconds(), Created: res.Created, Error: stoppedBy,
		}
		if st.Signal != 0 {
			s := signalName(st.Signal)
			j.Signal = &s
		}
		switch {
		case removed:
			j.Container = "" // --rm removed it: there is no container
		case j.Container == "":
			j.Container = ctrID
		}
		if err := writeFormatted(dockerCli.Out(), o.format, j, nil); err != nil {
			return err
		}
	}
	if st.ExitCode != 0 {
		return cli.StatusError{StatusCode: st.ExitCode}
	}
	return nil
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
