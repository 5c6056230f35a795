package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/files"
	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
)

// fake records every call that reached the sandbox side.
type fake struct {
	mu      sync.Mutex
	calls   []string
	runs    []Run
	targets []core.Target
	content []byte
	run     func(ctx context.Context, r Run) (json.RawMessage, error)
	// clients: the MCP client's name of each Files call (Client).
	clients []string
}

// client notes the MCP client's name of a Files call.
func (f *fake) client(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clients = append(f.clients, Client(ctx))
}

func (f *fake) note(call string, t core.Target) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	f.targets = append(f.targets, t)
}

func (f *fake) CheckLanguage(name string) error {
	if name == "python" || name == "node" || name == "bash" || name == "sh" {
		return nil
	}
	return core.Errorf(core.CodeBadFlag, "unknown language %q", name)
}

func (f *fake) Run(ctx context.Context, t core.Target, r Run) (json.RawMessage, error) {
	f.note("run", t)
	f.mu.Lock()
	f.runs = append(f.runs, r)
	f.mu.Unlock()
	if f.run != nil {
		return f.run(ctx, r)
	}
	return json.RawMessage(`{"exit_code":0,"stdout":"ok\n","created":true}`), nil
}

func (f *fake) List(ctx context.Context, loc files.Location, recursive bool, each func(fsproto.Entry) error) error {
	f.client(ctx)
	f.note("list "+loc.Path, loc.Target)
	return each(fsproto.Entry{Name: "a.txt", Type: fsproto.TypeFile})
}

func (f *fake) Cat(ctx context.Context, loc files.Location, w io.Writer) error {
	f.client(ctx)
	f.note("cat "+loc.Path, loc.Target)
	_, err := w.Write(f.content)
	return err
}

func (f *fake) Put(ctx context.Context, loc files.Location, r io.Reader, mode string) (fsproto.PutResult, error) {
	f.client(ctx)
	b, _ := io.ReadAll(r)
	f.note("put "+loc.Path+" "+string(b)+" "+mode, loc.Target)
	return fsproto.PutResult{Path: loc.Path, Bytes: int64(len(b))}, nil
}

func (f *fake) Remove(ctx context.Context, loc files.Location, recursive, force bool) (fsproto.RmResult, error) {
	f.client(ctx)
	f.note("rm "+loc.Path, loc.Target)
	return fsproto.RmResult{Path: loc.Path, Removed: true}, nil
}

func (f *fake) Copy(ctx context.Context, src, dst files.Location, stdin io.Reader, stdout io.Writer) (*tarsafe.Result, error) {
	f.client(ctx)
	f.note("copy "+src.Target.String()+":"+src.Path+" -> "+dst.Path, dst.Target)
	return &tarsafe.Result{}, nil
}

func (f *fake) Stop(ctx context.Context, t core.Target, force bool) (bool, error) {
	f.note("stop", t)
	return true, nil
}

func (f *fake) ListSandboxes(ctx context.Context, scope string) ([]*sbexec.Sandbox, error) {
	return nil, nil
}

// sandboxes adapts the fake to Sandboxes (List clashes with Files').
type sandboxes struct{ f *fake }

func (s sandboxes) Stop(ctx context.Context, t core.Target, force bool) (bool, error) {
	return s.f.Stop(ctx, t, force)
}

func (s sandboxes) List(ctx context.Context, scope string) ([]*sbexec.Sandbox, error) {
	s.f.note("ls "+scope, core.Target{Scope: scope})
	return []*sbexec.Sandbox{{Scope: scope, Session: "a", State: "idle"}}, nil
}

// connect starts a server over f and returns a client session to it.
func connect(t *testing.T, f *fake, sessions bool, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	srv := New(Config{Target: core.Target{Scope: "u1", Session: "chat"}, Sessions: sessions, Runner: f, Files: f,
		Sandboxes: sandboxes{f}, MaxTimeout: time.Hour, MaxRead: 8, ProgressEvery: 10 * time.Millisecond, Version: "test"})
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	var m map[string]any
	raw, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(raw, &m)
	return res, m
}

