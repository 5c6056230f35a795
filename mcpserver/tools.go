package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
	"github.com/docker-sandbox/docker-sandbox/files"
	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
)

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// The tools' inputs. "session" is in the schema only with Config.Sessions.

// RunCodeInput is run_code's input.
type RunCodeInput struct {
	Language  string  `json:"language" jsonschema:"the language of code: python, node, bash, sh (or one configured as [lang.NAME])"`
	Code      string  `json:"code" jsonschema:"the program"`
	Timeout   float64 `json:"timeout,omitempty" jsonschema:"seconds before the program is killed (default: the server's --timeout; at most its max_timeout)"`
	Stateless bool    `json:"stateless,omitempty" jsonschema:"run in a fresh interpreter, not the language's kernel"`
	Session   string  `json:"session,omitempty" jsonschema:"a session of the server's scope (default: the server's)"`
}

// RunCommandInput is run_command's input.
type RunCommandInput struct {
	Command string  `json:"command" jsonschema:"a shell command line, run by sh -c in the workspace"`
	Timeout float64 `json:"timeout,omitempty" jsonschema:"seconds before the command is killed (default: the server's --timeout; at most its max_timeout)"`
	Workdir string  `json:"workdir,omitempty" jsonschema:"working directory, relative to /opt/workspace"`
	Session string  `json:"session,omitempty" jsonschema:"a session of the server's scope (default: the server's)"`
}

// ReadFileInput is read_file's input.
type ReadFileInput struct {
	Path     string `json:"path" jsonschema:"the file: relative to /opt/workspace, or absolute under /opt/workspace or /opt/user"`
	Encoding string `json:"encoding,omitempty" jsonschema:"text or base64 (default: text when the content is UTF-8, else base64)"`
	Session  string `json:"session,omitempty" jsonschema:"a session of the server's scope (default: the server's)"`
}

// WriteFileInput is write_file's input.
type WriteFileInput struct {
	Path     string `json:"path" jsonschema:"the file: relative to /opt/workspace, or absolute under /opt/workspace or /opt/user; parent folders are created"`
	Content  string `json:"content" jsonschema:"the content, as text or base64 (encoding)"`
	Encoding string `json:"encoding,omitempty" jsonschema:"text (default) or base64"`
	Mode     string `json:"mode,omitempty" jsonschema:"permission bits, octal such as 0755 (default: an existing file's, else 0644)"`
	Session  string `json:"session,omitempty" jsonschema:"a session of the server's scope (default: the server's)"`
}

// ListFilesInput is list_files' input.
type ListFilesInput struct {
	Path      string `json:"path,omitempty" jsonschema:"the folder (default: /opt/workspace)"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"list everything below the folder"`
	Session   string `json:"session,omitempty" jsonschema:"a session of the server's scope (default: the server's)"`
}

// DeleteFileInput is delete_file's input.
type DeleteFileInput struct {
	Path      string `json:"path" jsonschema:"the file, symbolic link or (with recursive) folder"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"delete a folder and everything in it"`
	Session   string `json:"session,omitempty" jsonschema:"a session of the server's scope (default: the server's)"`
}

// CopyFromSessionInput is copy_from_session's input.
type CopyFromSessionInput struct {
	FromSession string `json:"from_session" jsonschema:"the session of the same scope to copy from (\"\": the scope's own sandbox)"`
	Path        string `json:"path" jsonschema:"the file or folder in from_session (a path ending in /. copies a folder's contents)"`
	To          string `json:"to,omitempty" jsonschema:"where to put it in this sandbox (default: the same path); as with docker cp, its parent folder must exist, and an existing folder receives it"`
	Session     string `json:"session,omitempty" jsonschema:"a session of the server's scope to copy into (default: the server's)"`
}

// ResetInput is reset's input.
type ResetInput struct {
	Force   bool   `json:"force,omitempty" jsonschema:"stop it even while a program runs in it"`
	Session string `json:"session,omitempty" jsonschema:"a session of the server's scope (default: the server's)"`
}

