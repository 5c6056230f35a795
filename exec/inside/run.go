package inside

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// proc1Cmdline is where `run` reads PID 1's argv to compare --spec. Tests
// point it elsewhere.
var proc1Cmdline = "/proc/1/cmdline"

// codeTempRoot is where the code file's private directory is made.
var codeTempRoot = "/tmp"

// runOptions are the parsed flags of `run`.
type runOptions struct {
	interps     []string
	interpArgs  []string
	codeExt     string
	codeSum     string
	noCode      bool
	timeout     time.Duration
	maxOutput   int64
	workdir     string
	spec        string
	target      string
	args        []string
	kernel      string
	kernelReset bool
}

// parseRunFlags parses the flags of `run` (wire.ParseRunArgs). Arguments
// after `--` (or after the first non-flag argument) are the program's
// arguments.
func parseRunFlags(args []string) (runOptions, error) {
	a, err := wire.ParseRunArgs(args)
	return runOptions{interps: a.Interps, interpArgs: a.InterpArgs, codeExt: a.CodeExt, codeSum: a.CodeSum, noCode: a.NoCode, timeout: a.Timeout, maxOutput: a.MaxOutput,
		workdir: a.Workdir, spec: a.Spec, target: a.Target, args: a.Args, kernel: a.Kernel, kernelReset: a.KernelReset}, err
}

// specMismatch compares the spec this exec wants with PID 1's command line.
// It reports a mismatch only when PID 1 carries a --spec that differs; a want
// of "" or a PID 1 without --spec is never a mismatch.
func specMismatch(cmdline []byte, want string) (have string, mismatch bool) {
	if want == "" {
		return "", false
	}
	have, ok := flagValue(splitCmdline(cmdline), "spec")
	if !ok {
		return "", false
	}
	return have, have != want
}

// targetMismatch compares the sandbox this exec is meant for (--target
// SCOPE[/SESSION]) with the one PID 1 was started for: a container that is
// not that sandbox (another target's, the egress sidecar, a user's look-alike)
// never runs the request.
func targetMismatch(cmdline []byte, want string) (have string, mismatch bool) {
	if want == "" {
		return "", false
	}
	argv := splitCmdline(cmdline)
	if helperSubcommand(argv) != "init" {
		return notASandbox, true
	}
	have, _ = flagValue(argv, "target")
	return have, have != want
}

// notASandbox is what targetMismatch says of a PID 1 that is not the
// helper's init.
const notASandbox = "(not a sandbox)"

// pid1Settle bounds how long a run waits for PID 1 to become the helper's
// init (see checkPID1).
var pid1Settle = 2 * time.Second

// checkPID1 reads PID 1's command line and refuses a request meant for
// another sandbox, or for other settings.
func checkPID1(target, spec string) *wire.RunStatus {
	if target == "" && spec == "" {
		return nil
	}
	b, err := os.ReadFile(proc1Cmdline)
	// Right after a start, PID 1 can still be the runtime's init (runc's
	// `runc init`, before its execve of the entrypoint): an exec that the
	// engine runs as soon as the start returned can see that. Look again
	// for a moment before calling the container not a sandbox.
	for deadline := time.Now().Add(pid1Settle); err == nil && target != "" && time.Now().Before(deadline); {
		if have, bad := targetMismatch(b, target); !bad || have != notASandbox {
			break
		}
		time.Sleep(10 * time.Millisecond)
		b, err = os.ReadFile(proc1Cmdline)
	}
	if err != nil {
		if target == "" {
			return nil
		}
		st := failure(125, wire.ErrNotSandbox, fmt.Sprintf("cannot read the container's PID 1 to check that it is sandbox %s: %v", target, err))
		return &st
	}
	if have, bad := targetMismatch(b, target); bad {
		st := failure(125, wire.ErrNotSandbox, fmt.Sprintf("this container is not sandbox %s (its PID 1 says %q): refusing to run in it", target, have))
		return &st
	}
	if have, bad := specMismatch(b, spec); bad {
		st := failure(125, wire.ErrSpecMismatch, fmt.Sprintf(
			"the sandbox was created for spec %q but this exec wants spec %q; remove the sandbox so it is recreated", have, spec))
		return &st
	}
	return nil
}

// initRequired: runs register with PID 1 (tests of the wrapper alone turn it
// off).
var initRequired = true

// registration is a run's registration with PID 1: the connection stays
// open for the run's life; notices carries PID 1's stop request, if any.
type registration struct {
	cc      *ctlConn
	notices chan ctlNotice
}