func toolNames(t *testing.T, cs *mcp.ClientSession) (names []string, session bool) {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		raw, _ := json.Marshal(tl.InputSchema)
		if strings.Contains(string(raw), `"session"`) {
			session = true
		}
	}
	slices.Sort(names)
	return names, session
}

func TestToolsBySessions(t *testing.T) {
	// copy_from_session is a session tool: a server fixed to one sandbox
	// reaches no other session's workspace.
	base := []string{"delete_file", "list_files", "read_file", "reset", "run_code", "run_command", "write_file"}
	names, session := toolNames(t, connect(t, &fake{}, false, nil))
	if d := cmp.Diff(base, names); d != "" || session {
		t.Errorf("without --sessions: tools (-want +got):\n%s\nsession input: %v", d, session)
	}
	names, session = toolNames(t, connect(t, &fake{}, true, nil))
	want := slices.Sorted(slices.Values(append(slices.Clone(base), "copy_from_session", "create_session", "list_sessions", "stop_session")))
	if d := cmp.Diff(want, names); d != "" || !session {
		t.Errorf("with --sessions: tools (-want +got):\n%s\nsession input: %v", d, session)
	}
}

// TestBadInputs: every bad input is a structured tool error naming its
// field, with exec's codes, and nothing reaches the sandbox.
func TestBadInputs(t *testing.T) {
	for _, tc := range []struct {
		sessions    bool
		tool        string
		args        map[string]any
		code, field string
	}{
		{false, "run_code", map[string]any{"code": "1"}, "bad_flag", "language"},
		{false, "run_code", map[string]any{"language": "cobol", "code": "1"}, "bad_flag", "language"},
		{false, "run_code", map[string]any{"language": "python", "code": 42}, "bad_flag", "code"},
		{false, "run_code", map[string]any{"language": "python", "code": "1", "timeout": -1}, "bad_flag", "timeout"},
		{false, "run_code", map[string]any{"language": "python", "code": "1", "timeout": 7200}, "bad_flag", "timeout"},
		{false, "run_code", map[string]any{"language": "python", "code": "1", "timeout": "10s"}, "bad_flag", "timeout"},
		{false, "run_code", map[string]any{"language": "python", "code": "1", "scope": "other"}, "bad_flag", "scope"},
		{false, "run_code", map[string]any{"language": "python", "code": "1", "session": "other"}, "bad_flag", "session"},
		{true, "run_code", map[string]any{"language": "python", "code": "1", "session": "../x"}, "bad_name", "session"},
		{true, "run_code", map[string]any{"language": "python", "code": "1", "session": "a/b"}, "bad_name", "session"},
		{false, "run_command", map[string]any{"command": ""}, "bad_flag", "command"},
		{false, "run_command", map[string]any{"command": "ls", "workdir": "../../etc"}, "bad_flag", "workdir"},
		{false, "run_command", map[string]any{"command": "ls\x00x"}, "bad_flag", "command"},
		{false, "run_command", map[string]any{"command": "ls", "timeout": -1}, "bad_flag", "timeout"},
		{false, "run_command", map[string]any{"command": "ls", "session": "other"}, "bad_flag", "session"},
		{false, "run_command", map[string]any{"command": "ls", "timeout": -1, "workdir": "../../etc"}, "bad_flag", "timeout"},
		{false, "run_code", map[string]any{"language": "cobol", "code": "1", "timeout": -1}, "bad_flag", "language"},
		{false, "read_file", map[string]any{}, "bad_flag", "path"},
		{false, "read_file", map[string]any{"path": "../../etc/passwd"}, "path_escape", "path"},
		{false, "read_file", map[string]any{"path": "/etc/passwd"}, "path_escape", "path"},
		{false, "read_file", map[string]any{"path": "a", "encoding": "hex"}, "bad_flag", "encoding"},
		{false, "write_file", map[string]any{"path": "a", "content": "!!", "encoding": "base64"}, "bad_flag", "content"},
		{false, "write_file", map[string]any{"path": "a", "content": "x", "mode": "rwx"}, "bad_flag", "mode"},
		{false, "write_file", map[string]any{"path": "/opt/other/x", "content": "x"}, "path_escape", "path"},
		{false, "list_files", map[string]any{"path": "/"}, "path_escape", "path"},
		{false, "list_files", map[string]any{"recursive": "yes"}, "bad_flag", "recursive"},
		{false, "delete_file", map[string]any{"path": "a\x00b"}, "path_escape", "path"},
		{true, "copy_from_session", map[string]any{"from_session": "chat", "path": "a"}, "bad_flag", "from_session"},
		{true, "copy_from_session", map[string]any{"from_session": "u2:x", "path": "a"}, "bad_name", "from_session"},
		{true, "copy_from_session", map[string]any{"from_session": "b", "path": "a", "to": "../../x"}, "path_escape", "to"},
		{true, "copy_from_session", map[string]any{"path": "a"}, "bad_flag", "from_session"},
		{true, "create_session", map[string]any{"session": ""}, "bad_flag", "session"},
		{true, "stop_session", map[string]any{}, "bad_flag", "session"},
	} {
		f := &fake{}
		cs := connect(t, f, tc.sessions, nil)
		res, m := call(t, cs, tc.tool, tc.args)
		e, _ := m["error"].(map[string]any)
		if !res.IsError || e == nil || e["code"] != tc.code || e["field"] != tc.field {
			raw, _ := json.Marshal(res)
			t.Errorf("%s %v: want a tool error %s on field %s, got %s", tc.tool, tc.args, tc.code, tc.field, raw)
		}
		if len(f.calls) > 0 {
			t.Errorf("%s %v: a bad input reached the sandbox: %v", tc.tool, tc.args, f.calls)
		}
		// The server is alive after it.
		if res, _ := call(t, cs, "list_files", nil); res.IsError {
			t.Errorf("%s: the server does not answer after a bad input", tc.tool)
		}
	}
}

