// Package mcpserver is `docker sandbox mcp`: a Model Context Protocol
// server (the official Go SDK) whose tools run code and move files in the
// sandboxes of one scope. Whoever starts the server fixes the scope, the
// session, the policy and the limits (Config); a tool's input can name a
// path inside the sandbox, and with Config.Sessions another session of that
// same scope, never another scope.
//
// What it needs of the rest of the plugin is three small interfaces
// (Runner, Files, Sandboxes), implemented in package plugin over the same
// code paths as exec, files, cp and stop.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/files"
	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
)

// Run is one program for Runner.Run.
type Run struct {
	// Language is the language of Code; for a Command, "".
	Language string
	// Code is the program, or with Command a shell command line.
	Code    []byte
	Command bool
	// Timeout is the call's timeout; 0: the server's configured one.
	Timeout time.Duration
	// Workdir is the working directory, relative to the workspace ("":
	// the workspace).
	Workdir string
	// Kernel asks for the language's stateful kernel (exec --kernel): set
	// for run_code in python and node unless the call said stateless. It
	// is the hook for exec --kernel; a Runner without kernels runs the code
	// as a plain exec.
	Kernel bool
	// Tool is the MCP tool that asked (run_code, run_command, reset) and
	// Client the MCP client's name, for the audit trail.
	Tool, Client string
}

// Runner runs programs in a sandbox as `docker sandbox exec` does.
type Runner interface {
	// CheckLanguage refuses a language the server cannot run.
	CheckLanguage(name string) error
	// Run runs r in t (created when it does not exist) and returns the
	// result in exec's JSON schema (`exec --format json`). A program that
	// exits non-zero is a result, not an error.
	Run(ctx context.Context, t core.Target, r Run) (json.RawMessage, error)
}

// Files is what the file tools ask of the files copier (the methods of
// files.Copier that `docker sandbox files` and `cp` use).
type Files interface {
	List(ctx context.Context, loc files.Location, recursive bool, each func(fsproto.Entry) error) error
	Cat(ctx context.Context, loc files.Location, w io.Writer) error
	Put(ctx context.Context, loc files.Location, r io.Reader, mode string) (fsproto.PutResult, error)
	Remove(ctx context.Context, loc files.Location, recursive, force bool) (fsproto.RmResult, error)
	Copy(ctx context.Context, src, dst files.Location, stdin io.Reader, stdout io.Writer) (*tarsafe.Result, error)
}

// Sandboxes is what reset and the session tools ask of the sandbox
// manager.
type Sandboxes interface {
	// Stop removes t's own container (its data stays), as `docker sandbox
	// stop` of one listed sandbox does.
	Stop(ctx context.Context, t core.Target, force bool) (bool, error)
	// List lists the sandboxes of scope (with data, with or without a
	// container), as `docker sandbox ls -a --filter scope=SCOPE`.
	List(ctx context.Context, scope string) ([]*sbexec.Sandbox, error)
}

// Config is what whoever starts the server decides; the model decides
// none of it.
type Config struct {
	// Target is the scope and the default session of every tool.
	Target core.Target
	// Sessions adds create_session, list_sessions and stop_session, and a
	// "session" input to the other tools (a session of Target.Scope).
	Sessions bool

	Runner    Runner
	Files     Files
	Sandboxes Sandboxes

	// RunSchema is the schema of exec's JSON result (the output of
	// run_code and run_command); nil: none is declared.
	RunSchema *jsonschema.Schema
	// MaxTimeout bounds a call's timeout (config max_timeout).
	MaxTimeout time.Duration
	// MaxRead caps the bytes read_file returns (config max_output).
	MaxRead int64
	// ProgressEvery is the interval of progress notifications during a
	// run, for a call that asked for them (0: 2s).
	ProgressEvery time.Duration
	// Version is the server's version, for the client.
	Version string
}

// Name is the server's name, for the client.
const Name = "docker-sandbox"

// Server is the MCP server with its tools.
type Server struct {
	*mcp.Server
	h *handlers
}

