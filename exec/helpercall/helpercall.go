// Package helpercall runs one command in a container through the Engine
// API's exec endpoints: create the exec, attach to it, copy its streams,
// and read its exit code. Every call of the in-container helper (the run
// wrapper, status, drain, signal, the file server, the egress sidecar's
// proxy commands) and the interactive shell go through Do, so that the
// sequence is written once.
//
// It sits apart from package exec so that egress (and plugin) can use it
// without importing exec: it imports the Engine API's types only.
package helpercall

import (
	"context"
	"errors"
	"io"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// Engine is the part of the Engine API a call uses.
type Engine interface {
	ContainerExecCreate(ctx context.Context, container string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecAttach(ctx context.Context, execID string, config container.ExecAttachOptions) (types.HijackedResponse, error)
	ContainerExecInspect(ctx context.Context, execID string) (container.ExecInspect, error)
}

// Call is one exec.
type Call struct {
	Container string                      // name or ID
	Exec      container.ExecOptions       // as given: Cmd, User, Env, WorkingDir, Attach*, Tty...
	Attach    container.ExecAttachOptions // as given

	// Stdin, when not nil, is copied to the exec, whose write side is then
	// closed.
	Stdin io.Reader
	// Stdout and Stderr receive the exec's output, demultiplexed (nil:
	// discarded). With Raw, the stream goes to Stdout as it is (a TTY's,
	// or one nobody reads) and a copy error is not reported: the exit
	// code tells.
	Stdout, Stderr io.Writer
	Raw            bool
	// MaxRead, when > 0, is how many bytes of the stream are read at most.
	MaxRead int64
	// CloseOnCancel closes the stream when ctx ends, which ends the copy.
	CloseOnCancel bool
	// Session, when not nil, takes the attached stream instead of the
	// copy (and instead of Stdin, Stdout and Stderr): the run wrapper's
	// frames, a terminal. An error it returns ends the call (Step Stream),
	// without Inspect.
	Session func(execID string, hj types.HijackedResponse) error
	// Inspect reads the exec's exit code once the stream ended.
	Inspect bool
}

// Result is what a call learnt.
type Result struct {
	ExecID   string // "" when the create failed
	ExitCode int    // with Inspect
	Running  bool   // with Inspect: the stream ended but the exec did not
}

// Step is the step of a call that failed.
type Step int

// The steps.
const (
	Create Step = iota + 1
	Attach
	Stream
	Inspect
)

func (s Step) String() string {
	switch s {
	case Create:
		return "create"
	case Attach:
		return "attach"
	case Stream:
		return "stream"
	case Inspect:
		return "inspect"
	}
	return "none"
}

// Error is the error of the step that failed, as the engine (or the
// session) returned it.
type Error struct {
	Step Step
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Split returns the failed step and its own error (0 and err for an error
// that is not an *Error, 0 and nil for nil), for callers that explain each
// step their own way.
func Split(err error) (Step, error) {
	var e *Error
	if errors.As(err, &e) {
		return e.Step, e.Err
	}
	return 0, err
}

// Do runs c in its container. Its error is an *Error naming the step that
// failed; the Result holds what was learnt before (the exec's ID once it
// was created).
func Do(ctx context.Context, e Engine, c Call) (Result, error) {
	var res Result
	resp, err := e.ContainerExecCreate(ctx, c.Container, c.Exec)
	if err != nil {
		return res, &Error{Create, err}
	}
	res.ExecID = resp.ID
	hj, err := e.ContainerExecAttach(ctx, resp.ID, c.Attach)
	if err != nil {
		return res, &Error{Attach, err}
	}
	if err := stream(ctx, c, resp.ID, hj); err != nil {
		return res, &Error{Stream, err}
	}
	if !c.Inspect {
		return res, nil
	}
	ins, err := e.ContainerExecInspect(ctx, resp.ID)
	if err != nil {
		return res, &Error{Inspect, err}
	}
	res.ExitCode, res.Running = ins.ExitCode, ins.Running
	return res, nil
}

// stream runs the attached part of a call and closes the stream.
func stream(ctx context.Context, c Call, execID string, hj types.HijackedResponse) error {
	defer hj.Close()
	if c.CloseOnCancel {
		stop := context.AfterFunc(ctx, func() { hj.Conn.Close() })
		defer stop()
	}
	if c.Session != nil {
		return c.Session(execID, hj)
	}
	if c.Stdin != nil {
		go func() {
			_, _ = io.Copy(hj.Conn, c.Stdin)
			_ = hj.CloseWrite()
		}()
	}
	var r io.Reader = hj.Reader
	if c.MaxRead > 0 {
		r = io.LimitReader(r, c.MaxRead)
	}
	stdout, stderr := c.Stdout, c.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if c.Raw {
		_, _ = io.Copy(stdout, r)
		return nil
	}
	_, err := stdcopy.StdCopy(stdout, stderr, r)
	return err
}