// TestScopeFixed: whatever a call asks, it reaches only sandboxes of the
// server's scope.
func TestScopeFixed(t *testing.T) {
	f := &fake{}
	cs := connect(t, f, true, nil)
	call(t, cs, "run_code", map[string]any{"language": "python", "code": "1"})
	call(t, cs, "run_command", map[string]any{"command": "ls", "session": "other"})
	call(t, cs, "write_file", map[string]any{"path": "u2:x", "content": "hi"})
	call(t, cs, "copy_from_session", map[string]any{"from_session": "", "path": "a"})
	call(t, cs, "reset", nil)
	call(t, cs, "create_session", map[string]any{"session": "n1"})
	call(t, cs, "stop_session", map[string]any{"session": "n1"})
	call(t, cs, "list_sessions", nil)
	want := []core.Target{{Scope: "u1", Session: "chat"}, {Scope: "u1", Session: "other"}, {Scope: "u1", Session: "chat"},
		{Scope: "u1", Session: "chat"}, {Scope: "u1", Session: "chat"}, {Scope: "u1", Session: "n1"}, {Scope: "u1", Session: "n1"}, {Scope: "u1"}}
	if d := cmp.Diff(want, f.targets); d != "" {
		t.Errorf("targets (-want +got):\n%s\ncalls %v", d, f.calls)
	}
	// "u2:x" is a file of this sandbox, never scope u2's.
	if got := f.calls[2]; got != "put /opt/workspace/u2:x hi " {
		t.Errorf("write_file u2:x: %q", got)
	}
	if got := f.calls[3]; got != "copy u1:/opt/workspace/a -> /opt/workspace/a" {
		t.Errorf("copy_from_session: %q", got)
	}
}

