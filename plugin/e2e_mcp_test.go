package plugin_test

// docker sandbox mcp, driven as an MCP client drives it: the built plugin
// as a subprocess, through the official SDK's client (CommandTransport),
// against the real engine.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpServer starts `docker-sandbox mcp ARGS` and connects a client to it.
func mcpServer(t *testing.T, env []string, opts *mcp.ClientOptions, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := osexec.Command(pluginBin, append([]string{"mcp"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = t.TempDir()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, opts).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to docker sandbox mcp %v: %v\nstderr:\n%s", args, err, stderr)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr)
		}
	})
	return cs
}

// mcpCall calls a tool and returns the result and its structured content
// as JSON; a protocol error fails the test.
func mcpCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: protocol error: %v", tool, args, err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	return res, raw
}

// mcpOK calls a tool that must succeed and decodes its result into v.
func mcpOK(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, v any) {
	t.Helper()
	res, raw := mcpCall(t, cs, tool, args)
	if res.IsError {
		t.Fatalf("%s %v: tool error: %s", tool, args, raw)
	}
	if v != nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		if _, strict := v.(*execJSON); strict {
			dec.DisallowUnknownFields() // exec's documented schema, exactly
		}
		if err := dec.Decode(v); err != nil {
			t.Fatalf("%s: result %s: %v", tool, raw, err)
		}
	}
}

type mcpErr struct {
	Error struct{ Code, Message, Field string } `json:"error"`
}

// mcpFail calls a tool that must give a structured tool error with code
// (and, for a bad input, field).
func mcpFail(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, code, field string) {
	t.Helper()
	res, raw := mcpCall(t, cs, tool, args)
	var e mcpErr
	_ = json.Unmarshal(raw, &e)
	if !res.IsError || e.Error.Code != code || e.Error.Field != field {
		t.Fatalf("%s %v: want a tool error %s on field %q, got %s", tool, args, code, field, raw)
	}
}

func runCmd(t *testing.T, cs *mcp.ClientSession, command string) execJSON {
	t.Helper()
	var j execJSON
	mcpOK(t, cs, "run_command", map[string]any{"command": command, "timeout": 30}, &j)
	return j
}

