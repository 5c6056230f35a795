package exec

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/exec/channel"
	"github.com/docker-sandbox/docker-sandbox/exec/helpercall"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// Images provides the images a sandbox needs (implemented by package images).
type Images interface {
	// EnsureImage makes ref present on the engine (building the built-in
	// runtime image, or pulling), with progress on the progress writer.
	EnsureImage(ctx context.Context, ref string) (image.InspectResponse, error)
	// EnsureHelper makes the helper image for the architecture present and
	// returns its reference and the name of the volume that carries it;
	// readable asks for a helper the sandbox's user may read (runtimes
	// that cannot start an execute-only binary: see ExecOnlyRuntime).
	EnsureHelper(ctx context.Context, arch string, readable bool) (ref, volume string, err error)
}

// Manager creates sandboxes and runs code in them.
type Manager struct {
	Engine Engine
	Images Images
	// Network is the egress side, for proxy-mode sandboxes (AttachNetwork,
	// a scope's rm, prune); nil for a Manager that needs none of them.
	Network Network
	// Version is the plugin's version (labels, spec hash).
	Version string
	// MaxSandboxes is the limit of live sandboxes on the engine (config
	// max_sandboxes); 0 means DefaultMaxSandboxes.
	MaxSandboxes int
	// Podman reads Podman's own inspect (the namespaces its compat API
	// does not report), for sandboxes on Podman; Warnf tells the user
	// what holds there instead of a guarantee (nil: nothing is said).
	Podman PodmanInspector
	Warnf  func(format string, args ...any)
	// Channel reaches the sandboxes' persistent exec channels (package
	// channel; config exec_channel); nil: every run is a plain exec.
	Channel Channel
}

// Channel connects to a sandbox's exec channel (package channel).
type Channel interface {
	// Dial returns a connection to the channel of the container (by
	// name), or nil when there is none now (it may start one for the
	// calls that follow).
	Dial(ctx context.Context, container string) net.Conn
	// Has reports whether this user has a channel process for the
	// container (by name).
	Has(container string) bool
	// Busy reports whether a call runs through that channel.
	Busy(container string) bool
}

// Request is one program to run.
type Request struct {
	Lang    Language
	Code    []byte // the program; nil with NoCode
	NoCode  bool   // run Args[0] with Args[1:] instead of code (shells, commands)
	Args    []string
	Env     []string
	Workdir string // absolute, inside the sandbox
	Timeout time.Duration
	// MaxOutput caps each of stdout and stderr, in bytes, at the source.
	MaxOutput int64
	Stdin     io.Reader // the program's stdin; nil for none
	Stdout    io.Writer
	Stderr    io.Writer
	// Kernel runs the code in the sandbox's kernel of Lang (KernelOf):
	// its state persists between calls; KernelReset restarts it first.
	Kernel      bool
	KernelReset bool
	// OneShot: the call removes a sandbox it creates once the run is over
	// (exec --rm): it starts no channel process for calls that follow.
	OneShot bool
	// otherRuntime: the sandbox runs under a runtime other than the
	// engine's default (set by Run): its run is watched (runWatch) and its
	// status checked against the engine's exit code of the wrapper's exec
	// (statusCheck), for gVisor's differences; runc needs neither.
	otherRuntime bool
	runtime      string // the sandbox's runtime, for messages
}

// Result tells how a run ended.
type Result struct {
	Container string // 12-character ID, when known
	Created   bool
	// CreatedID is the full ID of the container this call created ("" when
	// it joined one): --rm removes that container, never another that has
	// taken the name since.
	CreatedID string
	// FreshVolumes are the volumes this call created.
	FreshVolumes []string
	Status       wire.RunStatus
	Duration     time.Duration
	// SandboxRestarted: the program took its whole container with it
	// (gVisor: out of memory, or a fork bomb killed at the timeout), which
	// the next call starts anew; Status says why.
	SandboxRestarted bool
}

// runBackstop is how long past its timeout the plugin waits for a run's
// status before it gives up on the stream: the helper's PID 1 kills a
// wrapper that lives 7 s past its timeout (exec/inside runGrace).
const runBackstop = 10 * time.Second

// maxCreateWait bounds how long a call waits for a container that another
// call is creating or the engine is removing.
const maxCreateWait = 60 * time.Second

