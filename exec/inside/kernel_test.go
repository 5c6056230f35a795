package inside

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
	"github.com/docker-sandbox/docker-sandbox/internal/testenv"
)

// kernelCall runs code in the harness init's python kernel.
func (h *initHarness) kernelCall(code, timeout string, extra ...string) result {
	h.t.Helper()
	args := append([]string{"run", "--interp", "python3", "--code-ext", ".py", "--timeout", timeout, "--max-output", "100000", "--kernel", "python"}, extra...)
	return runHelper(h.t, codeStdin(code, nil), h.env, append(args, "--")...)
}

func needPython(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		testenv.Skip(t, "no python3 on this host") // the e2e tests run it in the image
	}
}

// TestKernelState: a kernel keeps state between calls; the last
// expression is the result; output streams; an exception is exit 1.
func TestKernelState(t *testing.T) {
	t.Parallel()
	needPython(t)
	h := newInitHarness(t, "--idle-ttl", "0")
	if r := h.kernelCall("x = 41\nprint('set')", "10s"); r.status.ExitCode != 0 || string(r.stdout) != "set\n" || r.status.Result != nil || r.status.KernelRestarted {
		t.Fatalf("first call: %+v %q %q", r.status, r.stdout, r.stderr)
	}
	r := h.kernelCall("import asyncio\nawait asyncio.sleep(0)\nx + 1", "10s")
	if r.status.ExitCode != 0 || r.status.Result == nil || *r.status.Result != "42" {
		t.Fatalf("second call: %+v %q %q", r.status, r.stdout, r.stderr)
	}
	r = h.kernelCall("1/0", "10s")
	if r.status.ExitCode != 1 || !strings.Contains(string(r.stderr), "ZeroDivisionError") || strings.Contains(string(r.stderr), "kernel") {
		t.Fatalf("exception: %+v %q", r.status, r.stderr)
	}
	// Interrupted within the grace: 124, the state stays.
	r = h.kernelCall("import time\ntime.sleep(30)", "500ms")
	if r.status.ExitCode != 124 || !r.status.TimedOut || r.status.StateLost || !strings.Contains(string(r.stderr), "KeyboardInterrupt") {
		t.Fatalf("interrupted: %+v %q", r.status, r.stderr)
	}
	if r = h.kernelCall("x", "10s"); r.status.Result == nil || *r.status.Result != "41" || r.status.KernelRestarted {
		t.Fatalf("after the interrupt: %+v %q", r.status, r.stderr)
	}
	// Deaf to the interrupt: killed, state lost.
	start := time.Now()
	r = h.kernelCall("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(30)", "500ms")
	if r.status.ExitCode != 124 || !r.status.KernelRestarted || !r.status.StateLost || time.Since(start) > 8*time.Second {
		t.Fatalf("killed: %+v %q after %v", r.status, r.stderr, time.Since(start))
	}
	if r = h.kernelCall("'x' in globals()", "10s"); r.status.Result == nil || *r.status.Result != "False" || !r.status.KernelRestarted {
		t.Fatalf("after the kill: %+v %q", r.status, r.stderr)
	}
	// The code kills its kernel: that call says so, the next is fresh.
	r = h.kernelCall("y = 1\nimport os\nos._exit(3)", "10s")
	if r.status.ExitCode != 3 || r.status.ErrorCode != "kernel_died" || !r.status.StateLost {
		t.Fatalf("os._exit: %+v %q", r.status, r.stderr)
	}
	if r = h.kernelCall("'y' in globals()", "10s"); r.status.Result == nil || *r.status.Result != "False" || !r.status.KernelRestarted {
		t.Fatalf("after os._exit: %+v %q", r.status, r.stderr)
	}
	// Reset.
	h.kernelCall("z = 1", "10s")
	if r = h.kernelCall("'z' in globals()", "10s", "--kernel-reset"); r.status.Result == nil || *r.status.Result != "False" || r.status.ExitCode != 0 {
		t.Fatalf("reset: %+v %q", r.status, r.stderr)
	}
	_ = wire.KernelPython
}