// TestMCPTools: every tool of one server, state across calls, bad inputs,
// the fixed scope, a timeout with progress, two concurrent calls,
// cancellation, reset and a sandbox removed under the server.
func TestMCPTools(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	other := newScope(t)
	var progress sync.Map // token -> count
	cs := mcpServer(t, nil, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		n, _ := progress.LoadOrStore(r.Params.ProgressToken, new(int))
		*n.(*int)++
	}}, "--scope", s, "--sessions")

	// Files and runs share the workspace, across calls.
	mcpOK(t, cs, "write_file", map[string]any{"path": "notes/a.txt", "content": "hello"}, nil)
	if j := runCmd(t, cs, "cat notes/a.txt; echo x > b.txt"); j.ExitCode != 0 || j.Stdout != "hello" || j.Scope != s || j.Lang != "sh" || j.Created {
		t.Fatalf("run_command: %+v", j)
	}
	var rf struct{ Content, Encoding string }
	mcpOK(t, cs, "read_file", map[string]any{"path": "b.txt"}, &rf)
	if rf.Content != "x\n" || rf.Encoding != "text" {
		t.Fatalf("read_file: %+v", rf)
	}
	var code execJSON
	mcpOK(t, cs, "run_code", map[string]any{"language": "python", "code": "print(open('notes/a.txt').read()*2)\nimport sys; sys.exit(3)"}, &code)
	if code.Stdout != "hellohello\n" || code.ExitCode != 3 || code.Lang != "python" || code.Created {
		t.Fatalf("run_code: %+v", code)
	}
	var ls struct {
		Entries []struct{ Name, Type string }
	}
	mcpOK(t, cs, "list_files", map[string]any{"path": "notes"}, &ls)
	if len(ls.Entries) != 1 || ls.Entries[0].Name != "a.txt" || ls.Entries[0].Type != "file" {
		t.Fatalf("list_files: %+v", ls)
	}
	mcpOK(t, cs, "write_file", map[string]any{"path": "bin.dat", "content": "AP8B", "encoding": "base64"}, nil)
	mcpOK(t, cs, "read_file", map[string]any{"path": "bin.dat"}, &rf)
	if rf.Content != "AP8B" || rf.Encoding != "base64" {
		t.Fatalf("binary read_file: %+v", rf)
	}
	mcpOK(t, cs, "delete_file", map[string]any{"path": "b.txt"}, nil)
	mcpFail(t, cs, "read_file", map[string]any{"path": "b.txt"}, "file_not_found", "")

	// Bad inputs: structured errors naming the field; the server lives.
	mcpFail(t, cs, "run_code", map[string]any{"language": "cobol", "code": "x"}, "bad_flag", "language")
	mcpFail(t, cs, "run_code", map[string]any{"language": "python", "code": 1}, "bad_flag", "code")
	mcpFail(t, cs, "read_file", map[string]any{"path": "../../../etc/passwd"}, "path_escape", "path")
	mcpFail(t, cs, "run_command", map[string]any{"command": "true", "scope": other}, "bad_flag", "scope")
	mcpFail(t, cs, "run_command", map[string]any{"command": "true", "session": "../" + other}, "bad_name", "session")

	// The scope is fixed: "OTHER:x" is a file of this sandbox, and
	// nothing of the other scope exists.
	mcpOK(t, cs, "write_file", map[string]any{"path": other + ":x", "content": "mine"}, nil)
	if j := runCmd(t, cs, "cat '"+other+":x'"); j.Stdout != "mine" {
		t.Fatalf("OTHER:x: %+v", j)
	}
	if c, v := objects(t, other); c+v != 0 {
		t.Fatalf("a tool reached scope %s: %d containers, %d volumes", other, c, v)
	}

	// A timeout, with progress notifications while it runs.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"language": "python", "code": "import time\nprint('start', flush=True)\ntime.sleep(60)", "timeout": 3}}
	p.SetProgressToken("timeout-call")
	res, err := cs.CallTool(ctx, p)
	if err != nil || res.IsError {
		t.Fatalf("timeout call: %v %+v", err, res)
	}
	var to execJSON
	raw, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(raw, &to)
	if !to.TimedOut || to.ExitCode != 124 || to.Stdout != "start\n" {
		t.Fatalf("timeout: %s", raw)
	}
	if n, ok := progress.Load("timeout-call"); !ok || *n.(*int) < 1 {
		t.Errorf("no progress notification during a 3 s run")
	}

	// Two calls at once: each waits for the other's file, so both finish
	// only if they run concurrently.
	var wg sync.WaitGroup
	outs := make([]execJSON, 2)
	for i, pair := range [][2]string{{"a", "b"}, {"b", "a"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := fmt.Sprintf("touch %s.flag; until [ -f %s.flag ]; do sleep 0.05; done; echo %s", pair[0], pair[1], pair[0])
			var j execJSON
			mcpOK(t, cs, "run_command", map[string]any{"command": cmd, "timeout": 20}, &j)
			outs[i] = j
		}()
	}
	wg.Wait()
	if outs[0].Stdout != "a\n" || outs[1].Stdout != "b\n" || outs[0].TimedOut || outs[1].TimedOut {
		t.Fatalf("concurrent calls: %+v", outs)
	}

	// Cancellation kills the program: its pid file appears, the call is
	// cancelled, and a later call finds the process gone.
	cctx, ccancel := context.WithCancel(context.Background())
	callErr := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "echo $$ > victim.pid; exec sleep 300", "timeout": 120}})
		callErr <- err
	}()
	pid := mcpWaitPid(t, cs, "victim.pid")
	ccancel()
	select {
	case err := <-callErr:
		if err == nil {
			t.Fatal("the cancelled call returned a result")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	mcpWaitGone(t, cs, pid)

	// A client that goes away in the middle of a call (its end of the
	// pipes closes, as when it crashes; the SDK's own Close would wait for
	// the call): the server stops the program, then exits.
	srv := osexec.Command(pluginBin, "mcp", "--scope", s)
	srv.Env, srv.Dir = os.Environ(), t.TempDir()
	stdin, _ := srv.StdinPipe()
	stdout, _ := srv.StdoutPipe()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = srv.Wait(); close(exited) }()
	t.Cleanup(func() { _ = srv.Process.Kill(); <-exited })
	leaving, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: stdin}, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = leaving.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "echo $$ > victim2.pid; exec sleep 600", "timeout": 600}})
	}()
	pid = mcpWaitPid(t, cs, "victim2.pid")
	t0 := time.Now()
	_ = stdin.Close()
	mcpWaitGone(t, cs, pid)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Errorf("the server did not exit after its client went away")
	}
	if d := time.Since(t0); d > 30*time.Second {
		t.Errorf("the program of a client that went away lived %s after it", d)
	}

	// Sessions under the fixed scope, and a copy between them.
	var cr struct {
		Scope, Session string
		Created        bool
	}
	mcpOK(t, cs, "create_session", map[string]any{"session": "s2"}, &cr)
	if cr.Scope != s || cr.Session != "s2" || !cr.Created {
		t.Fatalf("create_session: %+v", cr)
	}
	mcpOK(t, cs, "write_file", map[string]any{"path": "from-s2.txt", "content": "s2 data", "session": "s2"}, nil)
	mcpOK(t, cs, "copy_from_session", map[string]any{"from_session": "s2", "path": "from-s2.txt", "to": "copied.txt"}, nil)
	mcpOK(t, cs, "read_file", map[string]any{"path": "copied.txt"}, &rf)
	if rf.Content != "s2 data" {
		t.Fatalf("copy_from_session: %+v", rf)
	}
	var sl struct {
		Sessions []struct{ Scope, Session, State string }
	}
	mcpOK(t, cs, "list_sessions", nil, &sl)
	if len(sl.Sessions) != 2 || sl.Sessions[0].Session != "" || sl.Sessions[1].Session != "s2" || sl.Sessions[1].Scope != s {
		t.Fatalf("list_sessions: %+v", sl)
	}
	var st struct{ Stopped bool }
	mcpOK(t, cs, "stop_session", map[string]any{"session": "s2"}, &st)
	if !st.Stopped {
		t.Fatalf("stop_session: %+v", st)
	}

	// reset: the container goes, the files stay, the next call starts a
	// new one.
	mcpOK(t, cs, "reset", nil, &st)
	if !st.Stopped {
		t.Fatalf("reset: %+v", st)
	}
	if j := runCmd(t, cs, "cat notes/a.txt"); !j.Created || j.Stdout != "hello" {
		t.Fatalf("after reset: %+v", j)
	}

	// A sandbox removed under the server: the next call recreates it.
	cli := engine(t)
	cs2, err := cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", "com.docker.sandbox.scope="+s))})
	if err != nil || len(cs2) != 1 {
		t.Fatalf("containers of %s: %v %d", s, err, len(cs2))
	}
	if err := cli.ContainerRemove(context.Background(), cs2[0].ID, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	waitContainerGone(cli, cs2[0].ID)
	if j := runCmd(t, cs, "cat notes/a.txt"); !j.Created || j.Stdout != "hello" {
		t.Fatalf("after docker rm: %+v", j)
	}
}

