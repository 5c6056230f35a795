package exec

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// fakeChannel is an exec channel: serve (nil: none) answers each call on
// the server end of a unix socket pair.
type fakeChannel struct {
	t     *testing.T
	serve func(c *net.UnixConn, call wire.ChanCall, r *bufio.Reader)
	dials int
}

func (f *fakeChannel) Has(string) bool  { return f.serve != nil }
func (f *fakeChannel) Busy(string) bool { return false }

func (f *fakeChannel) Dial(ctx context.Context, _ string) net.Conn {
	f.dials++
	if f.serve == nil {
		return nil
	}
	path := filepath.Join(f.t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		f.t.Fatal(err)
	}
	go func() {
		defer ln.Close()
		c, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var call wire.ChanCall
		if json.Unmarshal(line, &call) != nil {
			return
		}
		f.serve(c, call, r)
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func frame(typ byte, p []byte) []byte {
	var b strings.Builder
	_ = wire.NewFrameWriter(&b).WriteFrame(typ, p)
	return []byte(b.String())
}

// A call through the channel: the `run` arguments and environment go in the
// request, the code only once the run's Started frame came back, and the
// result is the run's; the engine gets no exec.
func TestRunThroughChannel(t *testing.T) {
	f := newFake()
	f.helper = func(cmd []string, code, stdin []byte) (string, string, wire.RunStatus) {
		t.Errorf("a plain exec ran: %v", cmd)
		return "", "", wire.RunStatus{}
	}
	var gotCall wire.ChanCall
	var gotIn []byte
	early := false
	ch := &fakeChannel{t: t, serve: func(c *net.UnixConn, call wire.ChanCall, r *bufio.Reader) {
		gotCall = call
		// Nothing may come before Started.
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := r.Peek(1); err == nil {
			early = true
		}
		_ = c.SetReadDeadline(time.Time{})
		out := stdcopy.NewStdWriter(c, stdcopy.Stdout)
		_, _ = out.Write(frame(wire.Started, nil))
		gotIn, _ = io.ReadAll(r)
		_, _ = out.Write(frame(wire.Stdout, []byte("hi\n")))
		b, _ := json.Marshal(wire.RunStatus{ExitCode: 3})
		_, _ = out.Write(frame(wire.Status, b))
	}}
	m := &Manager{Engine: f, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64", Os: "linux"}}, Version: "0.1.0", Channel: ch}
	spec := testSpec()
	f.containers[spec.ContainerName()], f.running[spec.ContainerName()] = nil, true
	var out strings.Builder
	req := Request{Lang: languages["python"], Code: []byte("print(1)"), Env: []string{"A=1"}, Workdir: "/opt/workspace", Timeout: time.Second,
		MaxOutput: 100, Stdin: strings.NewReader("in"), Stdout: &out, Stderr: io.Discard}
	res, err := m.Run(context.Background(), spec, req)
	if err != nil || res.Status.ExitCode != 3 || out.String() != "hi\n" {
		t.Fatalf("res %+v out %q err %v", res, out.String(), err)
	}
	if early {
		t.Error("the code went before the run's Started frame")
	}
	if len(f.calls) != 0 {
		t.Errorf("engine calls %v", f.calls)
	}
	if gotCall.Args[0] != wire.VerbRun || !cmp.Equal(gotCall.Env, []string{"A=1"}) {
		t.Errorf("call %+v", gotCall)
	}
	var want strings.Builder
	_ = wire.WriteCodeHeader(&want, 8)
	want.WriteString("print(1)in")
	if string(gotIn) != want.String() {
		t.Errorf("stdin %q, want %q", gotIn, want.String())
	}
}

// A channel that fails before the run started (it closes at once, or
// writes something that is not a frame) is a plain exec, with its result.
func TestRunChannelFallsBack(t *testing.T) {
	for name, serve := range map[string]func(c *net.UnixConn, _ wire.ChanCall, _ *bufio.Reader){
		"closed":  func(c *net.UnixConn, _ wire.ChanCall, _ *bufio.Reader) {},
		"garbage": func(c *net.UnixConn, _ wire.ChanCall, _ *bufio.Reader) { _, _ = c.Write([]byte("garbage")) },
		"bad frame": func(c *net.UnixConn, _ wire.ChanCall, _ *bufio.Reader) {
			_, _ = stdcopy.NewStdWriter(c, stdcopy.Stdout).Write([]byte("xxxxxxxxx"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake()
			f.helper = func(cmd []string, code, stdin []byte) (string, string, wire.RunStatus) {
				return "plain " + string(code), "", wire.RunStatus{ExitCode: 5}
			}
			ch := &fakeChannel{t: t, serve: serve}
			m := &Manager{Engine: f, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64", Os: "linux"}}, Version: "0.1.0", Channel: ch}
			spec := testSpec()
			f.containers[spec.ContainerName()], f.running[spec.ContainerName()] = nil, true
			var out strings.Builder
			req := Request{Lang: languages["python"], Code: []byte("print(1)"), Workdir: "/opt/workspace", Timeout: time.Second,
				MaxOutput: 100, Stdout: &out, Stderr: io.Discard}
			res, err := m.Run(context.Background(), spec, req)
			if err != nil || res.Status.ExitCode != 5 || out.String() != "plain print(1)" || ch.dials != 1 {
				t.Fatalf("res %+v out %q err %v dials %d", res, out.String(), err, ch.dials)
			}
		})
	}
}

// fakeFirstServer is PID 1's stdin server behind the fake engine's attach:
// its hello, then one call answered with run frames (Started, the code and
// stdin it got echoed, status 3); hello=false: the attach ends at once.
func fakeFirstServer(t *testing.T, hello bool, got *wire.ChanCall) func(c net.Conn) {
	return func(c net.Conn) {
		out := stdcopy.NewStdWriter(c, stdcopy.Stdout)
		if !hello {
			return
		}
		send := func(typ byte, p []byte) { _ = wire.WriteChanFrame(out, typ, p) }
		send(wire.ChanHello, nil)
		var buf []byte
		typ, p, err := wire.ReadChanFrame(c, &buf)
		if err != nil || typ != wire.ChanRequest {
			t.Errorf("request: %q %v", typ, err)
			return
		}
		_ = json.Unmarshal(p, got)
		send(wire.ChanOut, frame(wire.Started, nil))
		var in []byte
		for {
			typ, p, err := wire.ReadChanFrame(c, &buf)
			if err != nil {
				t.Errorf("stdin: %v", err)
				return
			}
			if typ == wire.ChanStdinEOF {
				break
			}
			in = append(in, p...)
		}
		send(wire.ChanOut, frame(wire.Stdout, in))
		b, _ := json.Marshal(wire.RunStatus{ExitCode: 3})
		send(wire.ChanOut, frame(wire.Status, b))
		send(wire.ChanDone, []byte(`{"exit_code":3}`))
		_, _ = io.Copy(io.Discard, c)
	}
}

// The call that creates a sandbox on an engine whose default runtime is
// native attaches to it before it starts it, with PID 1 serving that call
// on the container's stdin and stdout (--serve-stdin, StdinOnce, no log):
// its program runs without an engine exec, with the run's result.
func TestRunFirstThroughAttach(t *testing.T) {
	f := newFake()
	f.info = func(i *system.Info) { i.DefaultRuntime = "runc" }
	f.helper = func(cmd []string, code, stdin []byte) (string, string, wire.RunStatus) {
		t.Errorf("a plain exec ran: %v", cmd)
		return "", "", wire.RunStatus{}
	}
	var call wire.ChanCall
	f.attach = fakeFirstServer(t, true, &call)
	ch := &fakeChannel{t: t}
	m := &Manager{Engine: f, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64", Os: "linux"}}, Version: "0.1.0", Channel: ch}
	spec := testSpec()
	var out strings.Builder
	req := Request{Lang: languages["python"], Code: []byte("print(1)"), Env: []string{"A=1"}, Workdir: "/opt/workspace", Timeout: time.Second,
		MaxOutput: 100, Stdin: strings.NewReader("in"), Stdout: &out, Stderr: io.Discard}
	res, err := m.Run(context.Background(), spec, req)
	if err != nil || res.Status.ExitCode != 3 || !res.Created {
		t.Fatalf("res %+v err %v", res, err)
	}
	var want strings.Builder
	_ = wire.WriteCodeHeader(&want, 8)
	want.WriteString("print(1)in")
	if out.String() != want.String() {
		t.Errorf("the run got %q, want %q", out.String(), want.String())
	}
	if call.Args[0] != wire.VerbRun || !cmp.Equal(call.Env, []string{"A=1"}) {
		t.Errorf("call %+v", call)
	}
	calls := slices.DeleteFunc(slices.Clone(f.calls), func(c string) bool { return c == "RemoveSeeder" }) // in the background
	if d := cmp.Diff([]string{"ImageInspect rt:1", "CreateSeeder", "Create", "Attach", "Start"}, calls); d != "" {
		t.Errorf("engine calls (-want +got):\n%s", d)
	}
	cfg, hc := f.containers[spec.ContainerName()], f.hostcfg[spec.ContainerName()]
	if !cfg.OpenStdin || !cfg.StdinOnce || hc.LogConfig.Type != "none" || cfg.Entrypoint[len(cfg.Entrypoint)-1] != "--serve-stdin" || cfg.Tty {
		t.Errorf("the attached sandbox's settings: stdin %v once %v log %q tty %v entrypoint %q", cfg.OpenStdin, cfg.StdinOnce, hc.LogConfig.Type, cfg.Tty, cfg.Entrypoint)
	}
	// The rest of the settings are the sandbox's (ContainerConfig).
	spec.HelperVolume = hc.Mounts[len(hc.Mounts)-1].Source
	plainCfg, plainHC := spec.ContainerConfig()
	plainCfg.Entrypoint, plainCfg.OpenStdin, plainCfg.StdinOnce = cfg.Entrypoint, true, true
	plainCfg.AttachStdin, plainCfg.AttachStdout, plainCfg.AttachStderr = true, true, true
	plainHC.LogConfig = hc.LogConfig
	if d := cmp.Diff(plainCfg, cfg); d != "" {
		t.Errorf("config beyond the attach (-plain +attached):\n%s", d)
	}
	if d := cmp.Diff(plainHC, hc); d != "" {
		t.Errorf("host config beyond the log (-plain +attached):\n%s", d)
	}
	// A channel process for the calls that follow, started as the call
	// ends; none for a one-shot call (exec --rm), which removes the
	// sandbox next.
	if ch.dials != 1 {
		t.Errorf("the first call started %d channel processes, want 1", ch.dials)
	}
	f1 := newFake()
	f1.info, f1.helper, f1.attach = f.info, f.helper, fakeFirstServer(t, true, &call)
	ch1 := &fakeChannel{t: t}
	m1 := &Manager{Engine: f1, Images: m.Images, Version: "0.1.0", Channel: ch1}
	req.Stdin, req.OneShot = strings.NewReader("in"), true
	if res, err := m1.Run(context.Background(), testSpec(), req); err != nil || res.Status.ExitCode != 3 || !res.Created {
		t.Fatalf("one-shot: res %+v err %v", res, err)
	}
	if ch1.dials != 0 {
		t.Errorf("a one-shot first call started %d channel processes, want none", ch1.dials)
	}
}

// The first call's channel falls back to a plain exec when its server does
// not answer; no attach where runs need their exec (a default runtime that
// is not native), on Podman, or with the channel off.
func TestRunFirstFallsBack(t *testing.T) {
	for name, tc := range map[string]struct {
		runtime    string
		podman     bool
		channelOff bool
		hello      bool
		attached   bool
	}{
		"no hello":         {runtime: "runc", attached: true},
		"runsc default":    {runtime: "runsc", hello: true},
		"no default known": {hello: true},
		"podman":           {runtime: "crun", podman: true, hello: true},
		"channel off":      {runtime: "runc", channelOff: true, hello: true},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake()
			f.info = func(i *system.Info) { i.DefaultRuntime = tc.runtime }
			f.podman = tc.podman
			f.helper = func(cmd []string, code, stdin []byte) (string, string, wire.RunStatus) {
				return "plain " + string(code), "", wire.RunStatus{ExitCode: 5}
			}
			var call wire.ChanCall
			f.attach = fakeFirstServer(t, tc.hello, &call)
			m := &Manager{Engine: f, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64", Os: "linux"}}, Version: "0.1.0"}
			if !tc.channelOff {
				m.Channel = &fakeChannel{t: t}
			}
			if tc.podman {
				m.Podman = fakePodmanAPI{"private", "shareable"}
			}
			var out strings.Builder
			req := Request{Lang: languages["python"], Code: []byte("print(1)"), Workdir: "/opt/workspace", Timeout: time.Second,
				MaxOutput: 100, Stdout: &out, Stderr: io.Discard}
			res, err := m.Run(context.Background(), testSpec(), req)
			if err != nil || res.Status.ExitCode != 5 || out.String() != "plain print(1)" {
				t.Fatalf("res %+v out %q err %v", res, out.String(), err)
			}
			attached := slices.Contains(f.calls, "Attach")
			if attached != tc.attached {
				t.Errorf("attached %v, want %v (calls %v)", attached, tc.attached, f.calls)
			}
			cfg := f.containers[testSpec().ContainerName()]
			if cfg.OpenStdin != tc.attached {
				t.Errorf("OpenStdin %v, want %v", cfg.OpenStdin, tc.attached)
			}
		})
	}
}