// TestKernelNode: the node kernel keeps state; a returned Promise is
// awaited; top-level await works; process.exit is a death the next call
// reports.
func TestKernelNode(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Skip(t, "no node on this host") // the e2e tests run it in the image
	}
	h := newInitHarness(t, "--idle-ttl", "0")
	call := func(code string) result {
		return runHelper(t, codeStdin(code, nil), h.env, "run", "--interp", "node", "--code-ext", ".js", "--timeout", "10s", "--max-output", "100000", "--kernel", "node", "--")
	}
	if r := call("var x = 41; console.log('set')"); r.status.ExitCode != 0 || string(r.stdout) != "set\n" {
		t.Fatalf("first call: %+v %q %q", r.status, r.stdout, r.stderr)
	}
	if r := call("await new Promise(r => setTimeout(r, 10))\nx + 1"); r.status.Result == nil || *r.status.Result != "42" {
		t.Fatalf("await: %+v %q %q", r.status, r.stdout, r.stderr)
	}
	if r := call("Promise.resolve('p')"); r.status.Result == nil || *r.status.Result != "'p'" {
		t.Fatalf("promise: %+v %q %q", r.status, r.stdout, r.stderr)
	}
	// Interrupted at the timeout, a busy loop or a pending await: the
	// state stays.
	for _, code := range []string{"while (true) {}", "await new Promise(() => {})"} {
		r := runHelper(t, codeStdin(code, nil), h.env, "run", "--interp", "node", "--code-ext", ".js", "--timeout", "300ms", "--max-output", "100000", "--kernel", "node", "--")
		if r.status.ExitCode != 124 || r.status.StateLost || r.status.KernelRestarted {
			t.Fatalf("%s at the timeout: %+v %q", code, r.status, r.stderr)
		}
	}
	if r := call("x"); r.status.Result == nil || *r.status.Result != "41" {
		t.Fatalf("state after the interrupts: %+v %q %q", r.status, r.stdout, r.stderr)
	}
	if r := call("process.exit(4)"); r.status.ExitCode != 4 || !r.status.StateLost {
		t.Fatalf("exit: %+v %q %q", r.status, r.stdout, r.stderr)
	}
	if r := call("typeof x"); r.status.Result == nil || *r.status.Result != "'undefined'" || !r.status.KernelRestarted {
		t.Fatalf("after exit: %+v %q %q", r.status, r.stdout, r.stderr)
	}
}

// TestKernelOneAtATime: calls to one kernel never interleave, and a call
// that waits for the kernel longer than its timeout ends with 124 without
// running.
func TestKernelOneAtATime(t *testing.T) {
	t.Parallel()
	needPython(t)
	h := newInitHarness(t, "--idle-ttl", "0")
	h.kernelCall("import time, os\nlog = []", "10s")
	running := filepath.Join(t.TempDir(), "running")
	done := make(chan result, 4)
	go func() {
		done <- h.kernelCall(fmt.Sprintf("open(%q, 'w').close()\nlog.append('a'); time.sleep(1.5); log.append('a')", running), "10s")
	}()
	waitFile(t, h.ctx, running)
	r := h.kernelCall("log.append('late')", "300ms")
	if r.status.ExitCode != 124 || !r.status.TimedOut {
		t.Fatalf("a call that waited past its timeout: %+v %q", r.status, r.stderr)
	}
	for _, c := range []string{"b", "c"} {
		go func() {
			done <- h.kernelCall(fmt.Sprintf("log.append(%q); time.sleep(0.1); log.append(%q)", c, c), "10s")
		}()
	}
	for range 3 {
		if r := <-done; r.status.ExitCode != 0 {
			t.Fatalf("a call: %+v %q", r.status, r.stderr)
		}
	}
	r = h.kernelCall("''.join(log)", "10s")
	if r.status.Result == nil {
		t.Fatalf("no result: %+v %q", r.status, r.stderr)
	}
	got := strings.Trim(*r.status.Result, "'")
	if got != "aabbcc" && got != "aaccbb" {
		t.Fatalf("calls interleaved or one ran that should not have: %q", got)
	}
}