// Run runs req in the sandbox described by spec, creating the sandbox first
// when it does not exist.
func (m *Manager) Run(ctx context.Context, spec Spec, req Request) (Result, error) {
	start := time.Now()
	token := newToken()
	req.otherRuntime, req.runtime = spec.Runtime != "", spec.Runtime
	// With no runtime asked for, the container runs under the engine's
	// default one, which may be gVisor (daemon.json "default-runtime"): a
	// plain exec asks the container which (one inspect), and a channel
	// process serves only a container whose runtime is native (it checked
	// when it started), so runChannel needs no answer.
	runtimeKnown := spec.Runtime != ""
	var st wire.RunStatus
	sandboxLost := false
	if m.channelFor(req) {
		// A call that creates the sandbox runs its program through the
		// container's attach (firstAttach).
		spec.first = &firstAttach{}
		defer spec.first.close()
	}
	res, err := m.withContainer(ctx, &spec, func(name string) (bool, error) {
		t0 := time.Now()
		err, viaChannel := m.runFirst(ctx, name, spec, req, token, &st)
		if !viaChannel {
			err, viaChannel = m.runChannel(ctx, name, spec, req, token, &st)
		}
		if !viaChannel && !runtimeKnown {
			c, ierr := m.Engine.ContainerInspect(ctx, name)
			if ierr != nil {
				return false, ierr // not there: withContainer creates it
			}
			if c.HostConfig != nil && !core.NativeRuntime(c.HostConfig.Runtime) {
				req.otherRuntime, req.runtime = true, c.HostConfig.Runtime
			}
			runtimeKnown = true
		}
		if !viaChannel {
			_, err = helpercall.Do(ctx, m.Engine, helpercall.Call{Container: name, Exec: execOptions(spec, req, token),
				Session: func(execID string, hj types.HijackedResponse) (err error) {
					// The container is there: a channel for the calls
					// that follow (runChannel found none).
					m.startChannel(ctx, name, req)
					st, err = m.session(ctx, name, execID, hj, token, req, false)
					return err
				}})
		}
		core.Debugf("exec create+attach+run %v, channel %v (helper says program ran %dms)", time.Since(t0), viaChannel, st.DurationMS)
		switch step, serr := helpercall.Split(err); step {
		case helpercall.Create:
			return false, serr
		case helpercall.Attach:
			err = core.EngineError(serr, "cannot start the program in the sandbox")
		case helpercall.Stream:
			err = serr
		}
		if errors.Is(err, errSandboxLost) {
			sandboxLost, err = true, nil // st says why: out of memory, or the timeout
		}
		if execNotStarted(err) || errors.Is(err, errEndedBeforeStart) || (err == nil && st.ErrorCode == wire.ErrDraining) {
			return false, errNotRunningYet // a stop/rm is removing it, or it is going: the program did not run
		}
		var se *execStartError
		if errors.As(err, &se) {
			if se.notSandbox() {
				return true, core.Errorf(core.CodeNotSandbox, "the container named %s is not sandbox %s (the engine could not start the helper in it: %s); nothing ran: remove or rename that container",
					spec.ContainerName(), spec.Target, se.msg)
			}
			return true, core.Wrap(core.CodeEngineError, err, "cannot run in sandbox %s", spec.Target)
		}
		return true, err
	})
	res.Status = st
	res.SandboxRestarted = sandboxLost
	res.Duration = time.Since(start)
	if err != nil {
		return res, err
	}
	switch st.ErrorCode {
	case wire.ErrSpecMismatch:
		return res, core.Errorf(core.CodeSandboxMismatch,
			"sandbox %s is running with other settings than this call asks for (%s); stop it with `docker sandbox stop %s` (its data stays) or call it with the settings it was created with",
			spec.Target, spec.Describe(), spec.Target)
	case wire.ErrStreamTampered:
		return res, core.Errorf(core.CodeStreamTampered, "%s (README: runc vs runsc; keep concurrent callers apart with sessions or scopes)", strings.TrimPrefix(st.Error, "sandbox-helper run: "))
	case wire.ErrNotSandbox:
		return res, core.Errorf(core.CodeNotSandbox, "the container named %s is not sandbox %s (%s); nothing ran: remove or rename that container",
			spec.ContainerName(), spec.Target, st.Error)
	}
	return res, nil
}