// SessionInput is the input of create_session and stop_session.
type SessionInput struct {
	Session string `json:"session" jsonschema:"the session's name, under the server's scope"`
	Force   bool   `json:"force,omitempty" jsonschema:"stop_session: stop it even while a program runs in it"`
}

// NoInput is the input of a tool without any.
type NoInput struct{}

// ReadFileResult is read_file's result.
type ReadFileResult struct {
	Path      string `json:"path"`
	Encoding  string `json:"encoding"`
	Content   string `json:"content"`
	Size      int64  `json:"size"`
	Truncated bool   `json:"truncated"`
}

// ListFilesResult is list_files' result: files ls --format json.
type ListFilesResult struct {
	Path      string          `json:"path"`
	Entries   []fsproto.Entry `json:"entries"`
	Truncated bool            `json:"truncated,omitempty"`
}

// CopyResult is copy_from_session's result: cp --format json.
type CopyResult struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
	*tarsafe.Result
}

// ResetResult is the result of reset and stop_session.
type ResetResult struct {
	Scope   string `json:"scope"`
	Session string `json:"session"`
	Stopped bool   `json:"stopped"`
}

// SessionResult is create_session's result.
type SessionResult struct {
	Scope   string `json:"scope"`
	Session string `json:"session"`
	Created bool   `json:"created"`
}

// SessionsResult is list_sessions' result: ls --format json rows.
type SessionsResult struct {
	Scope    string            `json:"scope"`
	Sessions []*sbexec.Sandbox `json:"sessions"`
}

// maxListEntries caps list_files' entries.
const maxListEntries = 10000

func (h *handlers) register(s *mcp.Server) {
	addTool(h, s, "run_code", "Run a program (python, node, bash, sh) in the sandbox. The result is docker sandbox exec's JSON: "+
		"exit_code, stdout, stderr, timed_out, oom_killed, duration_ms. Files written in /opt/workspace persist between calls.",
		h.cfg.RunSchema, h.runCode)
	addTool(h, s, "run_command", "Run a shell command line (sh -c) in the sandbox's workspace. The result is docker sandbox exec's JSON.",
		h.cfg.RunSchema, h.runCommand)
	addTool(h, s, "read_file", "Read a file of the sandbox (text, or base64 for binary content).", schemaFor[ReadFileResult](), h.readFile)
	addTool(h, s, "write_file", "Write a file in the sandbox, atomically (parent folders are created).", schemaFor[fsproto.PutResult](), h.writeFile)
	addTool(h, s, "list_files", "List a folder of the sandbox.", nil, h.listFiles)
	addTool(h, s, "delete_file", "Delete a file, a symbolic link, or with recursive a folder, in the sandbox.", schemaFor[fsproto.RmResult](), h.deleteFile)
	addTool(h, s, "reset", "Stop the sandbox: its processes end and the next call starts a fresh container; its files stay.",
		schemaFor[ResetResult](), h.reset)
	// The session tools exist only when the operator let the model choose
	// sessions: a server fixed to one sandbox reaches no other (another
	// session's workspace is that session's alone).
	if h.cfg.Sessions {
		addTool(h, s, "copy_from_session", "Copy a file or folder from another session of the same scope into this sandbox.", nil, h.copyFromSession)
		addTool(h, s, "create_session", "Create a session (a sandbox with its own workspace) under the server's scope.",
			schemaFor[SessionResult](), h.createSession)
		addTool(h, s, "list_sessions", "List the sessions of the server's scope.", nil, h.listSessions)
		addTool(h, s, "stop_session", "Stop a session's sandbox (its files stay; the next call to it starts it again).",
			schemaFor[ResetResult](), h.stopSession)
	}
}

func schemaFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(err)
	}
	return s
}

// target is the sandbox of a call: the server's, or with Sessions a
// session of the server's scope.
func (h *handlers) target(session string) (core.Target, error) {
	if session == "" {
		return h.cfg.Target, nil
	}
	t := core.Target{Scope: h.cfg.Target.Scope, Session: session}
	return t, inField("session", t.Validate())
}

