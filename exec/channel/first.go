package channel

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/docker/docker/api/types"
)

// First is the channel of the call that creates a sandbox: the server
// inside is the one PID 1 starts on the container's own stdin and stdout
// (`sandbox-helper init --serve-stdin`), reached through the attach the
// call made before it started the container, as `docker run` attaches
// before it starts. The call's run then needs no engine exec. It speaks to
// its caller as a channel process does (Call gives a connection that
// Client.Dial would give), and serves that call only: Close ends the
// attach, the engine closes the container's stdin (StdinOnce), and the
// server inside exits.
type First struct {
	s *server
}

// firstHello bounds the wait for the server's hello: it is sent as soon
// as PID 1 has started (the container's start returned before).
const firstHello = 10 * time.Second

// OpenFirst waits for the hello of the server on hj, the container's
// attach; on failure it closes hj (the call then makes a plain exec).
func OpenFirst(ctx context.Context, hj types.HijackedResponse) (*First, error) {
	cctx, cancel := context.WithTimeout(ctx, firstHello)
	defer cancel()
	fr, err := greet(cctx, hj)
	if err != nil {
		return nil, err
	}
	s := &server{hj: hj, frames: make(chan frame), dead: make(chan struct{})}
	go s.read(fr)
	return &First{s: s}, nil
}

// errFirstUsed: the first call's channel serves one call.
var errFirstUsed = errors.New("the first call's channel has served its call")

// Call returns the caller's end of the call: the request line, then the
// run's stdin; the run's output comes back multiplexed as an exec's.
func (f *First) Call() (net.Conn, error) {
	if !f.s.take() {
		return nil, errFirstUsed
	}
	caller, server, err := unixPair()
	if err != nil {
		f.s.release()
		return nil, err
	}
	go f.s.call(server, func() {}) // served once: never released
	return caller, nil
}

// Close ends the attach (and so the server inside).
func (f *First) Close() { f.s.die() }

// unixPair is a connected pair of unix stream sockets.
func unixPair() (*net.UnixConn, *net.UnixConn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	conn := func(fd int) (*net.UnixConn, error) {
		f := os.NewFile(uintptr(fd), "channel")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			return nil, err
		}
		return c.(*net.UnixConn), nil
	}
	a, err := conn(fds[0])
	if err != nil {
		syscall.Close(fds[1])
		return nil, nil, err
	}
	b, err := conn(fds[1])
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	return a, b, nil
}