// TestFileToolsClient: every file tool's call carries the MCP client's
// name (Client), as run_code's Run does, for its audit record.
func TestFileToolsClient(t *testing.T) {
	f := &fake{content: []byte("x")}
	cs := connect(t, f, true, nil)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"write_file", map[string]any{"path": "a", "content": "hi"}},
		{"read_file", map[string]any{"path": "a"}},
		{"list_files", nil},
		{"delete_file", map[string]any{"path": "a"}},
		{"copy_from_session", map[string]any{"from_session": "b", "path": "a"}},
		{"run_command", map[string]any{"command": "ls"}},
	} {
		if res, _ := call(t, cs, c.tool, c.args); res.IsError {
			t.Fatalf("%s: %v", c.tool, res.Content)
		}
	}
	if d := cmp.Diff([]string{"test", "test", "test", "test", "test"}, f.clients); d != "" {
		t.Errorf("the client of the Files calls (-want +got):\n%s", d)
	}
	if len(f.runs) != 1 || f.runs[0].Client != "test" {
		t.Errorf("run_command's client: %+v", f.runs)
	}
}

// TestRunCode: the request the Runner gets, the kernel hook, and the
// result passed through as exec's JSON.
func TestRunCode(t *testing.T) {
	f := &fake{}
	cs := connect(t, f, false, nil)
	res, m := call(t, cs, "run_code", map[string]any{"language": "python", "code": "print(1)", "timeout": 2.5})
	if res.IsError || m["stdout"] != "ok\n" {
		t.Fatalf("run_code: %+v", m)
	}
	call(t, cs, "run_code", map[string]any{"language": "python", "code": "1", "stateless": true})
	call(t, cs, "run_code", map[string]any{"language": "bash", "code": "echo"})
	call(t, cs, "run_command", map[string]any{"command": "ls -l", "workdir": "src"})
	want := []Run{
		{Language: "python", Code: []byte("print(1)"), Timeout: 2500 * time.Millisecond, Kernel: true, Tool: "run_code", Client: "test"},
		{Language: "python", Code: []byte("1"), Tool: "run_code", Client: "test"},
		{Language: "bash", Code: []byte("echo"), Tool: "run_code", Client: "test"},
		{Code: []byte("ls -l"), Command: true, Workdir: "src", Tool: "run_command", Client: "test"},
	}
	if d := cmp.Diff(want, f.runs); d != "" {
		t.Errorf("runs (-want +got):\n%s", d)
	}
	// A Runner's error is a structured tool error with its code.
	f.run = func(ctx context.Context, r Run) (json.RawMessage, error) {
		return nil, core.Errorf(core.CodeEngineUnreachable, "cannot reach the engine")
	}
	res, m = call(t, cs, "run_command", map[string]any{"command": "ls"})
	if e, _ := m["error"].(map[string]any); !res.IsError || e["code"] != "engine_unreachable" {
		t.Errorf("engine unreachable: %+v", m)
	}
}

func TestReadFile(t *testing.T) {
	f := &fake{content: []byte("hello")}
	cs := connect(t, f, false, nil)
	_, m := call(t, cs, "read_file", map[string]any{"path": "a.txt"})
	if d := cmp.Diff(map[string]any{"path": "/opt/workspace/a.txt", "encoding": "text", "content": "hello", "size": 5.0, "truncated": false}, m); d != "" {
		t.Errorf("text (-want +got):\n%s", d)
	}
	f.content = []byte{0xff, 0, 1}
	_, m = call(t, cs, "read_file", map[string]any{"path": "a.bin"})
	if m["encoding"] != "base64" || m["content"] != base64.StdEncoding.EncodeToString(f.content) {
		t.Errorf("binary: %+v", m)
	}
	f.content = []byte("0123456789") // over MaxRead 8
	_, m = call(t, cs, "read_file", map[string]any{"path": "big"})
	if m["content"] != "01234567" || m["truncated"] != true || m["size"] != 10.0 {
		t.Errorf("capped: %+v", m)
	}
	_, m = call(t, cs, "write_file", map[string]any{"path": "b", "content": base64.StdEncoding.EncodeToString([]byte("bin")), "encoding": "base64", "mode": "0600"})
	if m["bytes"] != 3.0 || f.calls[len(f.calls)-1] != "put /opt/workspace/b bin 0600" {
		t.Errorf("write base64: %+v %v", m, f.calls)
	}
}