// drainWait bounds how long Run waits, once the session ended, for the
// calls still running to stop their programs and return.
const drainWait = 20 * time.Second

// Run serves one session over t until the client ends it or ctx is done,
// then waits (at most drainWait) for the calls still running: their
// contexts are cancelled with the session, and each stops its program
// before it returns, so that none outlives the server.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	err := s.Server.Run(ctx, t)
	s.h.stop() // the session ended: cancel the calls still running
	done := make(chan struct{})
	go func() {
		s.h.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(drainWait):
		core.Debugf("mcp: calls still running after %s", drainWait)
	}
	return err
}

// Serve serves one session on in and out (standard input and output, as
// mcp.StdioTransport does). When in ends (the client went away) or ctx is
// done, the calls still running are cancelled at once, which stops their
// programs; Serve returns once they have (see Run).
func (s *Server) Serve(ctx context.Context, in io.ReadCloser, out io.Writer) error {
	defer context.AfterFunc(ctx, s.h.stop)()
	return s.Run(ctx, &mcp.IOTransport{Reader: endReader{in, s.h.stop}, Writer: nopWriteCloser{out}})
}

// endReader calls end when its reader fails or ends.
type endReader struct {
	io.ReadCloser
	end func()
}

func (r endReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil {
		r.end()
	}
	return n, err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// New returns the server with its tools.
func New(cfg Config) *Server {
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 2 * time.Second
	}
	if cfg.MaxRead <= 0 {
		cfg.MaxRead = 1 << 20
	}
	s := mcp.NewServer(&mcp.Implementation{Name: Name, Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: fmt.Sprintf("Runs code and manages files in the sandbox %s. Paths are relative to /opt/workspace "+
			"(absolute paths must lie under /opt/workspace or /opt/user); files persist between calls.", cfg.Target),
	})
	h := &handlers{cfg: cfg}
	h.ended, h.stop = context.WithCancel(context.Background())
	h.register(s)
	return &Server{Server: s, h: h}
}

// handlers hold the tools' configuration, and count the calls running.
type handlers struct {
	cfg      Config
	inflight sync.WaitGroup
	// ended is done when the session ended (stop): a call's context is
	// cancelled then too, not only when its client cancels it.
	ended context.Context
	stop  context.CancelFunc
}

// fieldError is a bad tool input: the error, and the input field it is
// about.
type fieldError struct {
	field string
	err   *core.Error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Message }
func (e *fieldError) Unwrap() error { return e.err }

// badField is a bad value of field (bad_flag, as exec's bad flags).
func badField(field, format string, args ...any) error {
	return &fieldError{field: field, err: core.Errorf(core.CodeBadFlag, format, args...)}
}

// inField says that err (from a check of the input: path rules, names) is
// about field.
func inField(field string, err error) error {
	if err == nil {
		return nil
	}
	return &fieldError{field: field, err: core.AsError(err)}
}

// ErrorBody is a tool error's structured content: exec's JSON error object
// with, for a bad input, the field it is about.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// errorResult is err as a tool error: {"error":{"code","message","field"}}
// in the structured content and as text.
func errorResult(err error) *mcp.CallToolResult {
	body := ErrorBody{}
	var fe *fieldError
	switch {
	case errors.As(err, &fe):
		body = ErrorBody{Code: fe.err.Code, Message: fe.Error(), Field: fe.field}
	case errors.Is(err, context.Canceled):
		body = ErrorBody{Code: "interrupted", Message: "interrupted: the call was cancelled and its program stopped"}
	default:
		e := core.AsError(err)
		body = ErrorBody{Code: e.Code, Message: e.Message}
	}
	raw, _ := json.Marshal(map[string]ErrorBody{"error": body})
	return &mcp.CallToolResult{IsError: true, StructuredContent: json.RawMessage(raw),
		Content: []mcp.Content{&mcp.TextContent{Text: string(raw)}}}
}

// clientKey is the context key of the MCP client's name in a tool call.
type clientKey struct{}

