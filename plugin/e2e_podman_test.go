package plugin_test

// End-to-end tests against Podman (issue 12): the plugin reaching Debian's
// podman (4.3) through its Docker-compatible API, DOCKER_HOST=unix://...
// scripts/test.sh starts the service (scripts/podman-fixture.sh: a rootful
// `podman system service` with a private store and configuration, network
// none only, its own copy of the offline base and the plugin's images
// built through its API) and sets:
//
//	DOCKER_SANDBOX_TEST_PODMAN=unix://DIR/podman.sock
//	DOCKER_SANDBOX_TEST_PODMAN_LOG=FILE   the service's log
//
// Every call here sets DOCKER_HOST to that socket; the objects are counted
// on Podman's store, and checked absent from the Docker Engine's.

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/google/go-cmp/cmp"

	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// podmanFixture is the test's view of the Podman service of scripts/test.sh.
type podmanFixture struct {
	host string // unix://DIR/podman.sock
	log  string
	env  []string // DOCKER_HOST=host
	cli  *client.Client
}

// needPodman returns the fixture. Outside scripts/test.sh the test skips;
// under CI a missing fixture fails it.
func needPodman(t *testing.T) podmanFixture {
	t.Helper()
	env := needFixture(t, "podman test", "Podman service", "TestPodman", "DOCKER_SANDBOX_TEST_PODMAN", "DOCKER_SANDBOX_TEST_PODMAN_LOG")
	f := podmanFixture{host: env[0], log: env[1]}
	if !strings.HasPrefix(f.host, "unix://") {
		t.Fatalf("DOCKER_SANDBOX_TEST_PODMAN=%q: want unix://SOCKET", f.host)
	}
	cli, err := client.NewClientWithOpts(client.WithHost(f.host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	f.cli = cli
	v, err := cli.ServerVersion(context.Background())
	if err != nil || !sbexec.IsPodman(v) {
		t.Fatalf("the engine at %s is not Podman: %+v %v", f.host, v.Components, err)
	}
	f.env = []string{"DOCKER_HOST=" + f.host, "DOCKER_CONTEXT="}
	t.Cleanup(func() {
		logTail(t, "podman", f.log)
		_ = cli.Close()
	})
	return f
}

// scope returns a new scope name, removed from Podman's store (and
// checked absent from the Docker Engine's) when the test ends.
func (f podmanFixture) scope(t *testing.T) string {
	t.Helper()
	s := "t" + randID(5)
	t.Cleanup(func() {
		ctx := context.Background()
		flt := filters.NewArgs(filters.Arg("label", "com.docker.sandbox.scope="+s))
		cs, _ := f.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: flt})
		for _, c := range cs {
			_ = f.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		}
		vs, _ := f.cli.VolumeList(ctx, volume.ListOptions{Filters: flt})
		for _, v := range vs.Volumes {
			if err := f.cli.VolumeRemove(ctx, v.Name, true); err != nil {
				t.Logf("cleanup: volume %s: %v", v.Name, err)
			}
		}
		if c, v := objects(t, s); c != 0 || v != 0 {
			t.Errorf("the Docker Engine has %d containers and %d volumes of scope %s, made on Podman", c, v, s)
		}
	})
	return s
}

// objects counts the plugin's containers and volumes of a scope on Podman.
func (f podmanFixture) objects(t *testing.T, scope string) (containers, volumes int) {
	t.Helper()
	ctx := context.Background()
	flt := filters.NewArgs(filters.Arg("label", "com.docker.sandbox.managed=true"), filters.Arg("label", "com.docker.sandbox.scope="+scope))
	cs, err := f.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: flt})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := f.cli.VolumeList(ctx, volume.ListOptions{Filters: flt})
	if err != nil {
		t.Fatal(err)
	}
	// Podman 4.3 ORs a volume list's label filters: AND them here.
	for _, v := range vs.Volumes {
		if v.Labels["com.docker.sandbox.managed"] == "true" && v.Labels["com.docker.sandbox.scope"] == scope {
			volumes++
		}
	}
	return len(cs), volumes
}