// mcpWaitPid waits for a program's pid file and checks that a later call
// sees the program alive.
func mcpWaitPid(t *testing.T, cs *mcp.ClientSession, file string) string {
	t.Helper()
	var pid string
	poll(t, 30*time.Second, func() error {
		var r struct{ Content string }
		res, raw := mcpCall(t, cs, "read_file", map[string]any{"path": file})
		if res.IsError {
			return fmt.Errorf("no pid file yet: %s", raw)
		}
		_ = json.Unmarshal(raw, &r)
		pid = strings.TrimSpace(r.Content)
		return nil
	})
	if j := runCmd(t, cs, "kill -0 "+pid+" 2>/dev/null && echo alive || echo gone"); j.Stdout != "alive\n" {
		t.Fatalf("the running program (pid %s) is not seen by a later call: %+v", pid, j)
	}
	return pid
}

// mcpWaitGone waits until a later call finds the program gone.
func mcpWaitGone(t *testing.T, cs *mcp.ClientSession, pid string) {
	t.Helper()
	poll(t, 20*time.Second, func() error {
		if j := runCmd(t, cs, "kill -0 "+pid+" 2>/dev/null && echo alive || echo gone"); j.Stdout != "gone\n" {
			return fmt.Errorf("the stopped program (pid %s) is %s", pid, j.Stdout)
		}
		return nil
	})
}

// TestMCPFixedSessionAndEngineDown: without --sessions the session tools do
// not exist and a call cannot name a session; with the engine unreachable
// a call is a structured error and the server lives.
func TestMCPFixedSessionAndEngineDown(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	cs := mcpServer(t, []string{"DOCKER_HOST=unix:///nonexistent.sock", "DOCKER_CONTEXT="}, nil, "--scope", s, "--session", "chat")
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if strings.Contains(tl.Name, "session") {
			t.Errorf("tool %s without --sessions", tl.Name)
		}
	}
	mcpFail(t, cs, "run_command", map[string]any{"command": "true", "session": "other"}, "bad_flag", "session")
	for range 2 {
		mcpFail(t, cs, "run_command", map[string]any{"command": "true"}, "engine_unreachable", "")
	}
	mcpFail(t, cs, "list_files", nil, "engine_unreachable", "")

	// What the server is started with is checked before it serves: a bad
	// scope is exit 125 with nothing on standard output (the protocol's).
	r := sbRun(t, run{args: []string{"mcp", "--scope", "../" + s}, standalone: true, stdin: strings.NewReader("")})
	if r.Code != 125 || r.Stdout != "" || !strings.Contains(r.Stderr, "scope") {
		t.Errorf("mcp --scope ../%s: %s", s, r)
	}
}