// TestPanicIsToolError: a handler's panic ends that call, not the server.
func TestPanicIsToolError(t *testing.T) {
	f := &fake{run: func(ctx context.Context, r Run) (json.RawMessage, error) { panic("boom") }}
	cs := connect(t, f, false, nil)
	res, m := call(t, cs, "run_code", map[string]any{"language": "sh", "code": "x"})
	if e, _ := m["error"].(map[string]any); !res.IsError || e["code"] != "internal" {
		t.Errorf("panic: %+v", m)
	}
	if res, _ := call(t, cs, "read_file", map[string]any{"path": "a"}); res.IsError {
		t.Errorf("server dead after a panic")
	}
}

// TestProgressAndCancel: a long run sends progress; cancelling the call
// cancels the Runner's context.
func TestProgressAndCancel(t *testing.T) {
	progress := make(chan *mcp.ProgressNotificationParams, 100)
	cancelled := make(chan struct{})
	f := &fake{run: func(ctx context.Context, r Run) (json.RawMessage, error) {
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	}}
	cs := connect(t, f, false, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		progress <- r.Params
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	params := &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"language": "python", "code": "import time; time.sleep(60)"}}
	params.SetProgressToken("tok1")
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, params)
		errc <- err
	}()
	select {
	case p := <-progress:
		if p.ProgressToken != "tok1" || !strings.HasPrefix(p.Message, "running for") {
			t.Errorf("progress: %+v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no progress notification")
	}
	cancel()
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("cancelling the call did not cancel the run")
	}
	if err := <-errc; err == nil {
		t.Error("a cancelled call returned no error")
	}
	// Two calls at once both run (calls are concurrent).
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(2)
	f.run = func(ctx context.Context, r Run) (json.RawMessage, error) {
		started.Done()
		<-release
		return json.RawMessage(`{"exit_code":0}`), nil
	}
	var done sync.WaitGroup
	for range 2 {
		done.Add(1)
		go func() {
			defer done.Done()
			call(t, cs, "run_command", map[string]any{"command": "x"})
		}()
	}
	waited := make(chan struct{})
	go func() { started.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("two calls did not run at once")
	}
	close(release)
	done.Wait()
}

func TestDecodeStrictNull(t *testing.T) {
	var in ListFilesInput
	s := schemaFor[ListFilesInput]()
	if err := decodeStrict(nil, &in, s); err != nil {
		t.Error(err)
	}
	if err := decodeStrict(json.RawMessage(`[1]`), &in, s); err == nil || !bytes.Contains([]byte(err.Error()), []byte("arguments")) {
		t.Errorf("an array: %v", err)
	}
}

// TestClientGoneStopsCalls: when the client's stream ends, a call still
// running is cancelled (its program stopped) and Serve returns after it.
func TestClientGoneStopsCalls(t *testing.T) {
	running, cancelled := make(chan struct{}), make(chan struct{})
	f := &fake{run: func(ctx context.Context, r Run) (json.RawMessage, error) {
		close(running)
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	}}
	srv := New(Config{Target: core.Target{Scope: "u1"}, Runner: f, Files: f, Sandboxes: sandboxes{f}})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), inR, outW) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "sleep 600"}})
	}()
	<-running
	inW.Close() // the client goes away
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the running call was not cancelled when the client went away")
	}
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	outR.Close()
}
