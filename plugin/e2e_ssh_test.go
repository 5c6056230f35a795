package plugin_test

// End-to-end tests of ssh:// endpoints (issue 12): the plugin reaching the
// engine through a real OpenSSH server, as it reaches a remote engine.
// scripts/test.sh starts the server (scripts/ssh-fixture.sh: Debian's sshd
// on a loopback port, key authentication only, a throwaway host key, client
// key and user in the engine socket's group) and sets:
//
//	DOCKER_SANDBOX_TEST_SSH=ssh://USER@127.0.0.1:PORT
//	DOCKER_SANDBOX_TEST_SSH_PATH=DIR    holds the `ssh` the CLI runs (ssh -F the fixture's client config)
//	DOCKER_SANDBOX_TEST_SSH_LOG=FILE    sshd's log
//
// Every call here goes docker CLI -> plugin -> ssh -> sshd -> `docker
// system dial-stdio` -> the engine; each subtest checks in sshd's log that
// its calls did log in over ssh, so a call that quietly used the local
// socket fails.

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const sshContextName = "sbx-ssh-test"

// sshFixture is the test's view of the ssh server of scripts/test.sh.
type sshFixture struct {
	uri  string   // ssh://USER@127.0.0.1:PORT
	user string   // USER
	log  string   // sshd's log
	env  []string // a private DOCKER_CONFIG holding the context; the fixture's ssh first on PATH
}

// needSSH returns the fixture, with the context sbx-ssh-test made in a
// private DOCKER_CONFIG (removed when the test ends). Outside
// scripts/test.sh the test skips; under CI a missing fixture fails it.
func needSSH(t *testing.T) sshFixture {
	t.Helper()
	v := needFixture(t, "ssh test", "ssh server", "TestSSH", "DOCKER_SANDBOX_TEST_SSH", "DOCKER_SANDBOX_TEST_SSH_PATH", "DOCKER_SANDBOX_TEST_SSH_LOG")
	f := sshFixture{uri: v[0], log: v[2]}
	m := regexp.MustCompile(`^ssh://([^@/]+)@127\.0\.0\.1:[0-9]+(/.*)?$`).FindStringSubmatch(f.uri)
	if m == nil {
		t.Fatalf("DOCKER_SANDBOX_TEST_SSH=%q: want ssh://USER@127.0.0.1:PORT (a loopback server)", f.uri)
	}
	f.user = m[1]
	// The fixture's ssh first on PATH; the log's end when the test failed
	// (registered before the context's removal, so it runs after it).
	t.Cleanup(func() { logTail(t, "sshd", f.log) })
	f.env = makeContext(t, sshContextName, f.uri, []string{"PATH=" + v[1] + string(os.PathListSeparator) + os.Getenv("PATH")}).env
	return f
}

// logins counts the key logins of the fixture's user in sshd's log.
func (f sshFixture) logins(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(f.log)
	if err != nil {
		t.Fatalf("sshd's log: %v", err)
	}
	return strings.Count(string(b), "Accepted publickey for "+f.user+" from 127.0.0.1")
}

// viaSSH runs fn and fails unless its calls logged in over ssh.
func (f sshFixture) viaSSH(t *testing.T, fn func()) {
	t.Helper()
	before := f.logins(t)
	fn()
	if after := f.logins(t); after <= before {
		t.Fatalf("no ssh login during the calls (%d before, %d after): they did not go through %s", before, after, f.uri)
	}
}

// sb runs `docker --context sbx-ssh-test sandbox ARGS`.
func (f sshFixture) sb(t *testing.T, r run) result {
	t.Helper()
	r.env = append(append([]string{}, f.env...), r.env...)
	if r.global == nil {
		r.global = []string{"--context", sshContextName}
	}
	return sbRun(t, r)
}

func (f sshFixture) sbArgs(t *testing.T, args ...string) result {
	t.Helper()
	return f.sb(t, run{args: args})
}