// register registers the run with PID 1, or returns the Status that refuses
// it (before the Started frame: the plugin may try again).
func register() (*registration, *wire.RunStatus) {
	reg := &registration{notices: make(chan ctlNotice, 1)}
	if !initRequired {
		return reg, nil
	}
	cc, err := dialControl()
	if err != nil {
		// PID 1 is exiting (idle TTL, max lifetime, stop): nothing ran.
		st := failure(125, wire.ErrDraining, "the sandbox's init does not answer (it is ending): "+err.Error())
		return nil, &st
	}
	rep, err := cc.call(ctlRequest{Op: opRegister}, 10*time.Second)
	if err != nil {
		cc.Close()
		st := failure(125, wire.ErrDraining, "the sandbox's init does not answer (it is ending): "+err.Error())
		return nil, &st
	}
	if !rep.OK {
		cc.Close()
		code := wire.ErrDraining
		switch rep.Refused {
		case reasonDisk:
			code = wire.ErrDiskLimit
		case reasonDraining:
		default:
			code = wire.ErrInternal
		}
		st := failure(125, code, rep.Message)
		return nil, &st
	}
	reg.cc = cc
	go func() {
		for {
			line, err := cc.r.ReadBytes('\n')
			if err != nil {
				return
			}
			var n ctlNotice
			if json.Unmarshal(line, &n) == nil && n.Stop != "" {
				select {
				case reg.notices <- n:
				default:
				}
			}
		}
	}()
	return reg, nil
}

// Run is `sandbox-helper run`. It writes exactly one Status frame and
// returns its exit code.
func Run(args []string) int {
	reserveThreads(8)
	out := newOutput(os.Stdout)
	st := doRun(args, out)
	out.status(st)
	return st.ExitCode
}

func failure(exitCode int, code, msg string) wire.RunStatus {
	return wire.RunStatus{ExitCode: exitCode, ErrorCode: code, Error: msg}
}

func internalError(format string, a ...any) wire.RunStatus {
	return failure(125, wire.ErrInternal, "sandbox-helper: "+fmt.Sprintf(format, a...))
}

func doRun(args []string, out *output) (st wire.RunStatus) {
	defer func() {
		if r := recover(); r != nil {
			st = internalError("panic: %v", r)
		}
	}()
	opts, err := parseRunFlags(args)
	if err != nil {
		return failure(125, wire.ErrBadRequest, "sandbox-helper run: "+err.Error())
	}
	if st := checkPID1(opts.target, opts.spec); st != nil {
		return *st
	}

	// Registered with PID 1, the run counts as live, and a stop or rm
	// (drain) waits for it; a sandbox that is being stopped or is over its
	// disk limit refuses it. The Started frame tells the plugin that it
	// may send the program's stdin (a refused run read none of it).
	reg, refused := register()
	if refused != nil {
		return *refused
	}
	if reg.cc != nil {
		defer reg.cc.Close()
	}
	out.started()

	if opts.workdir != "" {
		if err := os.MkdirAll(opts.workdir, 0o755); err != nil {
			return failure(125, wire.ErrBadRequest, fmt.Sprintf("sandbox-helper run: creating the working directory: %v", err))
		}
	}

	var codePath string
	if !opts.noCode {
		dir, path, err := receiveCode(os.Stdin, opts.codeExt, opts.codeSum)
		if dir != "" {
			defer os.RemoveAll(dir)
		}
		if err != nil {
			if errors.Is(err, errCodeTampered) {
				return failure(125, wire.ErrStreamTampered, "sandbox-helper run: "+err.Error())
			}
			if errors.Is(err, errBadCode) {
				return failure(125, wire.ErrBadRequest, "sandbox-helper run: "+err.Error())
			}
			return internalError("%v", err)
		}
		codePath = path
	}

	interp, fail := resolveInterpreter(opts.interps)
	if fail != nil {
		return *fail
	}
	if opts.kernel != "" {
		code, err := os.ReadFile(codePath)
		if err != nil {
			return internalError("reading the code: %v", err)
		}
		return runKernel(opts, interp, code, out, reg)
	}
	argv := append([]string{interp}, opts.interpArgs...)
	if !opts.noCode {
		argv = append(argv, codePath)
	}
	argv = append(argv, opts.args...)

	// Older gVisor kernels (Debian bookworm's runsc) refuse the subreaper
	// with EINVAL: then the process group kill is the sweep, and orphans
	// go to PID 1 (the helper's init), which reaps them.
	if err := setChildSubreaper(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return internalError("PR_SET_CHILD_SUBREAPER: %v", err)
	}
	return supervise(opts, argv, out, reg)
}

// errBadCode marks a malformed request on stdin (a bad header, short code).
var errBadCode = errors.New("reading the code from stdin")

// errCodeTampered marks a code whose SHA-256 is not the one on the command
// line, or, with a sum given, a code header that does not parse: the plugin
// sends a good one, so other bytes came first.
var errCodeTampered = errors.New("the code on stdin is not the code the plugin sent")

