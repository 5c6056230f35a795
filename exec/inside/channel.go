package inside

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// Channel is `sandbox-helper channel`: the server end of a sandbox's
// persistent exec channel. The plugin's channel process keeps one engine
// exec of it open per sandbox and sends it calls, one at a time, over its
// stdin (wire channel frames); for each, the server starts `sandbox-helper
// run` with the call's arguments and environment as its own child, exactly
// as the engine's exec would start it, and relays its stdin, stdout and
// stderr. The `run` child registers with PID 1, supervises its program and
// reports its status as under its own exec (PID 1 serves a `run` whose
// parent is a channel exec root like an exec root: control.go rootKind), so
// a call through the channel is a run like any other, without the engine's
// per-exec setup. The server is an exec root of kind "channel": PID 1 does
// not count it as activity (the idle TTL runs while no call runs), kills
// it when it is stopped or traced, and a drain (stop, rm) kills it.
//
// The server only ever starts `run`. Sandboxed code can kill it (same
// user): the channel process then sees its exec end and the plugin falls
// back to a plain exec.
//
// `channel --first` is the stdin server PID 1 starts (stdin_server.go): it
// serves one call, and exits if none comes within firstCallWithin (the
// call that attached went away before sending it).
func Channel(args []string) int {
	first := len(args) == 1 && args[0] == "--first"
	if len(args) != 0 && !first {
		fmt.Fprintln(os.Stderr, "usage: sandbox-helper channel [--first] (started by the plugin, or by PID 1; frames on stdin)")
		return 2
	}
	// Signals sandboxed code could send to end it quietly are ignored (it
	// can still SIGKILL it: the plugin falls back).
	signal.Notify(make(chan os.Signal, 8), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGPIPE)
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-helper channel: %v\n", err)
		return 1
	}
	s := &chanServer{self: self, argv0: os.Args[0], out: os.Stdout, once: first}
	if first {
		called := make(chan struct{})
		s.called = called
		go func() {
			select {
			case <-called:
			case <-time.After(firstCallWithin):
				os.Exit(0)
			}
		}()
	}
	return s.serve(bufio.NewReaderSize(os.Stdin, 64<<10))
}

// firstCallWithin bounds the stdin server's wait for its call.
const firstCallWithin = 30 * time.Second

// chanServer serves one channel.
type chanServer struct {
	self  string // the helper binary, to start `run`
	argv0 string
	mu    sync.Mutex // one frame at a time on out
	out   io.Writer
	// once: serve one call, then exit (the stdin server); called is
	// closed when it arrives.
	once   bool
	called chan struct{}
}

func (s *chanServer) send(typ byte, p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return wire.WriteChanFrame(s.out, typ, p)
}

// serve reads frames until stdin ends.
func (s *chanServer) serve(in io.Reader) int {
	if s.send(wire.ChanHello, nil) != nil {
		return 1
	}
	var buf []byte
	var cur *chanCall
	for {
		typ, p, err := wire.ReadChanFrame(in, &buf)
		if err != nil {
			if cur != nil {
				cur.closeStdin()
				<-cur.done
			}
			return 0
		}
		switch typ {
		case wire.ChanRequest:
			if cur != nil {
				fmt.Fprintln(os.Stderr, "sandbox-helper channel: a request during a call")
				return 1
			}
			var c wire.ChanCall
			if err := json.Unmarshal(p, &c); err != nil {
				fmt.Fprintf(os.Stderr, "sandbox-helper channel: bad request: %v\n", err)
				return 1
			}
			if s.called != nil {
				close(s.called)
				s.called = nil
			}
			cur = s.start(c)
		case wire.ChanStdin:
			if cur != nil {
				cur.write(p)
			}
		case wire.ChanStdinEOF:
			if cur != nil {
				cur.closeStdin()
				<-cur.done // the call ends: Done sent, stdin ended
				cur = nil
				if s.once {
					return 0
				}
			}
		default:
			fmt.Fprintf(os.Stderr, "sandbox-helper channel: unknown frame %q\n", typ)
			return 1
		}
	}
}

// chanCall is the call in progress.
type chanCall struct {
	stdin io.WriteCloser // nil once closed or failed
	once  sync.Once
	done  chan struct{} // closed once Done was sent
}

func (c *chanCall) write(p []byte) {
	if c.stdin == nil {
		return
	}
	if _, err := c.stdin.Write(p); err != nil {
		c.closeStdin() // the run stopped reading: drop the rest, as an exec would
	}
}

func (c *chanCall) closeStdin() {
	c.once.Do(func() {
		if c.stdin != nil {
			_ = c.stdin.Close()
		}
	})
	c.stdin = nil
}

// start starts `run` for c; a call that cannot start reports so in Done
// (with no output: the plugin falls back to a plain exec).
func (s *chanServer) start(c wire.ChanCall) *chanCall {
	call := &chanCall{done: make(chan struct{})}
	fail := func(msg string) *chanCall {
		b, _ := json.Marshal(wire.ChanDoneInfo{ExitCode: -1, Error: msg})
		_ = s.send(wire.ChanDone, b)
		close(call.done)
		return call
	}
	if len(c.Args) == 0 || c.Args[0] != wire.VerbRun {
		return fail("the channel only runs `run`")
	}
	cmd := &exec.Cmd{
		Path: s.self,
		Args: append([]string{s.argv0}, c.Args...),
		Env:  mergeEnv(os.Environ(), c.Env),
		// Its own process group, as the engine's exec would not share
		// the server's.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fail(err.Error())
	}
	outR, err := cmd.StdoutPipe()
	if err != nil {
		return fail(err.Error())
	}
	errR, err := cmd.StderrPipe()
	if err != nil {
		return fail(err.Error())
	}
	if err := cmd.Start(); err != nil {
		return fail(err.Error())
	}
	call.stdin = stdin
	var pumps sync.WaitGroup
	pump := func(typ byte, r io.ReadCloser) {
		defer pumps.Done()
		b := make([]byte, 32<<10)
		for {
			n, err := r.Read(b)
			if n > 0 {
				if s.send(typ, b[:n]) != nil {
					// The channel is gone: the run sees its stdout
					// break and stops its program.
					_ = r.Close()
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	pumps.Add(2)
	go pump(wire.ChanOut, outR)
	go pump(wire.ChanErr, errR)
	go func() {
		pumps.Wait()
		info := wire.ChanDoneInfo{}
		if err := cmd.Wait(); err != nil {
			info.ExitCode = -1
			if ee, ok := err.(*exec.ExitError); ok {
				info.ExitCode = ee.ExitCode()
			}
		}
		b, _ := json.Marshal(info)
		_ = s.send(wire.ChanDone, b)
		close(call.done)
	}()
	return call
}

// mergeEnv is base with over's variables added, replacing those of the same
// name (the engine's rule for an exec's environment over the container's).
func mergeEnv(base, over []string) []string {
	out := append([]string(nil), base...)
	idx := map[string]int{}
	for i, kv := range out {
		k, _, _ := strings.Cut(kv, "=")
		idx[k] = i
	}
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}
