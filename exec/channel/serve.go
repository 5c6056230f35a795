package channel

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/docker/cli/cli/connhelper"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// Engine is what a channel process asks the engine.
type Engine interface {
	ContainerExecCreate(ctx context.Context, container string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecAttach(ctx context.Context, execID string, config container.ExecAttachOptions) (types.HijackedResponse, error)
}

// Main is the channel process: `docker-sandbox __sandbox-exec-channel
// --host H --container NAME --socket PATH`. It returns the exit code.
func Main(args []string) int {
	// Small and quiet: a few MiB of heap at most.
	debug.SetGCPercent(20)
	debug.SetMemoryLimit(8 << 20)
	fs := flag.NewFlagSet(Verb, flag.ContinueOnError)
	host := fs.String("host", "", "")
	ctr := fs.String("container", "", "")
	sock := fs.String("socket", "", "")
	if err := fs.Parse(args); err != nil || *host == "" || *ctr == "" || *sock == "" {
		return 2
	}
	opts, err := clientOpts(*host)
	if err != nil {
		return 1
	}
	cl, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return 1
	}
	defer cl.Close()
	// Only a container on a native runtime gets a channel: under another
	// one (gVisor) a run's stream needs the exec's own exit code, which a
	// call through the channel does not have (exec.Manager.Run). The
	// engine's default runtime may be one, so the container says.
	c, err := cl.ContainerInspect(context.Background(), *ctr)
	if err != nil || c.HostConfig == nil || !core.NativeRuntime(c.HostConfig.Runtime) {
		return 1
	}
	if err := Serve(context.Background(), cl, *ctr, *sock, Idle); err != nil {
		if os.Getenv("DOCKER_SANDBOX_DEBUG") != "" {
			fmt.Fprintln(os.Stderr, "exec channel:", err)
		}
		return 1
	}
	return 0
}

// clientOpts are the engine client's options for host, built as the docker
// CLI builds them (cli/context/docker.Endpoint.ClientOpts), so that the
// channel reaches the engine the calling CLI reaches: an ssh:// host goes
// through the CLI's connection helper (`ssh -T ... docker system
// dial-stdio`, with the CLI's ssh flags: it passes none of its own; the ssh
// configuration, agent and PATH come with the environment the calling
// plugin gave this process), any other host is dialled as it is. TLS tcp://
// hosts never get here (plugin/settings.go starts no channel for them).
//
// Each connection over ssh is an ssh process of this one's (commandconn),
// in its own session, killed with SIGKILL when this process dies
// (PR_SET_PDEATHSIG): none outlives the channel.
func clientOpts(host string) ([]client.Opt, error) {
	opts := []client.Opt{client.WithAPIVersionNegotiation()}
	helper, err := connhelper.GetConnectionHelper(host)
	if err != nil {
		return nil, err
	}
	if helper == nil {
		return append(opts, client.WithHost(host)), nil
	}
	return append(opts,
		// No TLS and no proxy, as the CLI's own client.
		client.WithHTTPClient(&http.Client{Transport: &http.Transport{DialContext: helper.Dialer}}),
		client.WithHost(helper.Host),
		client.WithDialContext(helper.Dialer),
	), nil
}