// receiveCode reads the code header and the code from r (unbuffered: the rest
// of r is the program's stdin) and writes the code to a new private directory
// under codeTempRoot. It returns the directory (to remove, even on error) and
// the code file. A sum other than "" is the code's hex SHA-256, checked
// before the code is used.
func receiveCode(r io.Reader, ext, sum string) (dir, path string, err error) {
	n, err := wire.ReadCodeHeader(r)
	if err != nil && sum != "" && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", "", fmt.Errorf("%w (%v): other code of this sandbox wrote into the run's stdin; nothing ran", errCodeTampered, err)
	}
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", errBadCode, err)
	}
	dir, err = os.MkdirTemp(codeTempRoot, ".sandbox-code-")
	if err != nil {
		return "", "", fmt.Errorf("creating the code directory: %v", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return dir, "", fmt.Errorf("creating the code directory: %v", err)
	}
	path = filepath.Join(dir, "main"+ext)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return dir, "", fmt.Errorf("creating the code file: %v", err)
	}
	h := sha256.New()
	written, err := io.CopyN(io.MultiWriter(f, h), r, n)
	if cerr := f.Close(); err == nil && cerr != nil {
		return dir, "", fmt.Errorf("writing the code file: %v", cerr)
	}
	if err != nil {
		if written < n && (err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF)) {
			return dir, "", fmt.Errorf("%w: stdin ended after %d of %d bytes of code", errBadCode, written, n)
		}
		return dir, "", fmt.Errorf("receiving the code: %v", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); sum != "" && got != sum {
		return dir, "", fmt.Errorf("%w (its SHA-256 is %s, want %s): other code of this sandbox wrote into the run's stdin; nothing ran", errCodeTampered, got, sum)
	}
	return dir, path, nil
}

// resolveInterpreter returns the path of the first candidate found on PATH,
// or the Status to end the run with.
func resolveInterpreter(cands []string) (string, *wire.RunStatus) {
	for _, c := range cands {
		if p, err := exec.LookPath(c); err == nil {
			// The child starts in --workdir: a relative path must not be
			// resolved there.
			if abs, err := filepath.Abs(p); err == nil {
				p = abs
			}
			return p, nil
		}
	}
	name := describeCandidates(cands)
	for _, c := range cands {
		if p, ok := findNonExecutable(c); ok {
			st := failure(126, wire.ErrInterpreterNoExec, fmt.Sprintf("%s: found %s but it is not executable", name, p))
			return "", &st
		}
	}
	st := failure(127, wire.ErrInterpreterNotFound, fmt.Sprintf("%s: interpreter not found in the image (PATH=%s)", name, os.Getenv("PATH")))
	return "", &st
}

// describeCandidates renders ["python3","python"] as "python3 (or python)".
func describeCandidates(cands []string) string {
	if len(cands) == 1 {
		return cands[0]
	}
	return cands[0] + " (or " + strings.Join(cands[1:], " or ") + ")"
}

// findNonExecutable looks for name the way exec.LookPath does and returns a
// regular file that exists there, which, LookPath having failed, is not
// executable.
func findNonExecutable(name string) (string, bool) {
	var paths []string
	if strings.Contains(name, "/") {
		paths = []string{name}
	} else {
		for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
			if filepath.IsAbs(dir) {
				paths = append(paths, filepath.Join(dir, name))
			}
		}
	}
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, true
		}
	}
	return "", false
}

// output is the framed stdout, shared by the output pumps and the final
// Status. Once the Status is written (sealed), nothing else is.
type output struct {
	fw     *wire.FrameWriter
	mu     sync.Mutex
	sealed bool
	err    error
	broken chan struct{} // closed when a write to stdout fails
}

func newOutput(w io.Writer) *output {
	return &output{fw: wire.NewFrameWriter(w), broken: make(chan struct{})}
}

// frame writes one output frame; false means it was not written (sealed, or
// stdout is broken).
func (o *output) frame(typ byte, p []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sealed || o.err != nil {
		return false
	}
	if err := o.fw.WriteFrame(typ, p); err != nil {
		o.err = err
		close(o.broken)
		return false
	}
	return true
}

// status seals the output and writes the Status frame.
// started writes the Started frame.
func (o *output) started() { o.frame(wire.Started, nil) }

func (o *output) status(st wire.RunStatus) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sealed {
		return
	}
	o.sealed = true
	if o.err != nil {
		return
	}
	b, _ := json.Marshal(st) // cannot fail: RunStatus has only plain fields
	if err := o.fw.WriteFrame(wire.Status, b); err != nil {
		o.err = err
	}
}