// sb runs `docker sandbox ARGS` with DOCKER_HOST at Podman.
func (f podmanFixture) sb(t *testing.T, r run) result {
	t.Helper()
	r.env = append(append([]string{}, f.env...), r.env...)
	return sbRun(t, r)
}

func (f podmanFixture) sbArgs(t *testing.T, args ...string) result {
	t.Helper()
	return f.sb(t, run{args: args})
}

// TestPodmanCore: the plugin's core subset on Podman: version, exec (stdin,
// FILE with args, -c, JSON, exit codes, timeout, OOM), the sandbox's
// hardening as seen inside, a session, idle expiry, ls, stop, rm.
func TestPodmanCore(t *testing.T) {
	f := needPodman(t)
	s := f.scope(t)
	var created result // the exec that created the sandbox

	t.Run("version", func(t *testing.T) {
		r := f.sbArgs(t, "version", "--format", "json")
		wantCode(t, r, 0)
		var v struct {
			Host      string `json:"host"`
			Transport string `json:"transport"`
			Engine    struct {
				Version string `json:"version"`
			} `json:"engine"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &v); err != nil {
			t.Fatalf("%v\n%s", err, r)
		}
		if v.Host != f.host || v.Transport != "unix" || !strings.HasPrefix(v.Engine.Version, "4.") {
			t.Fatalf("want host %s, transport unix, Podman 4's version; got %s", f.host, r.Stdout)
		}
	})
	t.Run("exec stdin", func(t *testing.T) {
		r := f.sb(t, run{stdin: strings.NewReader("print(6*7)"), args: []string{"exec", "-s", s, "--lang", "python", "--format", "json"}})
		created = r
		wantCode(t, r, 0)
		if j := decodeExec(t, r); j.Stdout != "42\n" || !j.Created {
			t.Fatalf("%+v", j)
		}
		if c, v := f.objects(t, s); c != 1 || v != 1 {
			t.Fatalf("on Podman after the first exec: %d containers (want 1), %d volumes (want 1, labelled)", c, v)
		}
	})
	t.Run("FILE with args", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "p.py")
		if err := os.WriteFile(p, []byte("import sys; print(sys.argv[1:])"), 0o644); err != nil {
			t.Fatal(err)
		}
		wantStdout(t, f.sbArgs(t, "exec", "-s", s, p, "a b", "--flag", "ü"), "['a b', '--flag', 'ü']\n")
	})
	t.Run("-c", func(t *testing.T) {
		wantStdout(t, f.sbArgs(t, "exec", "-s", s, "--lang", "bash", "-c", `echo "$#:$1:${BASH_VERSION:+bash}"`, "--", "x y", "z"), "2:x y:bash\n")
	})
	t.Run("json", func(t *testing.T) {
		r := f.sbArgs(t, "exec", "-s", s, "--format", "json", "-c", "echo out; echo err >&2; exit 5")
		wantCode(t, r, 5)
		j := decodeExec(t, r)
		if j.Scope != s || j.ExitCode != 5 || j.Stdout != "out\n" || j.Stderr != "err\n" || j.Signal != nil || j.TimedOut || j.OOMKilled || j.Created || j.Runtime != "runc" {
			t.Fatalf("%+v", j)
		}
	})
	t.Run("exit 3", func(t *testing.T) {
		r := f.sbArgs(t, "exec", "-s", s, "-c", "echo three; exit 3")
		wantCode(t, r, 3)
		if r.Stdout != "three\n" {
			t.Fatalf("stdout %q", r.Stdout)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		r := f.sbArgs(t, "exec", "-s", s, "--format", "json", "--timeout", "2s", "-c", "sleep 30 & sleep 30")
		wantCode(t, r, 124)
		if j := decodeExec(t, r); j.ExitCode != 124 || !j.TimedOut || j.OOMKilled {
			t.Fatalf("%+v", j)
		}
		// Nothing of the run is left (the helper's sweep): only PID 1.
		wantStdout(t, f.sbArgs(t, "exec", "-s", s, "-c", "cat /proc/[0-9]*/comm 2>/dev/null | grep -c '^sleep$' || true"), "0\n")
	})
	t.Run("OOM", func(t *testing.T) {
		s2 := f.scope(t)
		r := f.sb(t, run{args: []string{"exec", "-s", s2, "--memory", "128m", "--timeout", "60s", "--lang", "python", "--format", "json", "-c", oomProgram}, timeout: 2 * time.Minute})
		wantCode(t, r, 137)
		j := decodeExec(t, r)
		if j.ExitCode != 137 || !j.OOMKilled || j.Signal == nil || *j.Signal != "SIGKILL" || j.TimedOut || strings.Contains(j.Stdout, "survived") {
			t.Fatalf("want exit_code 137, oom_killed, SIGKILL; got %+v (signal %v)", j, deref(j.Signal))
		}
	})
	t.Run("hardening inside", func(t *testing.T) {
		// What Podman applied, seen from inside: the plugin's user, no
		// capabilities, no-new-privileges, seccomp, a read-only root with
		// read-only /run and /var/tmp (Podman would mount writable ones),
		// the limits, no network, and namespaces of its own (IPC, network);
		// its cgroup namespace is its own, or (Podman on cgroup v1) the
		// host's, which the exec that created it said on stderr.
		host := func(ns string) string {
			l, err := os.Readlink("/proc/self/ns/" + ns)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		r := f.sbArgs(t, "exec", "-s", s, "-c", `id -u
grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\t' ' '
for p in /x /run/x /var/tmp/x /opt/sandbox/x; do touch $p 2>/dev/null && echo "wrote $p"; done
touch /tmp/x /opt/workspace/x /opt/user/x && echo "wrote tmp, workspace, user"
awk '/^Max (processes|open files)/ {print $1, $2, $(NF-2), $(NF-1)}' /proc/self/limits
cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max 2>/dev/null | head -n1
ls /sys/class/net | tr '\n' ' '; echo
readlink /proc/self/ns/cgroup /proc/self/ns/ipc /proc/self/ns/net`)
		wantCode(t, r, 0)
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		want := []string{"65532", "CapEff: 0000000000000000", "CapBnd: 0000000000000000", "NoNewPrivs: 1", "Seccomp: 2",
			"wrote tmp, workspace, user", "Max processes 32768 32768", "Max open 1024 1024", "256", "lo "}
		if len(lines) != len(want)+3 {
			t.Fatalf("want %d lines, got:\n%s", len(want)+3, r)
		}
		if d := cmp.Diff(want, lines[:len(want)]); d != "" {
			t.Errorf("inside (-want +got):\n%s", d)
		}
		for i, ns := range []string{"ipc", "net"} {
			if got := lines[len(want)+1+i]; got == host(ns) {
				t.Errorf("the sandbox shares the host's %s namespace (%s)", ns, got)
			}
		}
		shared := lines[len(want)] == host("cgroup")
		said := strings.Contains(created.Stderr, "warning: Podman gave sandbox "+s+" the host's cgroup namespace")
		if shared != said {
			t.Errorf("the sandbox shares the host's cgroup namespace: %v; the creating exec said so: %v\n%s", shared, said, created.Stderr)
		}
		t.Logf("cgroup namespace: the host's: %v", shared)
	})
	t.Run("session", func(t *testing.T) {
		// A session's workspace volume: created with its labels, filled
		// (owned by the sandbox user, writable), its own; rm of the
		// session leaves the scope's.
		s4 := f.scope(t)
		wantStdout(t, f.sbArgs(t, "exec", "-s", s4, "-c", "echo kept > /opt/user/k"), "")
		wantStdout(t, f.sbArgs(t, "exec", "-s", s4, "--session", "w1", "-c", "echo w > /opt/workspace/f && cat /opt/workspace/f /opt/user/k && stat -c %u /opt/workspace"), "w\nkept\n65532\n")
		rows := lcListJSON(t, f.sbArgs(t, "ls", "--format", "json", "--filter", "scope="+s4))
		if len(rows) != 2 {
			t.Fatalf("ls: %+v", rows)
		}
		wantStdout(t, f.sbArgs(t, "rm", s4+"/w1"), s4+"/w1\n")
		if c, v := f.objects(t, s4); c != 1 || v != 1 {
			t.Fatalf("after rm of the session: %d containers, %d volumes (want the scope's 1 and 1)", c, v)
		}
		wantStdout(t, f.sbArgs(t, "exec", "-s", s4, "-c", "cat /opt/user/k"), "kept\n")
	})
	t.Run("idle expiry", func(t *testing.T) {
		// PID 1 exits after the idle TTL and Podman removes the container
		// (AutoRemove); the data stays.
		s3 := f.scope(t)
		r := f.sbArgs(t, "exec", "-s", s3, "--idle-ttl", "2s", "-c", "echo x")
		wantStdout(t, r, "x\n")
		poll(t, 30*time.Second, func() error {
			if c, v := f.objects(t, s3); c != 0 || v != 1 {
				return fmt.Errorf("%d containers (want 0), %d volumes (want 1)", c, v)
			}
			return nil
		})
		if rows := lcListJSON(t, f.sbArgs(t, "ls", "-a", "--format", "json", "--filter", "scope="+s3)); len(rows) != 1 || rows[0].State != "expired-with-data" {
			t.Fatalf("ls -a after the idle TTL: %+v", rows)
		}
	})
	t.Run("ls stop rm", func(t *testing.T) {
		rows := lcListJSON(t, f.sbArgs(t, "ls", "--format", "json", "--filter", "scope="+s))
		if len(rows) != 1 || rows[0].Scope != s || rows[0].Session != "" || rows[0].State != "idle" {
			t.Fatalf("ls: %+v", rows)
		}
		wantStdout(t, f.sbArgs(t, "stop", s), s+"\n")
		if c, v := f.objects(t, s); c != 0 || v == 0 {
			t.Fatalf("after stop: %d containers (want 0), %d volumes (want the data kept)", c, v)
		}
		rows = lcListJSON(t, f.sbArgs(t, "ls", "-a", "--format", "json", "--filter", "scope="+s))
		if len(rows) != 1 || rows[0].State != "expired-with-data" {
			t.Fatalf("ls -a after stop: %+v", rows)
		}
		wantStdout(t, f.sbArgs(t, "rm", s), s+"\n")
		if c, v := f.objects(t, s); c != 0 || v != 0 {
			t.Fatalf("after rm: %d containers, %d volumes left", c, v)
		}
		if rows := lcListJSON(t, f.sbArgs(t, "ls", "-a", "--format", "json", "--filter", "scope="+s)); len(rows) != 0 {
			t.Fatalf("ls -a after rm: %+v", rows)
		}
	})
}

// TestPodmanRefusals: what Podman cannot give is refused with exit 125
// (engine_unsupported), naming it, before anything is made: a network
// other than none, and proxy mode (the egress sidecar is never started on
// Podman).
func TestPodmanRefusals(t *testing.T) {
	f := needPodman(t)
	s := f.scope(t)
	for _, c := range []struct{ name, network, says string }{
		{"bridge", "bridge", `network "bridge" on Podman`},
		{"proxy", "proxy", `network "proxy" on Podman`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := f.sbArgs(t, "exec", "-s", s, "--network", c.network, "--format", "json", "-c", "echo ran")
			wantCode(t, r, 125)
			if j := decodeErr(t, r); j.Error.Code != "engine_unsupported" || !strings.Contains(j.Error.Message, c.says) || !strings.Contains(j.Error.Message, "network none") {
				t.Fatalf("want engine_unsupported naming %s:\n%s", c.says, r)
			}
			if strings.Contains(r.Stdout, "ran") {
				t.Fatalf("the code ran:\n%s", r)
			}
			if cs, vs := f.objects(t, s); cs != 0 || vs != 0 {
				t.Fatalf("left on Podman: %d containers, %d volumes", cs, vs)
			}
			// No egress sidecar, no egress volume, no network on Podman.
			ctx := context.Background()
			flt := filters.NewArgs(filters.Arg("label", "com.docker.sandbox.managed=true"))
			cs, err := f.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: flt})
			if err != nil {
				t.Fatal(err)
			}
			vs, err := f.cli.VolumeList(ctx, volume.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				if strings.Contains(strings.Join(c.Names, ","), "egress") {
					t.Errorf("an egress container on Podman: %v", c.Names)
				}
			}
			for _, v := range vs.Volumes {
				if strings.Contains(v.Name, "egress") {
					t.Errorf("an egress volume on Podman: %s", v.Name)
				}
			}
		})
	}
}

// TestPodmanCp: cp both ways on Podman (a file and a folder), and the
// hostile cases: a tar escaping its destination, a link in the sandbox
// leading out; refused, nothing written outside.
func TestPodmanCp(t *testing.T) {
	f := needPodman(t)
	s := f.scope(t)
	host := t.TempDir()
	src := filepath.Join(host, "src")
	cpWriteHost(t, filepath.Join(src, "a.txt"), "A", 0o644)
	cpWriteHost(t, filepath.Join(src, "sub", "b.txt"), "B", 0o600)
	cpWriteHost(t, filepath.Join(host, "f.txt"), "F", 0o640)

	t.Run("in and out", func(t *testing.T) {
		j := cpDecode(t, f.sbArgs(t, "cp", "--format", "json", src, s+":src"))
		if j.Files != 2 || j.Dirs != 2 || j.Bytes != 2 {
			t.Errorf("cp in of the folder: %+v", j)
		}
		wantCode(t, f.sbArgs(t, "cp", filepath.Join(host, "f.txt"), s+":src/"), 0)
		wantStdout(t, f.sbArgs(t, "exec", "-s", s, "-c", "cd src && cat a.txt sub/b.txt f.txt && echo && "+shModes+" a.txt sub/b.txt f.txt"), "ABF\n644\n600\n640\n")
		out := filepath.Join(host, "out")
		wantCode(t, f.sbArgs(t, "cp", s+":src", out), 0)
		if d := cmp.Diff([]string{"a.txt=A 0644", "f.txt=F 0640", "sub/ 0755", "sub/b.txt=B 0600"}, cpHostTree(t, out)); d != "" {
			t.Errorf("the folder copied back (-want +got):\n%s", d)
		}
		wantCode(t, f.sbArgs(t, "cp", s+":src/sub/b.txt", filepath.Join(host, "b-back.txt")), 0)
		if b, err := os.ReadFile(filepath.Join(host, "b-back.txt")); err != nil || string(b) != "B" {
			t.Errorf("the file copied back: %q %v", b, err)
		}
	})
	t.Run("hostile tar in", func(t *testing.T) {
		wantCode(t, f.sbArgs(t, "exec", "-s", s, "-c", "mkdir -p box/dir"), 0)
		data := cpTar(t,
			&tar.Header{Name: "ok.txt", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "ok"},
			&tar.Header{Name: "../../evil", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "E"},
			&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/tmp"},
			&tar.Header{Name: "l/evil", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "E"})
		cpWantErr(t, f.sb(t, run{args: []string{"cp", "--format", "json", "-", s + ":box/dir"}, stdin: bytes.NewReader(data)}), "path_escape")
		r := f.sbArgs(t, "exec", "-s", s, "-c", "find /opt/workspace/box /tmp -mindepth 1 -not -path '/tmp/.sandbox-code-*' -not -path '/tmp/.sandbox-helper.*' | sort; ls /opt/workspace/evil /opt/evil 2>&1 | wc -l")
		wantStdout(t, r, "/opt/workspace/box/dir\n2\n")
	})
	t.Run("hostile link out", func(t *testing.T) {
		canary := newCpCanary(t)
		here := t.TempDir()
		cpWriteHost(t, filepath.Join(here, "p.txt"), "P", 0o644)
		dst := filepath.Join(here, "dst")
		wantCode(t, f.sbArgs(t, "exec", "-s", s, "-c", "ln -s /etc out && ln -s "+canary.dir+" tohost"), 0)
		cpWantErr(t, f.sbArgs(t, "cp", "--format", "json", s+":out/passwd", dst), "path_escape")
		cpWantErr(t, f.sbArgs(t, "cp", "--format", "json", s+":out", dst), "path_escape")
		cpWantErr(t, f.sbArgs(t, "cp", "--format", "json", filepath.Join(here, "p.txt"), s+":tohost/"), "path_escape")
		cpMissing(t, dst)
		canary.intact(t)
		if d := cmp.Diff([]string{"p.txt=P 0644"}, cpHostTree(t, here)); d != "" {
			t.Errorf("the host folder changed (-want +got):\n%s", d)
		}
	})
}
