package plugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// kernelProcs lists the processes of container id whose command line is a
// kernel's (python3 -u -c ... / node -e ...), from the engine (docker top).
func kernelProcs(t *testing.T, id string) ([]string, error) {
	t.Helper()
	top, err := engine(t).ContainerTop(context.Background(), id, nil)
	if err != nil {
		return nil, err
	}
	col := -1
	for i, title := range top.Titles {
		if title == "CMD" || title == "COMMAND" {
			col = i
		}
	}
	if col < 0 {
		t.Fatalf("docker top: no command column in %q", top.Titles)
	}
	var out []string
	for _, p := range top.Processes {
		if cmd := p[col]; strings.Contains(cmd, "python3 -u -c") || strings.Contains(cmd, "node -e") {
			out = append(out, cmd[:min(len(cmd), 60)])
		}
	}
	return out, nil
}

// TestKernelPython: state persists between --kernel calls of one sandbox
// and language; the last expression is the result (plain and JSON);
// top-level await works; plain exec is not in the kernel; a timeout first
// interrupts (state kept), then kills a deaf kernel (124, state lost, the
// next call says so); code that kills its kernel gets kernel_died and the
// next call a fresh kernel; --kernel-reset forgets; stop kills the kernel.
func TestKernelPython(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	k := func(extra ...string) result {
		t.Helper()
		return sb(t, append([]string{"exec", "-s", scope, "--session", "chat", "--kernel", "--lang", "python"}, extra...)...)
	}
	kj := func(extra ...string) (result, execJSON) {
		t.Helper()
		r := k(append([]string{"--format", "json"}, extra...)...)
		return r, decodeExec(t, r)
	}

	r := k("-c", "x = 41\nimport math")
	wantCode(t, r, 0)
	if r.Stdout != "" {
		t.Fatalf("an assignment has no result:\n%s", r)
	}
	if r = k("-c", "x + 1"); r.Code != 0 || r.Stdout != "42\n" {
		t.Fatalf("state across calls: want 42\n%s", r)
	}
	r, j := kj("-c", "import asyncio\nawait asyncio.sleep(0.01)\nprint('p')\nmath.floor(x / 2)")
	if r.Code != 0 || j.Result == nil || *j.Result != "20" || j.Stdout != "p\n" || j.KernelRestarted || j.StateLost {
		t.Fatalf("JSON result with top-level await: %+v\n%s", j, r)
	}
	ctr := j.Container
	if r = k("-c", "'a' + 'b'"); r.Stdout != "'ab'\n" {
		t.Fatalf("the result is the repr:\n%s", r)
	}
	// Plain exec in the same sandbox is a new interpreter, as before.
	if r = sb(t, "exec", "-s", scope, "--session", "chat", "--lang", "python", "-c", "print('x' in globals())"); r.Code != 0 || r.Stdout != "False\n" {
		t.Fatalf("plain exec next to a kernel:\n%s", r)
	}

	// A timeout interrupts (KeyboardInterrupt): 124, the state stays.
	r = k("--timeout", "1s", "-c", "import time\ntime.sleep(60)")
	if r.Code != 124 || !strings.Contains(r.Stderr, "KeyboardInterrupt") || !strings.Contains(r.Stderr, "the kernel keeps its state") {
		t.Fatalf("interrupted at the timeout:\n%s", r)
	}
	if r = k("-c", "x"); r.Stdout != "41\n" {
		t.Fatalf("state after an interrupt:\n%s", r)
	}
	// Deaf to the interrupt: killed after the grace, state lost.
	r, j = kj("--timeout", "1s", "-c", "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)")
	if r.Code != 124 || j.ExitCode != 124 || !j.TimedOut || !j.KernelRestarted || !j.StateLost || r.Elapsed > 20*time.Second {
		t.Fatalf("a kernel deaf to the interrupt: %+v\n%s", j, r)
	}
	r, j = kj("-c", "'x' in globals()")
	if j.Result == nil || *j.Result != "False" || !j.KernelRestarted || !j.StateLost {
		t.Fatalf("the call after the kill: %+v\n%s", j, r)
	}
	k("-c", "x = 1") // state again

	// The code kills its own kernel.
	r, j = kj("-c", "print('bye')\nimport os\nos._exit(3)")
	if r.Code != 3 || j.Error == nil || j.Error.Code != "kernel_died" || !j.StateLost || j.Stdout != "bye\n" ||
		!strings.Contains(j.Error.Message, "exited with status 3") {
		t.Fatalf("os._exit in the kernel: %+v\n%s", j, r)
	}
	r = k("-c", "'x' in globals()")
	if r.Stdout != "False\n" || !strings.Contains(r.Stderr, "restarted") {
		t.Fatalf("the call after the kernel's death:\n%s", r)
	}

	// --kernel-reset.
	k("-c", "z = 1")
	if r = k("--kernel-reset", "-c", "'z' in globals()"); r.Code != 0 || r.Stdout != "False\n" {
		t.Fatalf("--kernel-reset:\n%s", r)
	}

	// inspect shows the live kernel.
	r = sb(t, "inspect", scope+"/chat")
	var ins []struct {
		Helper struct {
			Init struct {
				Kernels []struct {
					Lang  string `json:"lang"`
					PID   int    `json:"pid"`
					Calls int    `json:"calls"`
				} `json:"kernels"`
			} `json:"init"`
		} `json:"helper"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &ins); err != nil || len(ins) != 1 || len(ins[0].Helper.Init.Kernels) != 1 ||
		ins[0].Helper.Init.Kernels[0].Lang != "python" || ins[0].Helper.Init.Kernels[0].Calls != 1 {
		t.Fatalf("inspect's kernels: %v %+v\n%s", err, ins, r)
	}

	// Stop kills the kernel: one lives before, none after.
	if ps, err := kernelProcs(t, ctr); err != nil || len(ps) != 1 {
		t.Fatalf("before stop: kernels %q (%v)", ps, err)
	}
	wantCode(t, sb(t, "stop", scope+"/chat"), 0)
	poll(t, 10*time.Second, func() error {
		ps, err := kernelProcs(t, ctr)
		if err == nil && len(ps) > 0 {
			return fmt.Errorf("kernels after stop: %q", ps)
		}
		return nil
	})
	// The next call: a fresh sandbox, a fresh kernel, nothing to report.
	r, j = kj("-c", "'z' in globals()")
	if j.Result == nil || *j.Result != "False" || j.KernelRestarted {
		t.Fatalf("after stop: %+v\n%s", j, r)
	}
}

// TestKernelNode: the node kernel keeps state, awaits a returned Promise
// and a top-level await, prints util.inspect of the result, and reports
// process.exit as the kernel's death.
func TestKernelNode(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	k := func(code string) result {
		t.Helper()
		return sb(t, "exec", "-s", scope, "--kernel", "--lang", "node", "-c", code)
	}
	if r := k("var n = 41; const fs = require('fs')"); r.Code != 0 {
		t.Fatalf("first call:\n%s", r)
	}
	if r := k("await new Promise(r => setTimeout(r, 10))\nn + 1"); r.Code != 0 || r.Stdout != "42\n" {
		t.Fatalf("top-level await and state:\n%s", r)
	}
	if r := k("Promise.resolve({a: typeof fs.readFileSync})"); r.Stdout != "{ a: 'function' }\n" {
		t.Fatalf("a returned Promise:\n%s", r)
	}
	r := sb(t, "exec", "-s", scope, "--kernel", "--lang", "node", "--format", "json", "-c", "process.exit(5)")
	if j := decodeExec(t, r); r.Code != 5 || j.Error == nil || j.Error.Code != "kernel_died" || !j.StateLost {
		t.Fatalf("process.exit: %+v\n%s", j, r)
	}
	if r := k("typeof n"); r.Stdout != "'undefined'\n" || !strings.Contains(r.Stderr, "restarted") {
		t.Fatalf("after process.exit:\n%s", r)
	}
}

// TestKernelIdle: an idle kernel does not keep its sandbox: the container
// goes at its idle TTL although its kernel lives; a bad --kernel use is a
// clear error that runs nothing.
func TestKernelIdle(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	r := sb(t, "exec", "-s", scope, "--idle-ttl", "2s", "--kernel", "--lang", "python", "--format", "json", "-c", "1")
	j := decodeExec(t, r)
	if r.Code != 0 || j.Result == nil || *j.Result != "1" {
		t.Fatalf("kernel call: %+v\n%s", j, r)
	}
	poll(t, 20*time.Second, func() error {
		if _, err := engine(t).ContainerInspect(context.Background(), j.Container); err == nil {
			return fmt.Errorf("container %s still there", j.Container)
		}
		return nil
	})
	r = sb(t, "exec", "-s", scope, "--kernel", "--lang", "sh", "-c", "echo hi")
	wantCode(t, r, 125)
	if !strings.Contains(r.Stderr, "--kernel runs python and node") || strings.Contains(r.Stdout, "hi") {
		t.Fatalf("--kernel with sh:\n%s", r)
	}
	// kernel = true in the configuration: sh runs as usual.
	r = sbRun(t, run{args: []string{"exec", "-s", scope, "--lang", "sh", "-c", "echo hi"}, env: []string{"DOCKER_SANDBOX_KERNEL=true"}})
	if r.Code != 0 || r.Stdout != "hi\n" {
		t.Fatalf("sh with kernel = true configured:\n%s", r)
	}
}

// TestKernelOOM: a kernel killed by the out-of-memory killer ends its call
// with 137, oom_killed and kernel_died; the next call has a fresh kernel.
func TestKernelOOM(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	k := func(code string) (result, execJSON) {
		t.Helper()
		r := sb(t, "exec", "-s", scope, "--memory", "96m", "--kernel", "--lang", "python", "--format", "json", "-c", code)
		return r, decodeExec(t, r)
	}
	k("keep = 1")
	r, j := k("b = b'x' * (400 << 20)")
	if r.Code != 137 || !j.OOMKilled || j.Error == nil || j.Error.Code != "kernel_died" || !j.StateLost {
		t.Fatalf("out of memory in the kernel: %+v\n%s", j, r)
	}
	if r, j = k("'keep' in globals()"); j.Result == nil || *j.Result != "False" || !j.KernelRestarted {
		t.Fatalf("after the OOM: %+v\n%s", j, r)
	}
}

// TestKernelHostile: other code of the sandbox (a plain exec, same user)
// cannot trace the python kernel (non-dumpable), and what it can do (stop
// it, kill it) never hangs a kernel call or makes it report a state it
// does not have: a stopped kernel times out (124) and is replaced, a
// killed one is replaced at the next call, which says so.
func TestKernelHostile(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	k := func(extra ...string) (result, execJSON) {
		t.Helper()
		r := sb(t, append([]string{"exec", "-s", scope, "--kernel", "--lang", "python", "--format", "json"}, extra...)...)
		return r, decodeExec(t, r)
	}
	// other signals the kernels (found by their command line) from a plain exec.
	other := func(sig string) result {
		t.Helper()
		code := fmt.Sprintf(`import os, signal
n = 0
for p in os.listdir('/proc'):
    if not p.isdigit(): continue
    try: cmd = open('/proc/%%s/cmdline' %% p, 'rb').read()
    except OSError: continue
    if b'\0-u\0-c\0' in cmd:
        n += 1
        try:
            open('/proc/%%s/mem' %% p, 'rb').read(1)
            print('read the kernel memory')
        except OSError: pass
        os.kill(int(p), signal.%s)
print(n)`, sig)
		return sb(t, "exec", "-s", scope, "--lang", "python", "-c", code)
	}
	k("-c", "x = 1")
	if r := other("SIGSTOP"); r.Stdout != "1\n" {
		t.Fatalf("stopping the kernel from a plain exec:\n%s", r)
	}
	r, j := k("--timeout", "1s", "-c", "x")
	if r.Code != 124 || !j.TimedOut || !j.KernelRestarted || !j.StateLost || j.Result != nil || r.Elapsed > 15*time.Second {
		t.Fatalf("a call to a stopped kernel: %+v\n%s", j, r)
	}
	k("-c", "x = 2")
	if r := other("SIGKILL"); r.Stdout != "1\n" {
		t.Fatalf("killing the kernel from a plain exec:\n%s", r)
	}
	if r, j = k("-c", "'x' in globals()"); j.Result == nil || *j.Result != "False" || !j.KernelRestarted {
		t.Fatalf("a call after the kernel was killed: %+v\n%s", j, r)
	}
}
