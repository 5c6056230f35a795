package wire

// The helper's command lines, written once: the plugin builds them with the
// Argv methods, and sandbox-helper reads them with the Parse functions. Argv
// returns the arguments after the helper's path (core.HelperPath), verb
// first; a Parse function takes the arguments after the verb, as the
// helper's dispatch hands them on. For every a that a Parse function
// returns, parsing a.Argv()[1:] again gives a back.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The helper's verbs.
const (
	VerbInit   = "init"
	VerbRun    = "run"
	VerbSignal = "signal"
	VerbDrain  = "drain"
	VerbStatus = "status"
	VerbFS     = "fs"
)

func newFlagSet(verb string) *flag.FlagSet {
	fs := flag.NewFlagSet("sandbox-helper "+verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // callers report the error their own way
	return fs
}

// InitArgs: `sandbox-helper init`, PID 1 of a sandbox. The other verbs read
// --target and --spec back from /proc/1/cmdline.
type InitArgs struct {
	IdleTTL     time.Duration // exit after this long with nothing running (0: never)
	MaxLifetime time.Duration // end the sandbox at this age, even while busy (0: never)
	Disk        int64         // bytes /opt/workspace and /opt/user may hold together (0: no limit)
	Target      string        // the sandbox's SCOPE[/SESSION]
	Spec        string        // the sandbox's spec hash
	// ServeStdin: PID 1 starts a channel server (`sandbox-helper
	// channel`) on the container's own stdin and stdout, for the call
	// that created the sandbox and attached to it before starting it:
	// its program runs without an engine exec.
	ServeStdin bool
}

// Argv is init's command line.
func (a InitArgs) Argv() []string {
	argv := []string{VerbInit, "--idle-ttl", a.IdleTTL.String(), "--target", a.Target, "--spec", a.Spec}
	if a.MaxLifetime > 0 {
		argv = append(argv, "--max-lifetime", a.MaxLifetime.String())
	}
	if a.Disk > 0 {
		argv = append(argv, "--disk", strconv.FormatInt(a.Disk, 10))
	}
	if a.ServeStdin {
		argv = append(argv, "--serve-stdin")
	}
	return argv
}

// ParseInitArgs parses init's arguments. The error wraps flag.ErrHelp for
// -h.
func ParseInitArgs(args []string) (InitArgs, error) {
	var a InitArgs
	fs := newFlagSet(VerbInit)
	fs.DurationVar(&a.IdleTTL, "idle-ttl", 0, "exit after this long with nothing running (0: never)")
	fs.DurationVar(&a.MaxLifetime, "max-lifetime", 0, "end the sandbox at this age, even while busy (0: never)")
	fs.Int64Var(&a.Disk, "disk", 0, "bytes /opt/workspace and /opt/user may hold together (0: no limit)")
	fs.StringVar(&a.Target, "target", "", "the sandbox's SCOPE[/SESSION], read back by the other subcommands from /proc/1/cmdline")
	fs.StringVar(&a.Spec, "spec", "", "sandbox spec hash, read back by `run` from /proc/1/cmdline")
	fs.BoolVar(&a.ServeStdin, "serve-stdin", false, "start a channel server on the container's stdin and stdout (the creating call's attach)")
	if err := fs.Parse(args); err != nil {
		return InitArgs{}, err
	}
	if fs.NArg() > 0 {
		return InitArgs{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if a.IdleTTL < 0 || a.MaxLifetime < 0 || a.Disk < 0 {
		return InitArgs{}, errors.New("--idle-ttl, --max-lifetime and --disk must not be negative")
	}
	return a, nil
}

// RunArgs: `sandbox-helper run`, the exec wrapper. Unless NoCode, stdin
// starts with a code header and the code.
type RunArgs struct {
	Token     string        // names this run for `sandbox-helper signal --token`
	Timeout   time.Duration // kill the program after this long (> 0)
	MaxOutput int64         // cap on each of stdout and stderr, in bytes (> 0)
	Workdir   string        // absolute working directory, created if missing ("": the default)
	Spec      string        // expected sandbox spec hash (compared with PID 1's --spec)
	Target    string        // the sandbox this run is for (compared with PID 1's --target)
	NoCode    bool          // no code header on stdin: run the interpreter with Args and raw stdin
	Interps   []string      // interpreter candidates; the first on PATH is used
	// InterpArgs follow the interpreter, before the code file and Args
	// (a configured language's interpreter = ["awk", "-f"]).
	InterpArgs []string
	CodeExt    string // extension of the code file, with its dot
	// CodeSum is the hex SHA-256 of the code: a code on stdin that does not
	// match is refused (ErrStreamTampered), as other code of the sandbox
	// can write into a run's stdin under gVisor.
	CodeSum string
	Args    []string // the program's arguments
	// Kernel names the kernel (KernelPython, KernelNode) that runs the code
	// instead of a new interpreter: its state persists between calls.
	Kernel string
	// KernelReset restarts the kernel (its state is lost) before the code.
	KernelReset bool
}

// The kernels of RunArgs.Kernel.
const (
	KernelPython = "python"
	KernelNode   = "node"
)

// Argv is run's command line.
func (a RunArgs) Argv() []string {
	argv := []string{VerbRun,
		"--token", a.Token,
		"--timeout", a.Timeout.String(),
		"--max-output", strconv.FormatInt(a.MaxOutput, 10),
		"--workdir", a.Workdir,
		"--spec", a.Spec,
		"--target", a.Target,
	}
	if a.NoCode {
		argv = append(argv, "--no-code")
	}
	argv = append(argv, "--interp", strings.Join(a.Interps, ","))
	for _, x := range a.InterpArgs {
		argv = append(argv, "--interp-arg", x)
	}
	if a.CodeExt != "" {
		argv = append(argv, "--code-ext", a.CodeExt)
	}
	if a.CodeSum != "" {
		argv = append(argv, "--code-sha256", a.CodeSum)
	}
	if a.Kernel != "" {
		argv = append(argv, "--kernel", a.Kernel)
	}
	if a.KernelReset {
		argv = append(argv, "--kernel-reset")
	}
	argv = append(argv, "--")
	return append(argv, a.Args...)
}

// ParseRunArgs parses run's arguments. Arguments after `--` (or after the
// first non-flag argument) are the program's arguments.
func ParseRunArgs(args []string) (RunArgs, error) {
	var a RunArgs
	fs := newFlagSet(VerbRun)
	interp := fs.String("interp", "", "comma-separated interpreter candidates; the first on PATH is used")
	fs.Func("interp-arg", "an argument after the interpreter, before the code file (repeatable)", func(v string) error {
		a.InterpArgs = append(a.InterpArgs, v)
		return nil
	})
	fs.StringVar(&a.CodeExt, "code-ext", "", "extension of the code file, e.g. .py")
	fs.StringVar(&a.CodeSum, "code-sha256", "", "hex SHA-256 the code on stdin must have")
	fs.BoolVar(&a.NoCode, "no-code", false, "no code header on stdin: run INTERP ARGS... with raw stdin")
	fs.DurationVar(&a.Timeout, "timeout", 0, "kill the program after this long (required)")
	fs.Int64Var(&a.MaxOutput, "max-output", 0, "cap on each of stdout and stderr, in bytes (required)")
	fs.StringVar(&a.Workdir, "workdir", "", "absolute working directory, created if missing")
	fs.StringVar(&a.Spec, "spec", "", "expected sandbox spec hash (compared with PID 1's --spec)")
	fs.StringVar(&a.Target, "target", "", "the sandbox this run is for, SCOPE[/SESSION] (compared with PID 1's --target)")
	fs.StringVar(&a.Token, "token", "", "names this run for `sandbox-helper signal --token`")
	fs.StringVar(&a.Kernel, "kernel", "", "run the code in the sandbox's kernel of this language (python, node)")
	fs.BoolVar(&a.KernelReset, "kernel-reset", false, "restart the kernel before the code")
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	a.Args = fs.Args()
	if a.CodeExt != "" && !strings.HasPrefix(a.CodeExt, ".") {
		a.CodeExt = "." + a.CodeExt
	}
	for _, c := range strings.Split(*interp, ",") {
		if c = strings.TrimSpace(c); c != "" {
			a.Interps = append(a.Interps, c)
		}
	}
	switch {
	case len(a.Interps) == 0:
		return a, errors.New("--interp is required")
	case a.Timeout <= 0:
		return a, errors.New("--timeout is required and must be > 0")
	case a.MaxOutput <= 0:
		return a, errors.New("--max-output is required and must be > 0")
	case a.Workdir != "" && !filepath.IsAbs(a.Workdir):
		return a, fmt.Errorf("--workdir must be absolute, got %q", a.Workdir)
	case a.CodeSum != "" && !isSHA256Hex(a.CodeSum):
		return a, fmt.Errorf("--code-sha256 %q is not 64 lowercase hex digits", a.CodeSum)
	case strings.ContainsAny(a.CodeExt, "/\x00"):
		return a, fmt.Errorf("--code-ext %q must not contain a slash", a.CodeExt)
	case a.Kernel != "" && a.Kernel != KernelPython && a.Kernel != KernelNode:
		return a, fmt.Errorf("--kernel %q: kernels are %s and %s", a.Kernel, KernelPython, KernelNode)
	case a.Kernel != "" && a.NoCode:
		return a, errors.New("--kernel needs code: not with --no-code")
	case a.KernelReset && a.Kernel == "":
		return a, errors.New("--kernel-reset needs --kernel")
	}
	return a, nil
}

// SignalArgs: `sandbox-helper signal --token TOKEN`, stop the run started
// with that token.
type SignalArgs struct {
	Token string
}

// Argv is signal's command line.
func (a SignalArgs) Argv() []string { return []string{VerbSignal, "--token", a.Token} }

// ParseSignalArgs parses signal's arguments.
func ParseSignalArgs(args []string) (SignalArgs, error) {
	var a SignalArgs
	fs := newFlagSet(VerbSignal)
	fs.StringVar(&a.Token, "token", "", "token of the run to stop")
	if err := fs.Parse(args); err != nil {
		return SignalArgs{}, err
	}
	if a.Token == "" {
		return SignalArgs{}, errors.New("--token TOKEN is required")
	}
	return a, nil
}

// DrainArgs: `sandbox-helper drain [--holder ID] [--undo]`, refuse new runs
// (or, with Undo, lift Holder's drain).
type DrainArgs struct {
	Holder string // who drains (one stop or rm call): its undo lifts only its own drain
	Undo   bool
}

// Argv is drain's command line.
func (a DrainArgs) Argv() []string {
	argv := []string{VerbDrain, "--holder", a.Holder}
	if a.Undo {
		argv = append(argv, "--undo")
	}
	return argv
}

// ParseDrainArgs parses drain's arguments.
func ParseDrainArgs(args []string) (DrainArgs, error) {
	var a DrainArgs
	fs := newFlagSet(VerbDrain)
	fs.BoolVar(&a.Undo, "undo", false, "let runs start again")
	fs.StringVar(&a.Holder, "holder", "", "who drains (one stop or rm call): its undo lifts only its own drain")
	if err := fs.Parse(args); err != nil {
		return DrainArgs{}, err
	}
	if fs.NArg() != 0 {
		return DrainArgs{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return a, nil
}

// StatusArgs: `sandbox-helper status` (the sandbox's state, from inside it)
// or `sandbox-helper status --newest DIR...` (the newest modification time
// and the bytes under each DIR).
type StatusArgs struct {
	Newest bool
	Dirs   []string // with Newest, at least one
}

// Argv is status's command line.
func (a StatusArgs) Argv() []string {
	if !a.Newest {
		return []string{VerbStatus}
	}
	return append([]string{VerbStatus, "--newest", "--"}, a.Dirs...)
}

// ParseStatusArgs parses status's arguments.
func ParseStatusArgs(args []string) (StatusArgs, error) {
	var a StatusArgs
	fs := newFlagSet(VerbStatus)
	fs.BoolVar(&a.Newest, "newest", false, "report the newest modification time under each DIR")
	if err := fs.Parse(args); err != nil {
		return StatusArgs{}, err
	}
	switch {
	case a.Newest && fs.NArg() == 0:
		return StatusArgs{}, errors.New("--newest: give at least one DIR")
	case !a.Newest && fs.NArg() > 0:
		return StatusArgs{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if a.Newest {
		a.Dirs = fs.Args()
	}
	return a, nil
}

// FSArgs: `sandbox-helper fs [--target SCOPE[/SESSION]] COMMAND ARGS...`,
// the confined file server (see package fsserver for the commands). With a
// Target, it first checks that the container is that sandbox, then writes
// FSPreamble on stdout.
type FSArgs struct {
	Target string
	Args   []string // the file server's command and its arguments
}

// Argv is fs's command line.
func (a FSArgs) Argv() []string {
	argv := []string{VerbFS}
	if a.Target != "" {
		argv = append(argv, "--target", a.Target)
	}
	return append(argv, a.Args...)
}

// ParseFSArgs parses fs's arguments: --target only as the first two.
func ParseFSArgs(args []string) (FSArgs, error) {
	if len(args) >= 1 && (args[0] == "--target" || args[0] == "-target") {
		if len(args) < 2 || args[1] == "" {
			return FSArgs{}, errors.New("--target needs SCOPE[/SESSION]")
		}
		return FSArgs{Target: args[1], Args: args[2:]}, nil
	}
	return FSArgs{Args: args}, nil
}

// isSHA256Hex reports whether s is 64 lowercase hex digits.
func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