// Client is the name of the MCP client that made the tool call of ctx
// (from its initialize request; "" when it gave none): Files and Runner
// calls read it for the audit trail.
func Client(ctx context.Context) string {
	name, _ := ctx.Value(clientKey{}).(string)
	return name
}

// toolFunc handles one call of a tool with input In; its result is the
// structured content (json.RawMessage as it is, else marshalled).
type toolFunc[In any] func(ctx context.Context, req *mcp.CallToolRequest, in *In) (any, error)

// addTool adds a tool whose input schema is In's (without "session" unless
// the server has Sessions). The input is decoded strictly here, so that a
// bad one is a structured error naming its field; a panic in a handler is
// an internal error of that call, never the server's end.
func addTool[In any](h *handlers, s *mcp.Server, name, desc string, out *jsonschema.Schema, f toolFunc[In]) {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: schema of %s: %v", name, err))
	}
	if !h.cfg.Sessions {
		delete(in.Properties, "session")
	}
	t := &mcp.Tool{Name: name, Description: desc, InputSchema: in}
	if out != nil {
		t.OutputSchema = withError(out)
	}
	s.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, _ error) {
		h.inflight.Add(1)
		defer h.inflight.Done()
		ctx, cancel := context.WithCancel(context.WithValue(ctx, clientKey{}, clientName(req)))
		defer cancel()
		defer context.AfterFunc(h.ended, cancel)()
		defer func() {
			if p := recover(); p != nil {
				core.Debugf("mcp: tool %s panicked: %v\n%s", name, p, debug.Stack())
				res = errorResult(core.Errorf(core.CodeInternal, "internal error in tool %s: %v", name, p))
			}
		}()
		var v In
		if err := decodeStrict(req.Params.Arguments, &v, in); err != nil {
			return errorResult(err), nil
		}
		got, err := f(ctx, req, &v)
		if err != nil {
			return errorResult(err), nil
		}
		raw, ok := got.(json.RawMessage)
		if !ok {
			if raw, err = json.Marshal(got); err != nil {
				return errorResult(core.Wrap(core.CodeInternal, err, "encoding the result of %s", name)), nil
			}
		}
		return &mcp.CallToolResult{StructuredContent: raw, Content: []mcp.Content{&mcp.TextContent{Text: string(raw)}}}, nil
	})
}

// withError is an output schema that also admits a tool error's object:
// every property optional, and "error" an ErrorBody.
func withError(s *jsonschema.Schema) *jsonschema.Schema {
	c := s.CloneSchemas()
	c.Required = nil
	if c.Properties == nil {
		c.Properties = map[string]*jsonschema.Schema{}
	}
	errSchema, err := jsonschema.For[ErrorBody](nil)
	if err != nil {
		panic(err)
	}
	c.Properties["error"] = errSchema
	return c
}

// decodeStrict decodes a tool's arguments into v: an unknown field, a
// value of the wrong type and a missing required field are bad_flag errors
// naming the field.
func decodeStrict(args json.RawMessage, v any, schema *jsonschema.Schema) error {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(args, &present); err != nil {
		return badField("arguments", "the arguments must be a JSON object: %v", err)
	}
	// The schema's properties, not In's fields: without Sessions, In has a
	// "session" field that the schema does not offer.
	for k := range present {
		if _, ok := schema.Properties[k]; !ok {
			if k == "session" {
				return badField(k, "this server's session is fixed (it was started without --sessions): remove \"session\"")
			}
			return badField(k, "unknown input %q", k)
		}
	}
	for _, r := range schema.Required {
		if _, ok := present[r]; !ok {
			return badField(r, "%s is required", r)
		}
	}
	dec := json.NewDecoder(bytesReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			want := te.Type.String()
			if s, ok := schema.Properties[te.Field]; ok && s.Type != "" {
				want = s.Type
			}
			return badField(te.Field, "%s must be a %s, not a JSON %s", te.Field, want, te.Value)
		}
		return badField("arguments", "bad arguments: %v", err)
	}
	return nil
}
