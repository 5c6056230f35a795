package channel

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/client"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// Dir makes a 0700 directory of the user's, and refuses one that is not.
func TestDir(t *testing.T) {
	base := t.TempDir()
	dir, err := Dir(base)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir %s: %v %v", dir, fi.Mode(), err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Dir(base); err == nil || !strings.Contains(err.Error(), "0700") {
		t.Fatalf("a 0755 directory was accepted: %v", err)
	}
	// A symlink in its place is refused.
	base2 := t.TempDir()
	target := t.TempDir()
	if err := os.Chmod(target, 0o700); err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(dir)
	if err := os.Symlink(target, filepath.Join(base2, name)); err != nil {
		t.Fatal(err)
	}
	if _, err := Dir(base2); err == nil {
		t.Fatal("a symlink was accepted as the channel directory")
	}
}

// One socket per endpoint and container, short enough for sun_path.
func TestSocketPath(t *testing.T) {
	a := SocketPath("/run/user/1000/x", "unix:///var/run/docker.sock", "docker-sandbox-a")
	b := SocketPath("/run/user/1000/x", "tcp://127.0.0.1:2375", "docker-sandbox-a")
	c := SocketPath("/run/user/1000/x", "unix:///var/run/docker.sock", "docker-sandbox-b")
	if a == b || a == c || b == c {
		t.Fatalf("sockets collide: %s %s %s", a, b, c)
	}
	if a != SocketPath("/run/user/1000/x", "unix:///var/run/docker.sock", "docker-sandbox-a") {
		t.Fatal("not stable")
	}
	if len(filepath.Base(a)) > 40 {
		t.Fatalf("long name %s", a)
	}
}

// Dial without a channel returns nil (a plain exec) and, with NoStart,
// starts nothing; a stale socket (nobody listening) is no channel either.
func TestDialNone(t *testing.T) {
	dir, err := Dir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{Endpoint: "unix:///x", Dir: dir, NoStart: true}
	if conn := c.Dial(context.Background(), "docker-sandbox-x"); conn != nil {
		t.Fatal("a connection without a channel")
	}
	sock := SocketPath(dir, c.Endpoint, "docker-sandbox-x")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // stale: the file stays, nobody listens
	if conn := c.Dial(context.Background(), "docker-sandbox-x"); conn != nil {
		t.Fatal("a connection to a stale socket")
	}
	if c.Has("docker-sandbox-x") || c.Busy("docker-sandbox-x") {
		t.Fatal("Has or Busy without a channel process")
	}
}

// The lock: one holder; Has sees it; a second taker gets nil.
func TestLockFile(t *testing.T) {
	dir, err := Dir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{Endpoint: "unix:///x", Dir: dir}
	sock := SocketPath(dir, c.Endpoint, "docker-sandbox-y")
	f, err := lockFile(sock + ".lock")
	if err != nil || f == nil {
		t.Fatalf("first lock: %v", err)
	}
	defer f.Close()
	if g, err := lockFile(sock + ".lock"); g != nil || err != nil {
		t.Fatalf("second lock taken: %v", err)
	}
	if !c.Has("docker-sandbox-y") {
		t.Fatal("Has does not see the held lock")
	}
}

// statusScan sees the run's Status frame start, however reads split the
// stream, and not a Status byte inside another frame's payload.
func TestStatusScan(t *testing.T) {
	var b strings.Builder
	fw := wire.NewFrameWriter(&b)
	_ = fw.WriteFrame(wire.Started, nil)
	_ = fw.WriteFrame(wire.Stdout, []byte{wire.Status, 0, 0, 0, 0, 0, 0, 0, 'x'})
	before := b.Len()
	_ = fw.WriteFrame(wire.Status, []byte(`{"exit_code":0}`))
	stream := []byte(b.String())
	for split := 1; split <= len(stream); split++ {
		var s statusScan
		for i := 0; i < len(stream); i += split {
			s.feed(stream[i:min(i+split, len(stream))])
			if s.seen && i+split <= before {
				t.Fatalf("split %d: Status seen inside the output frame", split)
			}
		}
		if !s.seen {
			t.Fatalf("split %d: Status not seen", split)
		}
	}
}

// The channel process reaches the engine as the docker CLI does: an ssh://
// host through the CLI's connection helper (a dummy HTTP host, the
// dialer running ssh), any other host as it is.
func TestClientOpts(t *testing.T) {
	for _, c := range []struct{ host, want string }{
		{"unix:///var/run/docker.sock", "unix:///var/run/docker.sock"},
		{"tcp://127.0.0.1:2375", "tcp://127.0.0.1:2375"},
		{"ssh://me@127.0.0.1:2222", "http://docker.example.com"},
		{"ssh://me@host/run/user/1000/docker.sock", "http://docker.example.com"},
	} {
		opts, err := clientOpts(c.host)
		if err != nil {
			t.Fatalf("%s: %v", c.host, err)
		}
		cl, err := client.NewClientWithOpts(opts...)
		if err != nil {
			t.Fatalf("%s: %v", c.host, err)
		}
		if got := cl.DaemonHost(); got != c.want {
			t.Errorf("%s: the client's host is %s, want %s", c.host, got, c.want)
		}
	}
	for _, bad := range []string{"ssh://", "ssh://me:password@host", "ssh://host?x=y"} {
		if _, err := clientOpts(bad); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}