// withContainer calls try with the sandbox's container name until try
// reports that it reached the container (started=true, or an error that is
// not about the container's existence), creating the sandbox when it does
// not exist and starting it when it is not running. An error from try after
// it started is returned as is.
func (m *Manager) withContainer(ctx context.Context, spec *Spec, try func(name string) (started bool, err error)) (Result, error) {
	var res Result
	name := spec.ContainerName()
	deadline := time.Now().Add(maxCreateWait)
	backoff := 20 * time.Millisecond
	for {
		started, err := try(name)
		if started || err == nil {
			return res, err
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		switch {
		case isNotFound(err):
			// No container: create it (or learn that another call did).
			id, fresh, cerr := m.create(ctx, spec)
			res.FreshVolumes = append(res.FreshVolumes, fresh...)
			if cerr != nil {
				return res, cerr
			}
			if id != "" {
				res.Created = true
				res.Container = shortID(id)
				res.CreatedID = id
				if time.Now().Before(deadline) {
					continue // this call created and started it: try at once
				}
			}
		case isNotRunning(err):
			// Created but not started yet, or expiring: start it, or wait
			// until the engine has removed it and create a new one.
			if serr := m.Engine.ContainerStart(ctx, name, container.StartOptions{}); serr != nil && core.IsUnreachable(serr) {
				return res, core.EngineError(serr, "")
			}
		default:
			return res, core.EngineError(err, "cannot run in sandbox "+spec.Target.String())
		}
		if time.Now().After(deadline) {
			return res, core.Errorf(core.CodeEngineError, "sandbox %s did not become ready within %s", spec.Target, maxCreateWait)
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(backoff):
		}
		if backoff < 500*time.Millisecond {
			backoff *= 2
		}
	}
}

// RawRequest runs the helper itself with Args, with raw standard streams
// (no framing): file operations and other helper commands.
type RawRequest struct {
	Args   []string // after the helper's path, e.g. {"fs", "ls", "/opt/workspace"}
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Env    []string
}

// HelperExec runs the helper in the target's sandbox (creating or starting
// it as Run does) and returns the helper's exit code.
func (m *Manager) HelperExec(ctx context.Context, spec Spec, rr RawRequest) (int, Result, error) {
	exitCode := -1
	cmd := append([]string{core.HelperPath}, rr.Args...)
	if len(rr.Args) > 0 && rr.Args[0] == wire.VerbFS {
		// The file server first checks that the container is this sandbox.
		cmd = append([]string{core.HelperPath}, wire.FSArgs{Target: spec.Target.String(), Args: rr.Args[1:]}.Argv()...)
	}
	res, err := m.withContainer(ctx, &spec, func(name string) (bool, error) {
		stdout := rr.Stdout
		var pre *preambleWriter
		if rr.Args[0] == wire.VerbFS {
			if stdout == nil {
				stdout = io.Discard
			}
			pre = &preambleWriter{want: []byte(wire.FSPreamble), dst: stdout}
			stdout = pre
		}
		r, err := helpercall.Do(ctx, m.Engine, helpercall.Call{Container: name,
			Exec: container.ExecOptions{
				User: core.SandboxUser, AttachStdin: rr.Stdin != nil, AttachStdout: true, AttachStderr: true,
				Env: append(append([]string(nil), core.HelperEnv...), rr.Env...), WorkingDir: core.WorkspaceDir, Cmd: cmd,
			},
			Stdin: rr.Stdin, Stdout: stdout, Stderr: rr.Stderr, CloseOnCancel: true, Inspect: true,
		})
		step, err := helpercall.Split(err)
		switch step {
		case helpercall.Create:
			return false, err
		case helpercall.Attach:
			if execNotStarted(err) {
				return false, errNotRunningYet // paused, or going: nothing ran
			}
			return true, core.EngineError(err, "cannot start the helper in the sandbox")
		case helpercall.Stream:
			if ctx.Err() != nil {
				return true, ctx.Err()
			}
			return true, core.Wrap(core.CodeSandboxGone, err, "lost the helper's stream")
		}
		if pre != nil && pre.foreign() {
			// Not the file server: the engine's reason for not running
			// it. Nothing of it reached the caller's stdout.
			se := &execStartError{msg: strings.TrimSpace(string(pre.buf))}
			if se.containerGoing() {
				return false, errNotRunningYet
			}
			if se.notSandbox() {
				return true, core.Errorf(core.CodeNotSandbox, "the container named %s is not sandbox %s (the engine could not start the helper in it: %s); nothing was read or written: remove or rename that container",
					spec.ContainerName(), spec.Target, se.msg)
			}
			return true, core.Wrap(core.CodeEngineError, se, "cannot run the file server in sandbox %s", spec.Target)
		}
		if err != nil {
			return true, core.EngineError(err, "cannot read the helper's exit code")
		}
		exitCode = r.ExitCode
		return true, nil
	})
	return exitCode, res, err
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// HelperCommand is the exec command line of `sandbox-helper run`.
func HelperCommand(spec Spec, req Request, token string) []string {
	a := wire.RunArgs{Token: token, Timeout: req.Timeout, MaxOutput: req.MaxOutput, Workdir: req.Workdir,
		Spec: spec.Hash(), Target: spec.Target.String(), NoCode: req.NoCode}
	if !req.NoCode {
		sum := sha256.Sum256(req.Code)
		a.CodeSum = hex.EncodeToString(sum[:])
	}
	if req.NoCode {
		a.Interps, a.Args = req.Args[:1], req.Args[1:]
	} else {
		a.Interps, a.InterpArgs, a.CodeExt, a.Args = req.Lang.Interps, req.Lang.InterpArgs, req.Lang.Ext, req.Args
	}
	if req.Kernel {
		a.Kernel, _ = KernelOf(req.Lang)
		a.KernelReset = req.KernelReset
	}
	return append([]string{core.HelperPath}, a.Argv()...)
}

// execOptions is the exec of `sandbox-helper run`.
func execOptions(spec Spec, req Request, token string) container.ExecOptions {
	return container.ExecOptions{
		User:         core.SandboxUser,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		Env:          req.Env,
		WorkingDir:   core.WorkspaceDir,
		Cmd:          HelperCommand(spec, req, token),
	}
}

// errChannelFailed: the exec channel failed before the run started (no
// channel process, a stale socket, the channel's server killed, the sandbox
// replaced): nothing ran, and the call makes a plain exec instead.
var errChannelFailed = errors.New("the exec channel failed before the run started")

// runChannel runs req through the sandbox's exec channel, when there is one
// and the run may use it (runc only: under another runtime a run's stream
// needs statusCheck, which asks the engine about the run's own exec; not
// for kernel calls). viaChannel=false: the call makes a plain exec (nothing
// ran through the channel).
//
// Only a channel process that is there already is dialled: without one
// (none yet, or its container is not there), the plain exec's Session
// starts one once the engine has attached the exec (startChannel): a
// channel process started for a container that does not exist yet, as
// on a call that creates the sandbox, would fail at once.
func (m *Manager) runChannel(ctx context.Context, name string, spec Spec, req Request, token string, st *wire.RunStatus) (err error, viaChannel bool) {
	if !m.channelFor(req) || !m.Channel.Has(name) {
		return nil, false
	}
	conn := m.Channel.Dial(ctx, name)
	if conn == nil {
		return nil, false
	}
	return m.runOn(ctx, conn, name, spec, req, token, st)
}

// firstAttach is the attach of the container a run's call created, made
// before the container started (createSandbox; Spec.AttachedConfig): the
// call's program goes through the channel server PID 1 started on the
// container's stdin and stdout (channel.First), without an engine exec.
type firstAttach struct {
	hj    *types.HijackedResponse // set by the create
	first *channel.First
}

// close ends the attach, whether it served the call or not: the engine
// closes the container's stdin, and the server inside exits.
func (f *firstAttach) close() {
	switch {
	case f.first != nil:
		f.first.Close()
	case f.hj != nil:
		f.hj.Close()
	}
	f.hj, f.first = nil, nil
}

// runFirst runs req through the attach of the container this call created
// (firstAttach), once; viaChannel=false: there is none, or its server did
// not answer (nothing ran): the call makes a plain exec.
func (m *Manager) runFirst(ctx context.Context, name string, spec Spec, req Request, token string, st *wire.RunStatus) (err error, viaChannel bool) {
	fa := spec.first
	if fa == nil || fa.hj == nil || fa.first != nil {
		return nil, false
	}
	hj := *fa.hj
	fa.hj = nil
	first, err := channel.OpenFirst(ctx, hj)
	if err != nil {
		core.Debugf("first call's channel: %v", err)
		return nil, false
	}
	core.Debugf("first call's channel: hello")
	fa.first = first
	conn, err := first.Call()
	if err != nil {
		return nil, false
	}
	err, viaChannel = m.runOn(ctx, conn, name, spec, req, token, st)
	// The container is there: a channel for the calls that follow,
	// started once this call's program has ended (the channel process's
	// start and its engine exec, started with the program, slowed the
	// first call by 20 to 40 ms on two cores).
	m.startChannel(context.WithoutCancel(ctx), name, req)
	return err, viaChannel
}

// runOn runs req through conn, a call on a channel (a channel process's, or
// the first call's); viaChannel=false: the channel failed before the run
// started (nothing ran).
func (m *Manager) runOn(ctx context.Context, conn net.Conn, name string, spec Spec, req Request, token string, st *wire.RunStatus) (err error, viaChannel bool) {
	defer conn.Close()
	call, _ := json.Marshal(wire.ChanCall{Args: HelperCommand(spec, req, token)[1:], Env: req.Env})
	if _, err := conn.Write(append(call, '\n')); err != nil {
		return nil, false
	}
	s, err := m.session(ctx, name, "", types.NewHijackedResponse(conn, ""), token, req, true)
	if errors.Is(err, errChannelFailed) {
		core.Debugf("exec channel: %v", err)
		return nil, false
	}
	*st = s
	return err, true
}

// channelFor reports whether req may run through an exec channel (runc
// only: under another runtime a run's stream needs statusCheck, which asks
// the engine about the run's own exec). A kernel call goes through it as
// any run: its wrapper registers with PID 1, which lends it the kernel.
func (m *Manager) channelFor(req Request) bool {
	return m.Channel != nil && !req.otherRuntime
}

// startChannel starts the channel process of the container for the calls
// that follow, when req's kind of run may use one and there is none
// (Dial starts it; a channel that answers meanwhile is left alone). A
// one-shot call (exec --rm) starts none, whichever route it took.
func (m *Manager) startChannel(ctx context.Context, name string, req Request) {
	if req.OneShot || !m.channelFor(req) || m.Channel.Has(name) {
		return
	}
	if conn := m.Channel.Dial(ctx, name); conn != nil {
		conn.Close()
	}
}

// session feeds the attached exec code and stdin, and decodes the helper's
// frames until its status arrives. viaChannel: hj is a call on the exec
// channel: the code goes only once the run started (so that a channel that
// fails before then leaves nothing run, for a plain exec to run it), and
// a stream that ends before that is errChannelFailed.
func (m *Manager) session(ctx context.Context, ctrName, execID string, hj types.HijackedResponse, token string, req Request, viaChannel bool) (wire.RunStatus, error) {
	var st wire.RunStatus
	runStart := time.Now()
	pr, pw := io.Pipe()
	// The container's death ends the stream (runsc leaves it open).
	var watch *runWatch
	if req.otherRuntime {
		watch = m.watchRun(ctx, ctrName, func() { pw.CloseWithError(io.EOF) })
		defer watch.end()
	}

	// Interrupted (Ctrl-C): closing the stream does not end an exec, so
	// ask the helper to stop the program, give it a moment to report, then
	// stop waiting.
	stop := context.AfterFunc(ctx, func() {
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		m.signalRun(bg, ctrName, token)
		time.AfterFunc(2*time.Second, func() { hj.Conn.Close() })
	})
	defer stop()
	// Backstop: the helper enforces the timeout; if it (or the engine) does
	// not end the stream in time, stop waiting.
	backstop := time.AfterFunc(req.Timeout+runBackstop, func() { hj.Conn.Close() })
	defer backstop.Stop()

	// The code goes at once; the program's stdin only once the helper says
	// the run started (a refused run leaves req.Stdin unread, for a retry).
	started, ended := make(chan struct{}), make(chan struct{})
	defer close(ended)
	go func() {
		defer hj.CloseWrite()
		if viaChannel {
			select {
			case <-started:
			case <-ended:
				return
			}
		}
		if !req.NoCode {
			if err := wire.WriteCodeHeader(hj.Conn, int64(len(req.Code))); err != nil {
				return
			}
			if _, err := hj.Conn.Write(req.Code); err != nil {
				return
			}
		}
		select {
		case <-started:
		case <-ended:
			return
		}
		if req.Stdin != nil {
			_, _ = io.Copy(hj.Conn, req.Stdin)
		}
	}()

	helperErr := &limitedBuffer{max: 64 << 10}
	streamEnded := make(chan struct{})
	go func() {
		defer close(streamEnded)
		_, err := stdcopy.StdCopy(pw, helperErr, hj.Reader)
		pw.CloseWithError(err)
	}()
	vs := &statusCheck{m: m, execID: execID}
	head := &headRecorder{r: pr, max: 4 << 10}
	fr := wire.NewFrameReader(head)
	gotStarted := false
	for frames := 0; ; frames++ {
		typ, p, err := fr.Next()
		if err != nil && viaChannel && !gotStarted {
			pr.CloseWithError(err)
			return st, fmt.Errorf("%w: %v", errChannelFailed, err)
		}
		if err != nil {
			if frames == 0 && errors.Is(err, wire.ErrBadFrame) && req.otherRuntime && vs.processStarted(ctx) {
				// The wrapper's process started, so these bytes are not
				// the engine's: other code wrote first (statusCheck).
				pr.CloseWithError(err)
				return st, vs.tampered(ctx, req.runtime)
			}
			if frames == 0 && errors.Is(err, wire.ErrBadFrame) {
				// Not the helper's framing: the engine could not start
				// the exec and wrote its reason into the stream instead
				// (e.g. "cannot exec in a stopped container" when a
				// stop or rm won the race). Nothing ran.
				_, _ = io.Copy(io.Discard, io.LimitReader(head, 4<<10))
				pr.CloseWithError(err)
				return st, &execStartError{msg: strings.TrimSpace(string(head.buf))}
			}
			pr.CloseWithError(err)
			if ctx.Err() != nil {
				return st, ctx.Err()
			}
			if s, ok := vs.atEnd(ctx); ok {
				return s, nil
			}
			if !gotStarted && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
				// The wrapper ends before Started only when it was
				// refused or its container went away: nothing ran, and
				// none of the program's stdin was read.
				return st, errEndedBeforeStart
			}
			msg := strings.TrimSpace(helperErr.String())
			if msg == "" {
				msg = "the stream ended without the helper's status"
			}
			if lost, ok := m.sandboxLost(ctrName, watch, runStart, req.Timeout); ok {
				return lost, errSandboxLost
			}
			if req.otherRuntime && (errors.Is(err, wire.ErrBadFrame) || vs.forged > 0) {
				return st, vs.tampered(ctx, req.runtime)
			}
			return st, m.lostRun(ctrName, err, msg)
		}
		switch typ {
		case wire.Started:
			gotStarted = true
			select {
			case <-started:
			default:
				close(started)
			}
		case wire.Stdout:
			if req.Stdout != nil {
				_, _ = req.Stdout.Write(p)
			}
		case wire.Stderr:
			if req.Stderr != nil {
				_, _ = req.Stderr.Write(p)
			}
		case wire.Status:
			if err := json.Unmarshal(p, &st); err != nil {
				if req.otherRuntime {
					// Not the wrapper's, which writes valid JSON: under
					// gVisor other code of the sandbox can write frames
					// into this stream (statusCheck). Read on to its own.
					st = wire.RunStatus{}
					vs.forged++
					continue
				}
				return st, core.Wrap(core.CodeInternal, err, "bad status from the helper")
			}
			if req.otherRuntime && !vs.fromWrapper(ctx, st) {
				st = wire.RunStatus{}
				continue // maybe not the wrapper's: read on to its own
			}
			if viaChannel {
				// A channel's stream ends once the run's wrapper has
				// exited (its Done): until then PID 1 holds it
				// registered, and a stop or rm right after this call
				// would find the sandbox busy (a plain exec's call
				// returns after its exec ended, helpercall).
				select {
				case <-streamEnded:
				case <-time.After(runEndWait):
				case <-ctx.Done():
				}
			}
			return st, nil
		}
	}
}

// runEndWait bounds how long a call through a channel waits, after its
// run's status, for the run's wrapper to exit.
const runEndWait = 2 * time.Second

// errEndedBeforeStart: the exec's stream ended before the wrapper's Started
// frame (the container went away, or the wrapper was refused without a
// status): nothing ran.
var errEndedBeforeStart = errors.New("the exec ended before the program started")

// lostRun explains a run whose stream ended after it started but without
// the wrapper's status. If the sandbox's PID 1 still answers, only the
// wrapper was lost: sandboxed code killed or stopped it (PID 1 kills a
// stopped wrapper, and then every process the run left). Otherwise the
// container went away (removed, killed, out of memory). The engine's own
// state lags a removal in progress, so a fresh exec decides.
func (m *Manager) lostRun(ctrName string, err error, msg string) *core.Error {
	bg, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m.initAnswers(bg, ctrName) {
		return core.Errorf(core.CodeWrapperLost, "the program's exec wrapper was killed or stopped before it reported (code in the sandbox can signal it: it runs as the same user); the sandbox's init killed every process of the run")
	}
	why := "its container was killed or removed"
	if c, ierr := m.Engine.ContainerInspect(bg, ctrName); ierr == nil && c.State != nil && c.State.OOMKilled {
		why = "its container ran out of memory and was killed"
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return core.Errorf(core.CodeSandboxGone, "the program's run ended without a status: %s (%s)", why, msg)
	}
	return core.Wrap(core.CodeSandboxGone, err, "lost the program's output stream: %s (%s)", why, msg)
}

// initAnswers reports whether the container's PID 1 answers `sandbox-helper
// status` (the container runs, and its init lives).
func (m *Manager) initAnswers(ctx context.Context, ctrName string) bool {
	var out bytes.Buffer
	_, err := helpercall.Do(ctx, m.Engine, helpercall.Call{Container: ctrName,
		Exec: container.ExecOptions{
			User: core.SandboxUser, AttachStdout: true, AttachStderr: true, Env: core.HelperEnv,
			Cmd: append([]string{core.HelperPath}, wire.StatusArgs{}.Argv()...),
		},
		Stdout: &out, MaxRead: 64 << 10,
	})
	if step, _ := helpercall.Split(err); step == helpercall.Create || step == helpercall.Attach {
		return false
	}
	var st struct {
		PID1Started *time.Time `json:"pid1_started"`
	}
	return json.Unmarshal(out.Bytes(), &st) == nil && st.PID1Started != nil
}

// preambleWriter passes a stream on once it began with want (which it
// strips); a stream that begins otherwise is kept (its first 4 KiB) and not
// passed on.
type preambleWriter struct {
	want   []byte
	dst    io.Writer
	buf    []byte
	passed bool
}

func (p *preambleWriter) Write(b []byte) (int, error) {
	if p.passed {
		return p.dst.Write(b)
	}
	n := len(b)
	need := len(p.want) - len(p.buf)
	if need > 0 {
		take := min(need, len(b))
		p.buf = append(p.buf, b[:take]...)
		b = b[take:]
		if !bytes.HasPrefix(p.want, p.buf) {
			p.buf = append(p.buf, b[:min(len(b), 4<<10)]...)
			p.passed = false
			p.want = nil // foreign: keep collecting, pass nothing
			return n, nil
		}
		if len(p.buf) < len(p.want) {
			return n, nil
		}
		p.passed = true
	}
	if p.want == nil {
		if room := 4<<10 - len(p.buf); room > 0 {
			p.buf = append(p.buf, b[:min(len(b), room)]...)
		}
		return n, nil
	}
	if len(b) > 0 {
		if _, err := p.dst.Write(b); err != nil {
			return n, err
		}
	}
	return n, nil
}

// foreign reports output that did not begin with the preamble (none at all
// is not foreign: the server failed before it, on stderr).
func (p *preambleWriter) foreign() bool { return !p.passed && len(p.buf) > 0 }

// headRecorder keeps the first max bytes read through it.
type headRecorder struct {
	r   io.Reader
	buf []byte
	max int
}

func (h *headRecorder) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if room := h.max - len(h.buf); room > 0 {
		h.buf = append(h.buf, p[:min(n, room)]...)
	}
	return n, err
}

