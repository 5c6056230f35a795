package inside

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// chanCallOut is what one call through the channel server returned.
type chanCallOut struct {
	stdout, stderr string
	status         wire.RunStatus
	done           wire.ChanDoneInfo
}

// One channel server runs calls one after another, each a `run` with the
// call's arguments and environment; a call for anything but `run` is
// refused without output.
func TestChannelServerCalls(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call, _, _ := startChannelServer(t, ctx)
	runArgs := wire.RunArgs{Interps: []string{"sh"}, Timeout: 10 * time.Second, MaxOutput: 1 << 20, CodeExt: ".sh"}.Argv()
	got := call(runArgs, `echo "$GREETING"; cat; echo err >&2; exit 3`, "from stdin\n")
	want := chanCallOut{stdout: "hello\nfrom stdin\n", stderr: "err\n", status: wire.RunStatus{ExitCode: 3}, done: wire.ChanDoneInfo{ExitCode: 3}}
	got.status.DurationMS = 0
	if d := cmp.Diff(want, got, cmp.AllowUnexported(chanCallOut{})); d != "" {
		t.Errorf("first call (-want +got):\n%s", d)
	}
	got = call(runArgs, `echo second`, "")
	if got.stdout != "second\n" || got.status.ExitCode != 0 {
		t.Errorf("second call: %+v", got)
	}
	got = call([]string{wire.VerbDrain}, "", "")
	if got.stdout != "" || got.done.Error == "" {
		t.Errorf("a call for drain was not refused: %+v", got)
	}
}

// `channel --first` (the stdin server PID 1 starts) serves one call and
// exits, its stdin still open.
func TestChannelServerFirst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call, in, cmd := startChannelServer(t, ctx, "--first")
	runArgs := wire.RunArgs{Interps: []string{"sh"}, Timeout: 10 * time.Second, MaxOutput: 1 << 20, CodeExt: ".sh"}.Argv()
	if got := call(runArgs, `cat; exit 4`, "once\n"); got.stdout != "once\n" || got.status.ExitCode != 4 {
		t.Fatalf("the call: %+v", got)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the server's exit: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the server did not exit after its one call")
	}
	_ = in.Close()
}

// startChannelServer starts `sandbox-helper channel ARGS` and returns a
// function making one call through it, its stdin and its command (waited
// for at the test's end).
func startChannelServer(t *testing.T, ctx context.Context, args ...string) (func(args []string, code, stdin string) chanCallOut, io.WriteCloser, *exec.Cmd) {
	t.Helper()
	cmd := helperCommand(t, ctx, nil, append([]string{wire.VerbChannel}, args...)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = in.Close()
		_ = cmd.Wait()
	})
	var buf []byte
	if typ, _, err := wire.ReadChanFrame(outR, &buf); err != nil || typ != wire.ChanHello {
		t.Fatalf("hello: %q %v", typ, err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	// The run child needs the test binary's dispatch (TestMain), which
	// the server's own environment no longer asks for.
	env := []string{envExec + "=1", envNoInit + "=1", envProc1Cmdline + "=" + missing, envCgroupV2 + "=" + missing,
		envCgroupV1 + "=" + missing, envControl + "=@sandbox-helper-test-none-" + strconv.Itoa(cmd.Process.Pid), "GREETING=hello"}
	call := func(args []string, code, stdin string) chanCallOut {
		t.Helper()
		b, _ := json.Marshal(wire.ChanCall{Args: args, Env: env})
		if err := wire.WriteChanFrame(in, wire.ChanRequest, b); err != nil {
			t.Fatal(err)
		}
		var sb bytes.Buffer
		_ = wire.WriteCodeHeader(&sb, int64(len(code)))
		sb.WriteString(code + stdin)
		if err := wire.WriteChanFrame(in, wire.ChanStdin, sb.Bytes()); err != nil {
			t.Fatal(err)
		}
		if err := wire.WriteChanFrame(in, wire.ChanStdinEOF, nil); err != nil {
			t.Fatal(err)
		}
		var frames, errb bytes.Buffer
		var res chanCallOut
		for {
			typ, p, err := wire.ReadChanFrame(outR, &buf)
			if err != nil {
				t.Fatalf("reading the call: %v", err)
			}
			if typ == wire.ChanOut {
				frames.Write(p)
				continue
			}
			if typ == wire.ChanErr {
				errb.Write(p)
				continue
			}
			if typ != wire.ChanDone {
				t.Fatalf("frame %q in a call", typ)
			}
			if err := json.Unmarshal(p, &res.done); err != nil {
				t.Fatal(err)
			}
			break
		}
		fr := wire.NewFrameReader(&frames)
		var o, e bytes.Buffer
		for {
			typ, p, err := fr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("run's frames: %v (stderr %s)", err, errb.String())
			}
			switch typ {
			case wire.Stdout:
				o.Write(p)
			case wire.Stderr:
				e.Write(p)
			case wire.Status:
				_ = json.Unmarshal(p, &res.status)
			}
		}
		res.stdout, res.stderr = o.String(), e.String()
		return res
	}
	return call, in, cmd
}

// mergeEnv: the call's variables replace the container's of the same name.
func TestChannelMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"PATH=/bin", "HOME=/opt/user", "A=1"}, []string{"A=2", "B=3", "PATH=/x"})
	want := []string{"PATH=/x", "HOME=/opt/user", "A=2", "B=3"}
	if d := cmp.Diff(want, got); d != "" {
		t.Error(d)
	}
}