// TestPumpUntil: the output before the marker is framed, wherever reads
// split it, at most limit bytes; what follows the marker is not.
func TestPumpUntil(t *testing.T) {
	const marker = "\x1eMARK\x1e"
	for _, tc := range []struct {
		name, in string
		chunk    int
		limit    int64
		want     string
		trunc    bool
	}{
		{"whole", "hello\n" + marker + "after", 1 << 10, 100, "hello\n", false},
		{"byte by byte", "hel\x1elo\n" + marker + "after", 1, 100, "hel\x1elo\n", false},
		{"split marker", "abc" + marker, 5, 100, "abc", false},
		{"capped", "0123456789" + marker, 3, 4, "0123", true},
		{"no marker, EOF", "partial\x1eMA", 2, 100, "partial\x1eMA", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			go func() {
				defer w.Close()
				for b := []byte(tc.in); len(b) > 0; {
					n := min(tc.chunk, len(b))
					if _, err := w.Write(b[:n]); err != nil {
						return
					}
					b = b[n:]
					time.Sleep(time.Millisecond) // separate reads, not synchronisation
				}
			}()
			var buf bytes.Buffer
			out := newOutput(&buf)
			var trunc atomic.Bool
			pumpUntil(out, wire.Stdout, r, marker, tc.limit, &trunc)
			var got []byte
			fr := wire.NewFrameReader(&buf)
			for {
				typ, p, err := fr.Next()
				if err != nil {
					break
				}
				if typ == wire.Stdout {
					got = append(got, p...)
				}
			}
			if string(got) != tc.want || trunc.Load() != tc.trunc {
				t.Fatalf("got %q (truncated %v), want %q (%v)", got, trunc.Load(), tc.want, tc.trunc)
			}
		})
	}
}

// TestKernelCallerKilled: a run killed during its kernel call (PID 1 kills
// hung or stopped wrappers) takes the kernel with it: the kernel's late
// answer never reaches the next call, which starts a fresh kernel.
func TestKernelCallerKilled(t *testing.T) {
	t.Parallel()
	needPython(t)
	h := newInitHarness(t, "--idle-ttl", "0")
	running := filepath.Join(t.TempDir(), "running")
	cmd := helperCommand(t, h.ctx, h.env, "run", "--interp", "python3", "--code-ext", ".py", "--timeout", "30s", "--max-output", "1000", "--kernel", "python", "--")
	code := fmt.Sprintf("x = 1\nimport time\nopen(%q, 'w').close()\ntime.sleep(1)\nprint('late')\n'late result'", running)
	cmd.Stdin = bytes.NewReader(codeStdin(code, nil))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, h.ctx, running)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	r := h.kernelCall("'x' in globals()", "10s")
	if r.status.Result == nil || *r.status.Result != "False" || !r.status.KernelRestarted || strings.Contains(string(r.stdout), "late") {
		t.Fatalf("the call after a killed caller: %+v %q", r.status, r.stdout)
	}
}

// FuzzPumpUntil: whatever the output and however the reads split it, the
// pump frames exactly what precedes the first marker, capped.
func FuzzPumpUntil(f *testing.F) {
	const marker = "\x1eMARK\x1e"
	f.Add([]byte("hello\n\x1eMARK\x1eafter"), uint8(3), uint8(100))
	f.Add([]byte("\x1e\x1eMARK\x1eMARK\x1e"), uint8(1), uint8(2))
	f.Add([]byte("no marker \x1eMAR"), uint8(7), uint8(5))
	f.Fuzz(func(t *testing.T, in []byte, chunk, limit uint8) {
		if chunk == 0 {
			chunk = 1
		}
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		go func() {
			defer w.Close()
			for b := in; len(b) > 0; {
				n := min(int(chunk), len(b))
				if _, err := w.Write(b[:n]); err != nil {
					return
				}
				b = b[n:]
			}
		}()
		var buf bytes.Buffer
		var trunc atomic.Bool
		pumpUntil(newOutput(&buf), wire.Stdout, r, marker, int64(limit), &trunc)
		want := in
		if i := bytes.Index(in, []byte(marker)); i >= 0 {
			want = in[:i]
		}
		wantTrunc := len(want) > int(limit)
		if wantTrunc {
			want = want[:limit]
		}
		var got []byte
		fr := wire.NewFrameReader(&buf)
		for {
			typ, p, err := fr.Next()
			if err != nil {
				break
			}
			if typ != wire.Stdout {
				t.Fatalf("frame type %d", typ)
			}
			got = append(got, p...)
		}
		if !bytes.Equal(got, want) || trunc.Load() != wantTrunc {
			t.Fatalf("got %q (truncated %v), want %q (%v)", got, trunc.Load(), want, wantTrunc)
		}
	})
}
