// Package channel is the client side of a sandbox's persistent exec
// channel: a small process per sandbox (the plugin's own binary, started
// detached by a call that found none) that keeps ONE engine exec of
// `sandbox-helper channel` open in the sandbox and passes calls to it, so
// that a warm `docker sandbox exec` does not pay the engine's per-exec setup.
// Calls reach it on a private unix socket: a directory of mode 0700 owned
// by the user, one socket per engine endpoint and container name, and every
// connection's peer must be the same user (SO_PEERCRED). The process exits
// on its own after Idle without a call, when its exec ends (the sandbox was
// stopped, removed or replaced, or sandboxed code killed the server), or
// when the engine goes away. Any failure before a call's run started makes
// the plugin fall back to a plain exec (exec.Manager.Run).
package channel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Verb is the hidden first argument that makes the plugin's binary a
// channel process (cmd/docker-sandbox dispatches it before anything else).
const Verb = "__sandbox-exec-channel"

// Idle is how long a channel process waits for a call before it exits.
const Idle = 10 * time.Second

// Dir returns the user's channel directory, creating it: mode 0700, owned by
// the user, not a symlink. base "" means $XDG_RUNTIME_DIR when it is the
// user's, else the system's temporary directory.
func Dir(base string) (string, error) {
	uid := os.Getuid()
	if base == "" {
		base = os.TempDir()
		if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" && filepath.IsAbs(x) {
			if fi, err := os.Stat(x); err == nil && fi.IsDir() && owner(fi) == uid {
				base = x
			}
		}
	}
	dir := filepath.Join(base, fmt.Sprintf("docker-sandbox-channels-%d", uid))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() || owner(fi) != uid || fi.Mode().Perm() != 0o700 {
		return "", fmt.Errorf("%s is not a directory of mode 0700 owned by uid %d: not used", dir, uid)
	}
	return dir, nil
}

func owner(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// SocketPath is the socket of the channel of container (a name) on the
// engine at endpoint, in dir.
func SocketPath(dir, endpoint, container string) string {
	sum := sha256.Sum256([]byte(endpoint + "\x00" + container))
	return filepath.Join(dir, hex.EncodeToString(sum[:12])+".sock")
}

// Client finds (and starts) channel processes for one engine endpoint.
type Client struct {
	Endpoint string // the engine's host, e.g. unix:///var/run/docker.sock
	Dir      string // Dir()
	Exe      string // the plugin's binary
	// NoStart: never start a channel process (tests).
	NoStart bool
}

// Dial connects to the channel of container, or returns nil: then, unless
// NoStart, it starts a channel process for the calls that follow.
func (c *Client) Dial(ctx context.Context, container string) net.Conn {
	path := SocketPath(c.Dir, c.Endpoint, container)
	conn, err := dial(ctx, path)
	if err == nil {
		return conn
	}
	if !c.NoStart && c.Exe != "" {
		c.start(container, path)
	}
	return nil
}

// dial connects to path and checks that the listener is this user.
func dial(ctx context.Context, path string) (net.Conn, error) {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	uc := conn.(*net.UnixConn)
	uid, err := peerUID(uc)
	if err != nil || uid != os.Getuid() {
		conn.Close()
		return nil, fmt.Errorf("the channel socket %s is not this user's (uid %d): %v", path, uid, err)
	}
	return conn, nil
}

// peerUID is the uid of the process at the other end of c.
func peerUID(c *net.UnixConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if cerr != nil {
		return -1, cerr
	}
	return int(cred.Uid), nil
}

// start starts a channel process, detached (its own session, no standard
// streams), and does not wait for it.
func (c *Client) start(container, path string) {
	cmd := exec.Command(c.Exe, Verb, "--host", c.Endpoint, "--container", container, "--socket", path)
	for _, kv := range os.Environ() {
		// Not a plugin call: the binary must not take the docker CLI's
		// plugin protocol.
		if !strings.HasPrefix(kv, "DOCKER_CLI_PLUGIN_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return
	}
	// Reap it, should this process outlive it.
	go func() { _ = cmd.Wait() }()
}

// Has reports whether a channel process of this user serves container (it
// holds the lock of its socket).
func (c *Client) Has(container string) bool {
	return locked(SocketPath(c.Dir, c.Endpoint, container) + ".lock")
}

// Busy reports whether a call runs through the channel of container (its
// process holds the lock of sock.busy).
func (c *Client) Busy(container string) bool {
	return locked(SocketPath(c.Dir, c.Endpoint, container) + ".busy")
}

// locked reports whether another process holds an exclusive lock of path.
func locked(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