// execStartError is the engine's reason for not starting an exec, which it
// writes into the exec's output stream after the attach succeeded.
type execStartError struct{ msg string }

func (e *execStartError) Error() string { return "the engine could not start the program: " + e.msg }

// containerGoing reports an exec start refused because the container is
// stopping, stopped, paused or gone: the call can start or create it again.
// The engine's words for a container that is going, not for a container
// that lacks what a sandbox has (a missing helper or working directory is
// "no such file or directory": not a sandbox, and never worth waiting for).
// "paused" is the engine's "is paused" and runc's "cannot exec in a paused
// state" (an exec created just before a frozen read paused the sandbox:
// FrozenReader).
var (
	goingWords = []string{"stopped", "not running", "paused", "no such exec", "no such container", "is restarting",
		"being removed", "removal of container"}
	taskNotFound = regexp.MustCompile(`task [0-9a-f]+ not found`)
)

func (e *execStartError) containerGoing() bool {
	m := strings.ToLower(e.msg)
	for _, s := range goingWords {
		if strings.Contains(m, s) {
			return true
		}
	}
	return taskNotFound.MatchString(m)
}

// notSandbox reports an exec start refused because the container lacks
// the sandbox's helper or working directory: it is not a sandbox.
func (e *execStartError) notSandbox() bool {
	m := strings.ToLower(e.msg)
	return strings.Contains(m, "no such file or directory") || strings.Contains(m, "executable file not found")
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
	// Truncated is set once a write did not fit.
	Truncated bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - b.buf.Len()
	if room < len(p) {
		b.Truncated = true
		if room > 0 {
			b.buf.Write(p[:room])
		}
		return len(p), nil
	}
	b.buf.Write(p)
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// create makes the sandbox container and starts it. It returns "" when
// another call created the container first.
func (m *Manager) create(ctx context.Context, spec *Spec) (id string, fresh []string, err error) {
	id, err = m.createInner(ctx, spec, &fresh)
	if err != nil {
		fresh = nil
	}
	return id, fresh, err
}

func (m *Manager) createInner(ctx context.Context, spec *Spec, freshOut *[]string) (string, error) {
	vols := uniq(spec.UserVolume(), spec.WorkspaceVolume())
	pre := m.preflight(ctx, spec.Image, vols)
	core.Debugf("preflight done")
	if pre.limitErr != nil {
		return "", pre.limitErr
	}
	info, err := pre.info, pre.infoErr
	if err != nil {
		return "", core.EngineError(err, "cannot read the engine's runtimes")
	}
	if err := CheckEngineLimits(info, "sandbox", spec.CPUs > 0); err != nil {
		return "", err
	}
	if spec.Podman, err = pre.podman, pre.podmanErr; err != nil {
		return "", err
	}
	if spec.Podman {
		if err := podmanRefuse(*spec); err != nil {
			return "", err
		}
	}
	if spec.Runtime != "" {
		if _, ok := info.Runtimes[spec.Runtime]; !ok {
			var have []string
			for r := range info.Runtimes {
				have = append(have, r)
			}
			return "", core.Errorf(core.CodeRuntimeUnavailable, "the engine has no runtime %q (it has: %s); install it and register it in the engine's daemon.json \"runtimes\", or drop --runtime",
				spec.Runtime, strings.Join(sortedStrings(have), ", "))
		}
	}
	img := pre.img
	if pre.imgErr != nil {
		// Not on the engine (or the inspect failed): EnsureImage builds,
		// pulls or tells, only now that every check passed; the volumes
		// are looked at again after it, as it can take a while.
		if img, err = m.Images.EnsureImage(ctx, spec.Image); err != nil {
			return "", err
		}
		pre.vols = nil
	}
	if err := CheckImage(spec.Image, img); err != nil {
		return "", err
	}
	spec.ImageVolumes = imageVolumes(img)
	if img.Config != nil {
		spec.ImageEnv = img.Config.Env
	}
	arch := img.Architecture
	// Readable where the runtime must read it to run it: gVisor, and an
	// image of another architecture, which the engine runs through
	// binfmt_misc's qemu-user (an interpreter reads the binary it runs).
	readable := !ExecOnlyRuntime(info, spec.Runtime) || core.NormArch(arch) != core.NormArch(info.Architecture)
	helperRef, helperVol, err := m.Images.EnsureHelper(ctx, arch, readable)
	if err != nil {
		return "", err
	}
	spec.HelperVolume = helperVol

	// Which volumes are new: those are removed again if creation fails.
	if pre.vols == nil {
		pre.vols, pre.volInfo = make([]error, len(vols)), make([]volume.Volume, len(vols))
		for i, v := range vols {
			pre.volInfo[i], pre.vols[i] = m.Engine.VolumeInspect(ctx, v)
		}
	}
	var fresh []string
	for i, v := range vols {
		if err := pre.vols[i]; isNotFound(err) {
			fresh = append(fresh, v)
		} else if err != nil {
			return "", core.EngineError(err, "cannot inspect volume "+v)
		} else if err := ownTargetVolume(pre.volInfo[i], spec.Target); err != nil {
			return "", err
		}
	}
	// The helper volume, where it exists, is PID 1's program.
	if hv, err := m.Engine.VolumeInspect(ctx, spec.HelperVolume); err == nil {
		if !ownHelperVolume(&hv) {
			return "", foreignVolume(hv.Name, "the helper's volume")
		}
	} else if !isNotFound(err) {
		return "", core.EngineError(err, "cannot inspect volume "+spec.HelperVolume)
	}
	*freshOut = fresh
	cleanup := func() {
		bg := context.WithoutCancel(ctx)
		for _, v := range fresh {
			_ = m.Engine.VolumeRemove(bg, v, false)
		}
	}
	seeded, err := m.seed(ctx, *spec, helperRef)
	if err != nil {
		cleanup()
		return "", err
	}
	core.Debugf("seeded")
	// A run's call attaches before the start, for its program (Run), on
	// an engine whose runs need nothing but their stream: a native
	// runtime (spec.first is set only when spec.Runtime is ""), not Podman.
	attach := spec.first != nil && !spec.Podman && core.NativeRuntime(info.DefaultRuntime)
	// The seeder's removal runs while the sandbox is created and started;
	// a failed removal undoes both, as when it came first (settle). The
	// sandbox is created only once the seeder's create has filled the
	// volumes: a container of the sandbox's name is seeded, so a call
	// that finds one not running may start it (withContainer).
	id, err := m.createSandbox(ctx, spec, cleanup, attach)
	if serr := seeded(); serr != nil {
		if id != "" {
			_ = m.Engine.ContainerRemove(context.WithoutCancel(ctx), id, container.RemoveOptions{Force: true})
		}
		if err == nil {
			cleanup() // createSandbox's failures cleaned up already
		}
		return "", serr
	}
	return id, err
}

// ownTargetVolume refuses an existing volume that the sandbox of t would
// mount but that is not the plugin's volume of t (OwnVolume: its name,
// labels and kind): a user's own volume that happens to bear the name
// would otherwise hand its content to sandboxed code, and take its writes.
func ownTargetVolume(v volume.Volume, t core.Target) error {
	if vt, _, ok := OwnVolume(&v); ok && vt.Scope == t.Scope && (vt.Session == "" || vt.Session == t.Session) {
		return nil
	}
	return foreignVolume(v.Name, "a volume of sandbox "+t.String())
}

// foreignVolume is the error for a volume named as one of the plugin's
// that is not its own.
func foreignVolume(name, what string) error {
	return core.Errorf(core.CodeNotSandbox, "volume %s is not %s: it exists without the plugin's labels for it (com.docker.sandbox.*), so it is not mounted; nothing ran. Remove or rename that volume (its data is not the plugin's), or use another scope", name, what)
}

// createSandbox creates and starts the sandbox container (the volumes are
// seeded); cleanup removes the fresh volumes. It returns "" when another
// call created the container first.
//
// attach: the container is created with Spec.AttachedConfig, and attached
// to before its start; the attach goes to spec.first.
func (m *Manager) createSandbox(ctx context.Context, spec *Spec, cleanup func(), attach bool) (string, error) {
	cfg, hc := spec.ContainerConfig()
	if attach {
		cfg, hc = spec.AttachedConfig()
	}
	resp, err := m.Engine.ContainerCreate(ctx, cfg, hc, nil, nil, spec.ContainerName())
	if err != nil {
		if isConflict(err) {
			return "", nil // another call won the race; use its container
		}
		cleanup()
		return "", core.EngineError(err, "cannot create the sandbox container for "+spec.Target.String())
	}
	if w := DiscardedSetting(resp); w != "" {
		_ = m.Engine.ContainerRemove(context.WithoutCancel(ctx), resp.ID, container.RemoveOptions{Force: true})
		cleanup()
		return "", core.Errorf(core.CodeEngineUnsupported, "the engine created sandbox %s without a setting it asked for (%s); it was removed and nothing ran: use an engine that enforces the sandbox's limits", spec.Target, w)
	}
	if spec.Podman {
		// Podman ignores some settings silently: read them back.
		if err := m.checkPodman(ctx, *spec, resp.ID); err != nil {
			_ = m.Engine.ContainerRemove(context.WithoutCancel(ctx), resp.ID, container.RemoveOptions{Force: true})
			cleanup()
			return "", err
		}
	}
	// A frozen read out of another container of the scope found it alone
	// on the scope's volume: this one starts once that read is over.
	if err := WaitUnpaused(ctx, m.Engine, spec.Target, resp.ID); err != nil {
		_ = m.Engine.ContainerRemove(context.WithoutCancel(ctx), resp.ID, container.RemoveOptions{Force: true})
		cleanup()
		return "", core.EngineError(err, "cannot start the sandbox container for "+spec.Target.String())
	}
	core.Debugf("sandbox container created")
	var hj *types.HijackedResponse
	if attach {
		a, err := m.Engine.ContainerAttach(ctx, resp.ID, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
		if err != nil {
			_ = m.Engine.ContainerRemove(context.WithoutCancel(ctx), resp.ID, container.RemoveOptions{Force: true})
			cleanup()
			return "", core.EngineError(err, "cannot attach to the sandbox container for "+spec.Target.String())
		}
		hj = &a
	}
	if err := m.Engine.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		if isConflict(err) || isNotRunning(err) {
			if hj != nil {
				hj.Close() // another call started it: a plain exec
			}
			return resp.ID, nil
		}
		if hj != nil {
			hj.Close()
		}
		_ = m.Engine.ContainerRemove(context.WithoutCancel(ctx), resp.ID, container.RemoveOptions{Force: true})
		cleanup()
		return "", core.EngineError(err, "cannot start the sandbox container for "+spec.Target.String())
	}
	if hj != nil {
		spec.first.hj = hj
	}
	core.Debugf("sandbox created and started")
	return resp.ID, nil
}

// createChecks are the engine's answers a create needs before it makes
// anything: all reads, asked at once (createInner looks at them in the
// order it always did, so the first failing check still decides the error).
type createChecks struct {
	limitErr  error // checkLimit
	info      system.Info
	infoErr   error
	podman    bool
	podmanErr error
	// img is the image's inspect; imgErr set (not found, or any error):
	// createInner asks Images.EnsureImage, in order, instead.
	img    image.InspectResponse
	imgErr error
	// vols are the VolumeInspect errors of the target's volumes (nil:
	// exists), volInfo their answers; a nil slice: ask again.
	vols    []error
	volInfo []volume.Volume
}

// preflight asks the engine, concurrently, what createInner checks before
// it creates anything: the live sandbox count, the engine's info (and,
// after it, its version where the info does not show the Docker Engine:
// engineIsPodmanInfo), the image and the target's volumes.
func (m *Manager) preflight(ctx context.Context, ref string, vols []string) *createChecks {
	c := &createChecks{vols: make([]error, len(vols)), volInfo: make([]volume.Volume, len(vols))}
	var wg sync.WaitGroup
	do := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	do(func() { c.limitErr = m.checkLimit(ctx) })
	do(func() {
		c.info, c.infoErr = m.Engine.Info(ctx)
		if c.infoErr == nil { // else createInner stops at it
			c.podman, c.podmanErr = m.engineIsPodmanInfo(ctx, &c.info)
		}
	})
	do(func() { c.img, c.imgErr = m.Engine.ImageInspect(ctx, ref) })
	for i, v := range vols {
		do(func() { c.volInfo[i], c.vols[i] = m.Engine.VolumeInspect(ctx, v) })
	}
	wg.Wait()
	return c
}

// seed creates the target's volumes (and the helper volume) through a
// container of the helper image that is created and removed, never started:
// the engine fills new, empty volumes from the image, with owner 65532.
// Podman fills a volume only when a container mounting it starts, and
// ignores the mounts' volume labels: there the volumes are created with
// their labels first, and the seeder is started (the helper without a
// command exits at once) and waited for.
//
// The volumes exist and are filled once the seeder is created: its removal
// goes on in the background, and settle waits for it (its error is the
// seeder's removal's). The caller calls settle before it returns, whatever
// happens.
func (m *Manager) seed(ctx context.Context, spec Spec, helperRef string) (settle func() error, err error) {
	cfg := &container.Config{
		Image:      helperRef,
		Entrypoint: []string{core.HelperPath},
		Labels:     core.BaseLabels(core.KindSeeder),
	}
	mounts := spec.seederMounts()
	hc := &container.HostConfig{NetworkMode: "none", Mounts: mounts}
	if spec.Podman {
		hc.Resources.Ulimits = podmanUlimits(1024)
		for _, mt := range mounts {
			if _, err := m.Engine.VolumeInspect(ctx, mt.Source); err == nil {
				continue
			} else if !isNotFound(err) {
				return nil, core.EngineError(err, "cannot inspect volume "+mt.Source)
			}
			if _, err := m.Engine.VolumeCreate(ctx, volume.CreateOptions{Name: mt.Source, Labels: mt.VolumeOptions.Labels}); err != nil {
				return nil, core.EngineError(err, "cannot create volume "+mt.Source)
			}
		}
	}
	resp, err := m.Engine.ContainerCreate(ctx, cfg, hc, nil, nil, "")
	if err != nil {
		return nil, core.EngineError(err, "cannot create the volumes for "+spec.Target.String())
	}
	if spec.Podman {
		if err := m.startSeeder(ctx, resp.ID); err != nil {
			_ = m.Engine.ContainerRemove(context.WithoutCancel(ctx), resp.ID, container.RemoveOptions{Force: true})
			return nil, core.EngineError(err, "cannot fill the volumes for "+spec.Target.String())
		}
	}
	done := make(chan error, 1)
	go func() {
		if err := m.Engine.ContainerRemove(context.WithoutCancel(ctx), resp.ID, container.RemoveOptions{}); err != nil {
			done <- core.EngineError(err, "cannot remove the volume seeder container")
			return
		}
		done <- nil
	}()
	var once sync.Once
	var rmErr error
	return func() error {
		once.Do(func() { rmErr = <-done })
		return rmErr
	}, nil
}

// CheckImage refuses images that would put the sandbox's working directory
// under /proc (CVE-2024-21626 style WORKDIR tricks); the sandbox never uses
// the image's entrypoint, user or working directory anyway.
func CheckImage(ref string, img image.InspectResponse) error {
	if img.Config == nil {
		return nil
	}
	wd := img.Config.WorkingDir
	for _, bad := range []string{"/proc", "/sys", "/dev"} {
		if wd == bad || strings.HasPrefix(wd, bad+"/") {
			return core.Errorf(core.CodeBadImage, "image %s has WORKDIR %s: images whose working directory is under %s are refused", ref, wd, bad)
		}
	}
	if img.Os != "" && img.Os != "linux" {
		return core.Errorf(core.CodeBadImage, "image %s is for %s: sandboxes need a linux image", ref, img.Os)
	}
	// A VOLUME inside the sandbox's own mounts would put an anonymous
	// volume into the workspace or /opt/user (hiding their data, outside
	// the disk limit) or over the helper.
	for v := range img.Config.Volumes {
		p := path.Clean("/" + v)
		for _, ours := range []string{core.WorkspaceDir, core.UserDir, core.HelperDir} {
			if strings.HasPrefix(p, ours+"/") {
				return core.Errorf(core.CodeBadImage, "image %s declares VOLUME %s, inside the sandbox's %s: images with volumes under %s, %s or %s are refused",
					ref, v, ours, core.WorkspaceDir, core.UserDir, core.HelperDir)
			}
		}
	}
	return nil
}

// ExecOnlyRuntime reports whether the runtime (the engine's default for "")
// starts a binary its user may execute but not read: runc and crun do
// (the kernel loads it); gVisor's runsc, whose own kernel reads the binary
// as the user, does not, and nor, until known, does anything else.
func ExecOnlyRuntime(info system.Info, runtime string) bool {
	if runtime == "" {
		runtime = info.DefaultRuntime
	}
	rt, ok := info.Runtimes[runtime]
	if !ok {
		return false
	}
	switch path.Base(rt.Path) {
	case "runc", "crun":
		return true
	}
	return false
}

// imageVolumes lists the image's VOLUME paths.
func imageVolumes(img image.InspectResponse) []string {
	if img.Config == nil {
		return nil
	}
	var out []string
	for v := range img.Config.Volumes {
		out = append(out, v)
	}
	return sortedStrings(out)
}

func uniq(ss ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func sortedStrings(ss []string) []string {
	return slices.Sorted(slices.Values(ss))
}

// ContainerID asks the engine which container an exec ran in.
func (m *Manager) ContainerID(ctx context.Context, name string) string {
	c, err := m.Engine.ContainerInspect(ctx, name)
	if err != nil {
		return ""
	}
	return shortID(c.ID)
}

func timeAfter(ms int) <-chan time.Time { return time.After(time.Duration(ms) * time.Millisecond) }

func newToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// signalRun asks the helper in the container to stop the run carrying token
// (its program's whole process group). Best effort: the program ends at its
// timeout anyway.
func (m *Manager) signalRun(ctx context.Context, ctrName, token string) {
	_, _ = helpercall.Do(ctx, m.Engine, helpercall.Call{Container: ctrName,
		Exec: container.ExecOptions{
			User: core.SandboxUser, AttachStdout: true, AttachStderr: true,
			Cmd: append([]string{core.HelperPath}, wire.SignalArgs{Token: token}.Argv()...),
		},
		Raw: true,
	})
}