// TestSSHContext: a context with host=ssh://... runs the plugin's core
// subset: version, exec (stdin, FILE with args, -c, JSON, exit codes,
// timeout, OOM), ls, stop, rm.
func TestSSHContext(t *testing.T) {
	f := needSSH(t)
	// Each call's own way over ssh: a warm call through the exec channel
	// makes no ssh login at all (TestSSHChannel).
	f.env = append(f.env, "DOCKER_SANDBOX_EXEC_CHANNEL=false")
	s := newScope(t)

	t.Run("version", func(t *testing.T) {
		f.viaSSH(t, func() {
			r := f.sbArgs(t, "version", "--format", "json")
			wantCode(t, r, 0)
			var v struct {
				Context   string          `json:"context"`
				Host      string          `json:"host"`
				Transport string          `json:"transport"`
				Engine    json.RawMessage `json:"engine"`
			}
			if err := json.Unmarshal([]byte(r.Stdout), &v); err != nil {
				t.Fatalf("%v\n%s", err, r)
			}
			if v.Context != sshContextName || v.Host != f.uri || v.Transport != "ssh" || len(v.Engine) == 0 || string(v.Engine) == "null" {
				t.Fatalf("want context %s, host %s, transport ssh and the engine; got %s", sshContextName, f.uri, r.Stdout)
			}
		})
	})
	t.Run("exec stdin", func(t *testing.T) {
		f.viaSSH(t, func() {
			wantStdout(t, f.sb(t, run{stdin: strings.NewReader("print(6*7)"), args: []string{"exec", "-s", s, "--lang", "python"}}), "42\n")
		})
	})
	t.Run("FILE with args", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "p.py")
		if err := os.WriteFile(p, []byte("import sys; print(sys.argv[1:])"), 0o644); err != nil {
			t.Fatal(err)
		}
		f.viaSSH(t, func() {
			wantStdout(t, f.sbArgs(t, "exec", "-s", s, p, "a b", "--flag", "ü"), "['a b', '--flag', 'ü']\n")
		})
	})
	t.Run("-c", func(t *testing.T) {
		f.viaSSH(t, func() {
			wantStdout(t, f.sbArgs(t, "exec", "-s", s, "--lang", "bash", "-c", `echo "$#:$1:${BASH_VERSION:+bash}"`, "--", "x y", "z"), "2:x y:bash\n")
		})
	})
	t.Run("json", func(t *testing.T) {
		f.viaSSH(t, func() {
			r := f.sbArgs(t, "exec", "-s", s, "--format", "json", "-c", "echo out; echo err >&2; exit 5")
			wantCode(t, r, 5)
			j := decodeExec(t, r)
			if j.Scope != s || j.ExitCode != 5 || j.Stdout != "out\n" || j.Stderr != "err\n" || j.Signal != nil || j.TimedOut || j.OOMKilled || j.Created {
				t.Fatalf("%+v", j)
			}
		})
	})
	t.Run("exit 3", func(t *testing.T) {
		r := f.sbArgs(t, "exec", "-s", s, "-c", "echo three; exit 3")
		wantCode(t, r, 3)
		if r.Stdout != "three\n" {
			t.Fatalf("stdout %q", r.Stdout)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		r := f.sbArgs(t, "exec", "-s", s, "--format", "json", "--timeout", "2s", "-c", "sleep 30")
		wantCode(t, r, 124)
		if j := decodeExec(t, r); j.ExitCode != 124 || !j.TimedOut || j.OOMKilled {
			t.Fatalf("%+v", j)
		}
	})
	t.Run("OOM", func(t *testing.T) {
		s2 := newScope(t)
		r := f.sb(t, run{args: []string{"exec", "-s", s2, "--memory", "128m", "--timeout", "60s", "--lang", "python", "--format", "json", "-c", oomProgram}, timeout: 2 * time.Minute})
		wantCode(t, r, 137)
		j := decodeExec(t, r)
		if j.ExitCode != 137 || !j.OOMKilled || j.Signal == nil || *j.Signal != "SIGKILL" || j.TimedOut || strings.Contains(j.Stdout, "survived") {
			t.Fatalf("want exit_code 137, oom_killed, SIGKILL; got %+v (signal %v)", j, deref(j.Signal))
		}
	})
	t.Run("ls stop rm", func(t *testing.T) {
		f.viaSSH(t, func() {
			rows := lcListJSON(t, f.sbArgs(t, "ls", "--format", "json", "--filter", "scope="+s))
			if len(rows) != 1 || rows[0].Scope != s || rows[0].Session != "" || rows[0].State != "idle" {
				t.Fatalf("ls: %+v", rows)
			}
			wantStdout(t, f.sbArgs(t, "stop", s), s+"\n")
			if c, v := objects(t, s); c != 0 || v == 0 {
				t.Fatalf("after stop: %d containers (want 0), %d volumes (want the data kept)", c, v)
			}
			rows = lcListJSON(t, f.sbArgs(t, "ls", "-a", "--format", "json", "--filter", "scope="+s))
			if len(rows) != 1 || rows[0].State != "expired-with-data" {
				t.Fatalf("ls -a after stop: %+v", rows)
			}
			wantStdout(t, f.sbArgs(t, "rm", s), s+"\n")
			if c, v := objects(t, s); c != 0 || v != 0 {
				t.Fatalf("after rm: %d containers, %d volumes left", c, v)
			}
			if rows := lcListJSON(t, f.sbArgs(t, "ls", "-a", "--format", "json", "--filter", "scope="+s)); len(rows) != 0 {
				t.Fatalf("ls -a after rm: %+v", rows)
			}
		})
	})
}