// Serve opens the channel of ctr and serves calls on sock until it has
// been idle for idle, or its exec ended. Another process serving sock
// already makes it return nil at once.
func Serve(ctx context.Context, e Engine, ctr, sock string, idle time.Duration) error {
	lock, err := lockFile(sock + ".lock")
	if err != nil || lock == nil {
		return err // nil: another channel process serves it
	}
	defer lock.Close()
	defer os.Remove(sock + ".lock") // while locked: see lockFile

	hj, frames, err := open(ctx, e, ctr)
	if err != nil {
		return err
	}
	defer hj.Close()
	// The channel needs only its attached exec: drop the client's idle
	// connections (over ssh, the ssh process of the version check and the
	// exec's creation).
	if c, ok := e.(io.Closer); ok {
		_ = c.Close()
	}

	_ = os.Remove(sock) // stale: its process is gone (we hold the lock)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return err
	}
	ln.SetUnlinkOnClose(false)
	defer ln.Close()
	defer os.Remove(sock)
	_ = os.Chmod(sock, 0o600)

	// While a call runs the process holds the lock of sock.busy: ls tells
	// a sandbox running a call through its channel (Client.Busy).
	busy, err := os.OpenFile(sock+".busy", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer busy.Close()
	defer os.Remove(sock + ".busy")

	s := &server{hj: hj, frames: make(chan frame), dead: make(chan struct{})}
	go s.read(frames)
	conns := make(chan *net.UnixConn)
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	timer := time.NewTimer(idle)
	defer timer.Stop()
	calls := make(chan struct{}, 1)
	for {
		select {
		case <-timer.C:
			if !s.busy.Load() {
				return nil
			}
			timer.Reset(idle)
		case <-s.dead:
			return errors.New("the channel's exec ended")
		case c := <-conns:
			uid, err := peerUID(c)
			if err != nil || uid != os.Getuid() {
				c.Close() // another user: never served
				continue
			}
			go func() {
				if !s.take() {
					c.Close() // a call is running: a plain exec
					return
				}
				_ = syscall.Flock(int(busy.Fd()), syscall.LOCK_EX)
				// Free before the caller sees its stream end: a
				// caller's next call finds the channel free.
				s.call(c, func() {
					_ = syscall.Flock(int(busy.Fd()), syscall.LOCK_UN)
					s.release()
				})
				calls <- struct{}{}
			}()
		case <-calls:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(idle)
		}
	}
}

// open starts the exec of `sandbox-helper channel` and waits for its hello.
func open(ctx context.Context, e Engine, ctr string) (types.HijackedResponse, *chanReader, error) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, err := e.ContainerExecCreate(cctx, ctr, container.ExecOptions{
		User: core.SandboxUser, AttachStdin: true, AttachStdout: true, AttachStderr: true,
		WorkingDir: core.WorkspaceDir, Cmd: []string{core.HelperPath, wire.VerbChannel},
	})
	if err != nil {
		return types.HijackedResponse{}, nil, err
	}
	hj, err := e.ContainerExecAttach(cctx, resp.ID, container.ExecAttachOptions{})
	if err != nil {
		return types.HijackedResponse{}, nil, err
	}
	fr, err := greet(cctx, hj)
	if err != nil {
		return types.HijackedResponse{}, nil, err
	}
	return hj, fr, nil
}

// greet reads the server's frames out of hj's multiplexed stream (its
// stderr dropped) and waits for its hello; on failure it closes hj.
func greet(ctx context.Context, hj types.HijackedResponse) (*chanReader, error) {
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, io.Discard, hj.Reader)
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
	}()
	fr := &chanReader{r: bufio.NewReaderSize(pr, 64<<10)}
	hello := make(chan error, 1)
	go func() {
		typ, _, err := fr.next()
		if err == nil && typ != wire.ChanHello {
			err = fmt.Errorf("the channel's exec did not start the channel server (frame %q)", typ)
		}
		hello <- err
	}()
	var err error
	select {
	case err = <-hello:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		hj.Close()
		return nil, err
	}
	return fr, nil
}

type chanReader struct {
	r   io.Reader
	buf []byte
}

func (c *chanReader) next() (byte, []byte, error) { return wire.ReadChanFrame(c.r, &c.buf) }

// frame is one frame from the server inside.
type frame struct {
	typ byte
	p   []byte
}

// server is one open channel.
type server struct {
	hj     types.HijackedResponse
	frames chan frame // from the server inside, read by read
	wmu    sync.Mutex
	busy   atomic.Bool
	dead   chan struct{}
	once   sync.Once

	mu sync.Mutex
	// finishing: the call's run sent its Status (its caller has its
	// result and may call again at once); freed is closed when the call
	// ends.
	finishing bool
	freed     chan struct{}
}

// finishWait bounds how long a call waits for the call before it that has
// its result but has not ended yet (the run exiting, its Done on the way).
const finishWait = 2 * time.Second

// take makes the channel this call's, or reports that another call is
// running (not one that is only finishing: that one it waits for).
func (s *server) take() bool {
	deadline := time.NewTimer(finishWait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if !s.busy.Load() {
			s.busy.Store(true)
			s.finishing = false
			s.freed = make(chan struct{})
			s.mu.Unlock()
			return true
		}
		finishing, freed := s.finishing, s.freed
		s.mu.Unlock()
		if !finishing {
			return false
		}
		select {
		case <-freed:
		case <-deadline.C:
			return false
		case <-s.dead:
			return false
		}
	}
}