// TestMCPFixedSessionReachesNoOtherSession: a server started for one
// session (no --sessions) cannot read another session's workspace nor make
// a session exist: copy_from_session is not there, and no tool takes a
// session (checked against a real sandbox holding a secret).
func TestMCPFixedSessionReachesNoOtherSession(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	wantStdout(t, sb(t, "exec", "-s", s, "--session", "private", "-c", "echo TOP-SECRET > secret.txt; echo ok"), "ok\n")
	cs := mcpServer(t, nil, nil, "--scope", s, "--session", "chat")
	for _, tool := range []string{"copy_from_session", "create_session", "stop_session", "list_sessions"} {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool,
			Arguments: map[string]any{"from_session": "private", "session": "made-by-model", "path": "secret.txt", "to": "got.txt"}}); err == nil {
			t.Errorf("a server fixed to session chat has the tool %s", tool)
		}
	}
	for tool, args := range map[string]map[string]any{
		"read_file":   {"path": "secret.txt", "session": "private"},
		"list_files":  {"path": ".", "session": "private"},
		"run_command": {"command": "cat secret.txt", "session": "private"},
	} {
		mcpFail(t, cs, tool, args, "bad_flag", "session")
	}
	if r := sb(t, "ls", "-a", "--filter", "scope="+s, "--format", "json"); strings.Contains(r.Stdout, "made-by-model") {
		t.Errorf("a server fixed to session chat made a session exist: %s", r.Stdout)
	}
	// What chat holds and can read is its own.
	mcpFail(t, cs, "read_file", map[string]any{"path": "got.txt"}, "file_not_found", "")
}

// TestMCPKernel: run_code in python keeps its state between calls (the
// sandbox's kernel, as exec --kernel) and returns the last expression as
// result; stateless runs a plain exec that sees none of it; each call is
// an audit record naming the tool, the kernel and the MCP client.
func TestMCPKernel(t *testing.T) {
	needE2E(t)
	cfg, env := auditConfig(t)
	s := newScope(t)
	cs := mcpServer(t, env, nil, "--scope", s)
	var j execJSON
	mcpOK(t, cs, "run_code", map[string]any{"language": "python", "code": "x = 41"}, &j)
	mcpOK(t, cs, "run_code", map[string]any{"language": "python", "code": "x + 1"}, &j)
	if j.Result == nil || *j.Result != "42" || j.ExitCode != 0 {
		t.Fatalf("the second kernel call: %+v", j)
	}
	var plain execJSON
	mcpOK(t, cs, "run_code", map[string]any{"language": "python", "code": "print('x' in globals())", "stateless": true}, &plain)
	if plain.Stdout != "False\n" || plain.Result != nil {
		t.Fatalf("a stateless call: %+v", plain)
	}
	// A kernel that runs out of memory: 137, oom_killed; the next call
	// has a fresh kernel.
	oom := mcpServer(t, env, nil, "--scope", newScope(t), "--memory", "96m")
	var o execJSON
	mcpOK(t, oom, "run_code", map[string]any{"language": "python", "code": "y = 1\nb = []\nwhile True: b.append(bytearray(8 << 20))"}, &o)
	if o.ExitCode != 137 || !o.OOMKilled {
		t.Fatalf("a kernel out of memory: %+v", o)
	}
	var after execJSON
	mcpOK(t, oom, "run_code", map[string]any{"language": "python", "code": "'y' in globals()"}, &after)
	if after.Result == nil || *after.Result != "False" || !after.KernelRestarted {
		t.Fatalf("the call after an OOM: %+v", after)
	}

	// Files the model writes and deletes are recorded too.
	mcpOK(t, cs, "write_file", map[string]any{"path": "a.txt", "content": "12345"}, nil)
	mcpOK(t, cs, "delete_file", map[string]any{"path": "a.txt"}, nil)
	var got [][2]string
	var written int64
	for _, r := range auditRecords(t, cfg, s) {
		got = append(got, [2]string{r.Command, r.MCPClient})
		if r.Command == "mcp write_file" {
			written = r.BytesIn
		}
	}
	want := [][2]string{{"mcp run_code --kernel", "e2e"}, {"mcp run_code --kernel", "e2e"}, {"mcp run_code", "e2e"}, {"mcp write_file", "e2e"}, {"mcp delete_file", "e2e"}}
	if written != 5 {
		t.Errorf("write_file record: %d bytes in, want 5", written)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("audit records (-want +got):\n%s", d)
	}
}