// location is path in t, through the files rules (path_escape).
func location(t core.Target, field, path string) (files.Location, error) {
	loc, err := files.SandboxLocation(t, path, path)
	return loc, inField(field, err)
}

// timeout checks a call's timeout in seconds (0: the server's).
func (h *handlers) timeout(secs float64) (time.Duration, error) {
	switch {
	case secs == 0:
		return 0, nil
	case secs < 0 || math.IsNaN(secs) || math.IsInf(secs, 0):
		return 0, badField("timeout", "timeout must be a positive number of seconds, not %v", secs)
	}
	d := time.Duration(secs * float64(time.Second))
	if h.cfg.MaxTimeout > 0 && d > h.cfg.MaxTimeout {
		return 0, badField("timeout", "timeout %v is over this server's max_timeout %s", secs, h.cfg.MaxTimeout)
	}
	if d < time.Millisecond {
		return 0, badField("timeout", "timeout must be at least 0.001 seconds")
	}
	return d, nil
}

// kernelLangs are the languages whose run_code calls ask for a kernel.
var kernelLangs = map[string]bool{"python": true, "py": true, "python3": true, "node": true, "js": true, "javascript": true, "nodejs": true}

// runInput checks the input run_code and run_command share, in this
// order: the session, the tool's own checks (own), the size of the program
// (field), the timeout. It returns the call's sandbox and timeout.
func (h *handlers) runInput(session, field, program string, timeout float64, own func() error) (core.Target, time.Duration, error) {
	t, err := h.target(session)
	if err != nil {
		return core.Target{}, 0, err
	}
	if err := own(); err != nil {
		return core.Target{}, 0, err
	}
	if len(program) > wire.MaxCode {
		return core.Target{}, 0, badField(field, "%s is over the %d MiB limit", field, wire.MaxCode>>20)
	}
	to, err := h.timeout(timeout)
	return t, to, err
}

func (h *handlers) runCode(ctx context.Context, req *mcp.CallToolRequest, in *RunCodeInput) (any, error) {
	t, to, err := h.runInput(in.Session, "code", in.Code, in.Timeout, func() error {
		if strings.TrimSpace(in.Language) == "" {
			return badField("language", "language is required: python, node, bash or sh")
		}
		return inField("language", h.cfg.Runner.CheckLanguage(in.Language))
	})
	if err != nil {
		return nil, err
	}
	r := Run{Language: in.Language, Code: []byte(in.Code), Timeout: to, Kernel: !in.Stateless && kernelLangs[in.Language]}
	return h.run(ctx, req, t, r)
}

func (h *handlers) runCommand(ctx context.Context, req *mcp.CallToolRequest, in *RunCommandInput) (any, error) {
	t, to, err := h.runInput(in.Session, "command", in.Command, in.Timeout, func() error {
		switch {
		case strings.TrimSpace(in.Command) == "":
			return badField("command", "command is required: a shell command line")
		case strings.IndexByte(in.Command, 0) >= 0:
			return badField("command", "command contains a NUL byte")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if in.Workdir != "" {
		if _, err := sbexec.ResolveWorkdir(in.Workdir); err != nil {
			return nil, inField("workdir", err)
		}
	}
	return h.run(ctx, req, t, Run{Code: []byte(in.Command), Command: true, Timeout: to, Workdir: in.Workdir})
}

// run runs r, with progress notifications every ProgressEvery while it
// runs when the call asked for them. Cancelling the call (ctx) stops the
// program.
func (h *handlers) run(ctx context.Context, req *mcp.CallToolRequest, t core.Target, r Run) (any, error) {
	r.Tool, r.Client = req.Params.Name, Client(ctx)
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		done := make(chan struct{})
		defer close(done)
		start := time.Now()
		go func() {
			tick := time.NewTicker(h.cfg.ProgressEvery)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-ctx.Done():
					return
				case <-tick.C:
					secs := time.Since(start).Seconds()
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok,
						Progress: math.Floor(secs), Message: fmt.Sprintf("running for %.0fs in %s", secs, t)})
				}
			}
		}()
	}
	return h.cfg.Runner.Run(ctx, t, r)
}