func (s *server) release() {
	s.mu.Lock()
	s.busy.Store(false)
	if s.freed != nil {
		close(s.freed)
		s.freed = nil
	}
	s.mu.Unlock()
}

func (s *server) setFinishing() {
	s.mu.Lock()
	s.finishing = true
	s.mu.Unlock()
}

// statusScan follows the run's frames (wire.FrameWriter's format) to see
// its Status frame start.
type statusScan struct {
	hdr  [8]byte
	n    int
	skip uint32
	seen bool
}

func (f *statusScan) feed(p []byte) {
	for len(p) > 0 && !f.seen {
		if f.skip > 0 {
			k := min(uint32(len(p)), f.skip)
			f.skip -= k
			p = p[k:]
			continue
		}
		k := copy(f.hdr[f.n:], p)
		f.n += k
		p = p[k:]
		if f.n == len(f.hdr) {
			f.seen = f.hdr[0] == wire.Status
			f.skip = binary.BigEndian.Uint32(f.hdr[4:])
			f.n = 0
		}
	}
}

func (s *server) send(typ byte, p []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return wire.WriteChanFrame(s.hj.Conn, typ, p)
}

// read passes the inside server's frames on to the call; its stream's end
// (the sandbox went away, or its code killed the server) ends the channel.
func (s *server) read(fr *chanReader) {
	for {
		typ, p, err := fr.next()
		if err != nil {
			s.die()
			return
		}
		select {
		case s.frames <- frame{typ, append([]byte(nil), p...)}:
		case <-s.dead:
			return
		}
	}
}

func (s *server) die() { s.once.Do(func() { close(s.dead); s.hj.Close() }) }

// call passes one call: the request line, then the caller's stream as the
// run's stdin; the run's output goes back multiplexed as an exec's would
// (stdcopy), and the connection closes at the run's end.
func (s *server) call(c *net.UnixConn, release func()) {
	var once sync.Once
	defer func() {
		once.Do(release)
		c.Close()
	}()
	br := bufio.NewReaderSize(c, 32<<10)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := br.ReadSlice('\n')
	if err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if s.send(wire.ChanRequest, line[:len(line)-1]) != nil {
		s.die()
		return
	}
	// The caller's stream is the run's stdin; its end (the caller's
	// CloseWrite, or the connection closed at the run's end) is the end
	// of the call's stdin, sent once.
	stdinDone := make(chan struct{})
	go func() {
		defer close(stdinDone)
		b := make([]byte, 32<<10)
		for {
			n, err := br.Read(b)
			if n > 0 && s.send(wire.ChanStdin, b[:n]) != nil {
				s.die()
				return
			}
			if err != nil {
				if s.send(wire.ChanStdinEOF, nil) != nil {
					s.die()
				}
				return
			}
		}
	}()
	var scan statusScan
	stdout := stdcopy.NewStdWriter(c, stdcopy.Stdout)
	stderr := stdcopy.NewStdWriter(c, stdcopy.Stderr)
	callerGone := false
	for {
		var f frame
		select {
		case f = <-s.frames:
		case <-s.dead:
			return // the server inside is gone: so is this channel
		}
		typ, p := f.typ, f.p
		var w io.Writer
		switch typ {
		case wire.ChanOut:
			w = stdout
			if !scan.seen {
				if scan.feed(p); scan.seen {
					s.setFinishing()
				}
			}
		case wire.ChanErr:
			w = stderr
		case wire.ChanDone:
			// The run ended: end its stdin (the rest of the caller's
			// stream is not read), free the channel, then end the
			// caller's stream.
			_ = c.CloseRead()
			<-stdinDone
			once.Do(release)
			return
		default:
			s.die()
			return
		}
		if !callerGone {
			if _, err := w.Write(p); err != nil {
				callerGone = true // read on to the run's end
			}
		}
	}
}

// lockFile takes the exclusive lock of path for this process's life, or
// returns nil when another process holds it. Its holder removes it before
// it exits (while it holds it), so a lock taken on a file that is no
// longer at path is taken again.
func lockFile(path string) (*os.File, error) {
	for i := 0; i < 10; i++ {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			return nil, nil
		}
		var a, b syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &a) == nil && syscall.Stat(path, &b) == nil && a.Ino == b.Ino && a.Dev == b.Dev {
			return f, nil
		}
		f.Close()
	}
	return nil, errors.New("cannot take the channel's lock")
}