// TestSSHCp: cp both ways through the ssh context (a file and a folder),
// and the hostile cases: a tar escaping its destination, a link in the
// sandbox leading out; refused, nothing written outside.
func TestSSHCp(t *testing.T) {
	f := needSSH(t)
	s := newScope(t)
	host := t.TempDir()
	src := filepath.Join(host, "src")
	cpWriteHost(t, filepath.Join(src, "a.txt"), "A", 0o644)
	cpWriteHost(t, filepath.Join(src, "sub", "b.txt"), "B", 0o600)
	cpWriteHost(t, filepath.Join(host, "f.txt"), "F", 0o640)

	t.Run("in and out", func(t *testing.T) {
		f.viaSSH(t, func() {
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
	})
	t.Run("hostile tar in", func(t *testing.T) {
		wantCode(t, f.sbArgs(t, "exec", "-s", s, "-c", "mkdir -p box/dir"), 0)
		data := cpTar(t,
			&tar.Header{Name: "ok.txt", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "ok"},
			&tar.Header{Name: "../../evil", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "E"},
			&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/tmp"},
			&tar.Header{Name: "l/evil", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "E"})
		f.viaSSH(t, func() {
			cpWantErr(t, f.sb(t, run{args: []string{"cp", "--format", "json", "-", s + ":box/dir"}, stdin: bytes.NewReader(data)}), "path_escape")
		})
		r := f.sbArgs(t, "exec", "-s", s, "-c", "find /opt/workspace/box /tmp -mindepth 1 -not -path '/tmp/.sandbox-code-*' -not -path '/tmp/.sandbox-helper.*' | sort; ls /opt/workspace/evil /opt/evil 2>&1 | wc -l")
		wantStdout(t, r, "/opt/workspace/box/dir\n2\n")
	})
	t.Run("hostile link out", func(t *testing.T) {
		canary := newCpCanary(t)
		here := t.TempDir()
		cpWriteHost(t, filepath.Join(here, "p.txt"), "P", 0o644)
		dst := filepath.Join(here, "dst")
		wantCode(t, f.sbArgs(t, "exec", "-s", s, "-c", "ln -s /etc out && ln -s "+canary.dir+" tohost"), 0)
		f.viaSSH(t, func() {
			cpWantErr(t, f.sbArgs(t, "cp", "--format", "json", s+":out/passwd", dst), "path_escape")
			cpWantErr(t, f.sbArgs(t, "cp", "--format", "json", s+":out", dst), "path_escape")
			// Into the sandbox through its link naming the host's folder:
			// the link is the sandbox's, and leads outside its roots.
			cpWantErr(t, f.sbArgs(t, "cp", "--format", "json", filepath.Join(here, "p.txt"), s+":tohost/"), "path_escape")
		})
		cpMissing(t, dst)
		canary.intact(t)
		if d := cmp.Diff([]string{"p.txt=P 0644"}, cpHostTree(t, here)); d != "" {
			t.Errorf("the host folder changed (-want +got):\n%s", d)
		}
	})
}

// TestSSHHostAndEnv: `docker -H ssh://...` and DOCKER_HOST=ssh://... reach
// the plugin as the context does.
func TestSSHHostAndEnv(t *testing.T) {
	f := needSSH(t)
	s := newScope(t)
	for _, c := range []struct {
		name   string
		global []string
		env    []string
	}{
		{"-H", []string{"-H", f.uri}, nil},
		{"DOCKER_HOST", []string{}, []string{"DOCKER_HOST=" + f.uri}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f.viaSSH(t, func() {
				r := f.sb(t, run{global: c.global, env: c.env, args: []string{"version", "--format", "{{.context}} {{.host}} {{.transport}}"}})
				wantStdout(t, r, fmt.Sprintf("default %s ssh\n", f.uri))
				wantStdout(t, f.sb(t, run{global: c.global, env: c.env, stdin: strings.NewReader("print(6*7)"), args: []string{"exec", "-s", s, "--lang", "python"}}), "42\n")
			})
		})
	}
}

// TestSSHEgress: a proxy-mode exec through the ssh context. The sandbox
// joins its scope's network on the engine behind ssh and reaches the
// allowed upstream through the sidecar; a host the policy does not grant is
// the proxy's 403; `egress status` and `egress logs` answer over ssh too.
func TestSSHEgress(t *testing.T) {
	f := needSSH(t)
	eg := egSetup(t)
	scope := newScope(t)
	script := fmt.Sprintf(`curl -sS http://%s/hello
curl -s -o /dev/null -w 'denied http %%{http_code}\n' http://denied.test/hello
`, egUpName)
	f.viaSSH(t, func() {
		r := f.sbArgs(t, append(append([]string{"exec"}, egPolicyArgs(eg, scope)...), "--lang", "sh", "-c", script)...)
		wantStdout(t, r, "hello from upstream, host "+egUpName+"\ndenied http 403\n")
	})
	f.viaSSH(t, func() {
		r := f.sbArgs(t, "egress", "status", "--format", "json")
		wantCode(t, r, 0)
		var st struct {
			Running         bool   `json:"running"`
			OutboundNetwork string `json:"outbound_network"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil || !st.Running || st.OutboundNetwork != eg.outNet {
			t.Fatalf("egress status over ssh: %+v %v\n%s", st, err, r)
		}
	})
	f.viaSSH(t, func() {
		r := f.sbArgs(t, "egress", "logs", "-s", scope, "--format", "json")
		wantCode(t, r, 0)
		if !strings.Contains(r.Stdout, egUpName) || !strings.Contains(r.Stdout, "denied.test") {
			t.Fatalf("egress logs over ssh lack the two requests:\n%s", r)
		}
	})
	egCheckUpstream(t, eg)
}

// TestSSHShell: `shell` through the ssh context: an interactive shell on a
// pseudo-terminal of the given size, in the sandbox on the engine behind
// ssh, whose exit code is the shell's.
func TestSSHShell(t *testing.T) {
	f := needSSH(t)
	scope := newScope(t)
	wantCode(t, f.sbArgs(t, "exec", "-s", scope, "-c", "echo made > /opt/workspace/ssh-shell"), 0)
	f.viaSSH(t, func() {
		out, code := ptyShell(t, f.env, "--context "+sshContextName, 33, 101, scope, [][2]string{
			{"$ ", "stty size; cat /opt/workspace/ssh-shell; exit 5\n"},
		})
		if code != 5 || !strings.Contains(out, "33 101") || !strings.Contains(out, "made") {
			t.Fatalf("shell over ssh: exit %d\n%s", code, out)
		}
	})
}

// TestSSHChannel: over an ssh:// context a warm exec goes through the
// sandbox's exec channel, whose process reaches the engine through an ssh
// process of its own (the docker CLI's connection helper: `ssh ... docker
// system dial-stdio`); results are those of a plain exec. Its ssh killed,
// the call that follows falls back to a plain exec and the channel process
// exits by itself; after its idle time, its ssh death and rm, no process of
// the channel's (it or its ssh) is left, nor the remote end of its session.
func TestSSHChannel(t *testing.T) {
	f := needSSH(t)
	c := remoteCtx{host: f.uri, name: sshContextName, env: f.env, global: []string{"--context", sshContextName}}
	port := f.uri[strings.LastIndexByte(f.uri, ':')+1:]
	f.viaSSH(t, func() {
		testRemoteChannel(t, c, func() int { return f.logins(t) }, func(t *testing.T, ps []proc) {
			t.Helper()
			if !strings.Contains(ps[0].args, " --host "+f.uri+" ") {
				t.Fatalf("the channel process does not use %s: %s", f.uri, ps[0].args)
			}
			for _, p := range ps[1:] {
				if p.comm == "ssh" && strings.Contains(p.args, port) && strings.Contains(p.args, "dial-stdio") {
					return
				}
			}
			t.Fatalf("the channel process has no ssh to %s (its processes: %+v)", f.uri, ps)
		}, func(t *testing.T, ps []proc) {
			killProcs(t, ps, "ssh")
		})
	})
	// The remote ends of the channels' sessions went with them.
	u, err := user.Lookup(f.user)
	if err != nil {
		t.Fatal(err)
	}
	poll(t, 20*time.Second, func() error {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
			if err != nil || !regexp.MustCompile(`(?m)^Uid:\s+`+u.Uid+`\s`).Match(st) {
				continue
			}
			if _, _, _, state, ok := procStat(atoi(e.Name())); ok && state != "Z" {
				cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
				return fmt.Errorf("a process of the ssh user runs: %d %q", atoi(e.Name()), cmdline)
			}
		}
		return nil
	})
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