// capWriter keeps the first max bytes written and counts them all.
type capWriter struct {
	buf   bytes.Buffer
	max   int64
	total int64
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.total += int64(len(p))
	if room := w.max - int64(w.buf.Len()); room > 0 {
		w.buf.Write(p[:min(int64(len(p)), room)])
	}
	return len(p), nil
}

func (h *handlers) readFile(ctx context.Context, req *mcp.CallToolRequest, in *ReadFileInput) (any, error) {
	t, err := h.target(in.Session)
	if err != nil {
		return nil, err
	}
	if in.Path == "" {
		return nil, badField("path", "path is required")
	}
	if in.Encoding != "" && in.Encoding != "text" && in.Encoding != "base64" {
		return nil, badField("encoding", "encoding must be text or base64, not %q", in.Encoding)
	}
	loc, err := location(t, "path", in.Path)
	if err != nil {
		return nil, err
	}
	w := &capWriter{max: h.cfg.MaxRead}
	if err := h.cfg.Files.Cat(ctx, loc, w); err != nil {
		return nil, err
	}
	b := w.buf.Bytes()
	res := ReadFileResult{Path: loc.Path, Size: w.total, Truncated: w.total > int64(len(b)), Encoding: in.Encoding}
	if res.Encoding == "" {
		res.Encoding = "text"
		if !utf8.Valid(b) {
			res.Encoding = "base64"
		}
	}
	if res.Encoding == "text" {
		res.Content = strings.ToValidUTF8(string(b), "\uFFFD")
	} else {
		res.Content = base64.StdEncoding.EncodeToString(b)
	}
	return res, nil
}

func (h *handlers) writeFile(ctx context.Context, req *mcp.CallToolRequest, in *WriteFileInput) (any, error) {
	t, err := h.target(in.Session)
	if err != nil {
		return nil, err
	}
	if in.Path == "" {
		return nil, badField("path", "path is required")
	}
	content := []byte(in.Content)
	switch in.Encoding {
	case "", "text":
	case "base64":
		if content, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return nil, badField("content", "content is not valid base64: %v", err)
		}
	default:
		return nil, badField("encoding", "encoding must be text or base64, not %q", in.Encoding)
	}
	if in.Mode != "" {
		if m, err := strconv.ParseUint(in.Mode, 8, 32); err != nil || m > 0o7777 {
			return nil, badField("mode", "mode must be octal permission bits such as 0644, not %q", in.Mode)
		}
	}
	loc, err := location(t, "path", in.Path)
	if err != nil {
		return nil, err
	}
	return h.cfg.Files.Put(ctx, loc, bytes.NewReader(content), in.Mode)
}

var errEnough = errors.New("enough entries")

func (h *handlers) listFiles(ctx context.Context, req *mcp.CallToolRequest, in *ListFilesInput) (any, error) {
	t, err := h.target(in.Session)
	if err != nil {
		return nil, err
	}
	loc, err := location(t, "path", in.Path)
	if err != nil {
		return nil, err
	}
	res := ListFilesResult{Path: loc.Path, Entries: []fsproto.Entry{}}
	err = h.cfg.Files.List(ctx, loc, in.Recursive, func(e fsproto.Entry) error {
		if len(res.Entries) == maxListEntries {
			res.Truncated = true
			return errEnough
		}
		res.Entries = append(res.Entries, e)
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return nil, err
	}
	return res, nil
}

func (h *handlers) deleteFile(ctx context.Context, req *mcp.CallToolRequest, in *DeleteFileInput) (any, error) {
	t, err := h.target(in.Session)
	if err != nil {
		return nil, err
	}
	if in.Path == "" {
		return nil, badField("path", "path is required")
	}
	loc, err := location(t, "path", in.Path)
	if err != nil {
		return nil, err
	}
	return h.cfg.Files.Remove(ctx, loc, in.Recursive, false)
}

func (h *handlers) copyFromSession(ctx context.Context, req *mcp.CallToolRequest, in *CopyFromSessionInput) (any, error) {
	dstT, err := h.target(in.Session)
	if err != nil {
		return nil, err
	}
	srcT := core.Target{Scope: h.cfg.Target.Scope, Session: in.FromSession}
	if err := srcT.Validate(); err != nil {
		return nil, inField("from_session", err)
	}
	if srcT == dstT {
		return nil, badField("from_session", "from_session is this sandbox (%s): give another session of scope %s", dstT, dstT.Scope)
	}
	if in.Path == "" {
		return nil, badField("path", "path is required")
	}
	src, err := location(srcT, "path", in.Path)
	if err != nil {
		return nil, err
	}
	to := in.To
	if to == "" {
		to = in.Path
	}
	dst, err := location(dstT, "to", to)
	if err != nil {
		return nil, err
	}
	res, err := h.cfg.Files.Copy(ctx, src, dst, nil, nil)
	if err != nil {
		return nil, err
	}
	return CopyResult{Source: srcT.String() + ":" + src.Path, Destination: dstT.String() + ":" + dst.Path, Result: res}, nil
}

func (h *handlers) reset(ctx context.Context, req *mcp.CallToolRequest, in *ResetInput) (any, error) {
	t, err := h.target(in.Session)
	if err != nil {
		return nil, err
	}
	stopped, err := h.cfg.Sandboxes.Stop(ctx, t, in.Force)
	if err != nil {
		return nil, err
	}
	return ResetResult{Scope: t.Scope, Session: t.Session, Stopped: stopped}, nil
}

// sessionTarget is a named session of the server's scope.
func (h *handlers) sessionTarget(name string) (core.Target, error) {
	if name == "" {
		return core.Target{}, badField("session", "session is required: a name for the session")
	}
	return h.target(name)
}

func (h *handlers) createSession(ctx context.Context, req *mcp.CallToolRequest, in *SessionInput) (any, error) {
	t, err := h.sessionTarget(in.Session)
	if err != nil {
		return nil, err
	}
	if in.Force {
		return nil, badField("force", "force is for stop_session")
	}
	// The sandbox is created as a first exec creates it (max_sandboxes,
	// policy and limits included), by running nothing in it.
	raw, err := h.cfg.Runner.Run(ctx, t, Run{Code: []byte(":"), Command: true})
	if err != nil {
		return nil, err
	}
	var r struct {
		Created bool `json:"created"`
	}
	_ = json.Unmarshal(raw, &r)
	return SessionResult{Scope: t.Scope, Session: t.Session, Created: r.Created}, nil
}

func (h *handlers) listSessions(ctx context.Context, req *mcp.CallToolRequest, in *NoInput) (any, error) {
	rows, err := h.cfg.Sandboxes.List(ctx, h.cfg.Target.Scope)
	if err != nil {
		return nil, err
	}
	if rows == nil {
		rows = []*sbexec.Sandbox{}
	}
	return SessionsResult{Scope: h.cfg.Target.Scope, Sessions: rows}, nil
}

func (h *handlers) stopSession(ctx context.Context, req *mcp.CallToolRequest, in *SessionInput) (any, error) {
	t, err := h.sessionTarget(in.Session)
	if err != nil {
		return nil, err
	}
	stopped, err := h.cfg.Sandboxes.Stop(ctx, t, in.Force)
	if err != nil {
		return nil, err
	}
	return ResetResult{Scope: t.Scope, Session: t.Session, Stopped: stopped}, nil
}

// clientName is the MCP client's name from its initialize request, or "".
func clientName(req *mcp.CallToolRequest) string {
	if req.Session == nil {
		return ""
	}
	if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil {
		return p.ClientInfo.Name
	}
	return ""
}
