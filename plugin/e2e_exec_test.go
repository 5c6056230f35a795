package plugin_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestExecCodeSources(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name     string
		r        run
		wantOut  string
		wantLang string
	}{
		{"stdin with --lang", run{stdin: strings.NewReader("print(6*7)"), args: []string{"--lang", "python"}}, "42\n", "python"},
		{"-c with --lang", run{args: []string{"--lang", "node", "-c", "console.log(6*7)"}}, "42\n", "node"},
		{"FILE .py", run{args: []string{write("a.py", "print('py')")}}, "py\n", "python"},
		{"FILE .js", run{args: []string{write("a.js", "console.log('js')")}}, "js\n", "node"},
		{"FILE .mjs", run{args: []string{write("a.mjs", "import os from 'node:os'; console.log(typeof os.cpus)")}}, "function\n", "node"},
		{"FILE .bash", run{args: []string{write("a.bash", "echo ${BASH_VERSION:+bash}")}}, "bash\n", "bash"},
		{"FILE .sh", run{args: []string{write("a.sh", "echo sh")}}, "sh\n", "sh"},
		{"shebang env python3", run{args: []string{write("noext", "#!/usr/bin/env python3\nprint('she')")}}, "she\n", "python"},
		{"shebang /bin/bash -e", run{stdin: strings.NewReader("#!/bin/bash -e\necho ${BASH_VERSION:+bash}")}, "bash\n", "bash"},
		{"config default_lang", run{env: []string{"DOCKER_SANDBOX_DEFAULT_LANG=python"}, stdin: strings.NewReader("print('cfg')")}, "cfg\n", "python"},
		{"default sh", run{stdin: strings.NewReader("echo ${BASH_VERSION:-plain-sh}")}, "plain-sh\n", "sh"},
		{"--lang beats extension", run{args: []string{"--lang", "sh", write("b.py", "echo not-python")}}, "not-python\n", "sh"},
		{"FILE -", run{stdin: strings.NewReader("echo dash"), args: []string{"-"}}, "dash\n", "sh"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.r
			// Flags come before FILE: flags after it belong to the program.
			var flags, rest []string
			for i := 0; i < len(r.args); i++ {
				a := r.args[i]
				if a == "--lang" || a == "-c" {
					flags = append(flags, a, r.args[i+1])
					i++
					continue
				}
				rest = append(rest, a)
			}
			r.args = append(append([]string{"exec", "-s", scope, "--format", "json"}, flags...), rest...)
			res := sbRun(t, r)
			wantCode(t, res, 0)
			j := decodeExec(t, res)
			if j.Stdout != c.wantOut || j.Lang != c.wantLang {
				t.Fatalf("stdout %q lang %q, want %q %q\n%s", j.Stdout, j.Lang, c.wantOut, c.wantLang, res)
			}
		})
	}
}

func TestExecArgs(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	args := []string{"a b", "--flag", "", "ü"}
	cases := []struct{ lang, code string }{
		{"python", "import json,sys; print(json.dumps(sys.argv[1:]))"},
		{"node", "console.log(JSON.stringify(process.argv.slice(2)))"},
		{"bash", `printf '['; sep=; for a in "$@"; do printf '%s"%s"' "$sep" "$a"; sep=', '; done; echo ']'`},
	}
	want, _ := json.Marshal(args)
	for _, c := range cases {
		t.Run(c.lang, func(t *testing.T) {
			r := sb(t, append([]string{"exec", "-s", scope, "--lang", c.lang, "-c", c.code, "--"}, args...)...)
			wantCode(t, r, 0)
			var got []string
			if err := json.Unmarshal([]byte(r.Stdout), &got); err != nil {
				t.Fatalf("%v: %s", err, r)
			}
			if diff := cmp.Diff(args, got); diff != "" {
				t.Fatalf("args (-want +got), want %s:\n%s", want, diff)
			}
		})
	}
	// FILE ARGS without --: flags after FILE belong to the program.
	f := filepath.Join(t.TempDir(), "p.py")
	_ = os.WriteFile(f, []byte("import sys; print(sys.argv[1:])"), 0o644)
	r := sb(t, "exec", "-s", scope, f, "--verbose", "-x")
	wantCode(t, r, 0)
	if strings.TrimSpace(r.Stdout) != "['--verbose', '-x']" {
		t.Fatalf("FILE args: %s", r)
	}
	// The README's forms: FILE -- ARGS and - -- ARGS drop the first "--";
	// a second one is the program's (TestSplitExecArgs has every form).
	r = sb(t, "exec", "-s", scope, f, "--", "--verbose", "input.txt", "--", "x")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != "['--verbose', 'input.txt', '--', 'x']" {
		t.Fatalf("FILE -- ARGS: %s", r)
	}
	r = sbIn(t, "import sys; print(sys.argv[1:])", "exec", "-s", scope, "--lang", "python", "-", "--", "a", "-b")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != "['a', '-b']" {
		t.Fatalf("- -- ARGS: %s", r)
	}
}

func TestExecStdinBinarySafe(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	data := make([]byte, 10<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	// The program's stdin is the plugin's stdin when code comes from -c.
	r := sbRun(t, run{stdin: strings.NewReader(string(data)), args: []string{"exec", "-s", scope, "-c", "sha256sum"}})
	wantCode(t, r, 0)
	if got := strings.Fields(r.Stdout); len(got) == 0 || got[0] != want {
		t.Fatalf("sha256 inside = %q, want %s", r.Stdout, want)
	}
	// And back out through cat, byte for byte.
	r = sbRun(t, run{stdin: strings.NewReader(string(data)), args: []string{"exec", "-s", scope, "--max-output", "16m", "-c", "cat"}})
	wantCode(t, r, 0)
	got := sha256.Sum256([]byte(r.Stdout))
	if hex.EncodeToString(got[:]) != want || len(r.Stdout) != len(data) {
		t.Fatalf("cat returned %d bytes with another sha256", len(r.Stdout))
	}
	// From FILE too.
	f := filepath.Join(t.TempDir(), "c.sh")
	_ = os.WriteFile(f, []byte("wc -c"), 0o644)
	r = sbRun(t, run{stdin: strings.NewReader(string(data[:12345])), args: []string{"exec", "-s", scope, f}})
	if strings.TrimSpace(r.Stdout) != "12345" {
		t.Fatalf("FILE program's stdin: %s", r)
	}
	// Code from stdin: the program's own stdin is empty.
	r = sbIn(t, "cat; echo end", "exec", "-s", scope)
	if r.Stdout != "end\n" {
		t.Fatalf("stdin code: program stdin should be empty: %s", r)
	}
}

func TestExecEnvWorkdir(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	envFile := filepath.Join(t.TempDir(), "env")
	_ = os.WriteFile(envFile, []byte("# comment\nFROM_FILE=file value\nBOTH=file\n"), 0o644)
	r := sbRun(t, run{env: []string{"HOST_ONLY=from host"}, args: []string{"exec", "-s", scope,
		"-e", "A=1", "-e", "HOST_ONLY", "--env-file", envFile, "-e", "BOTH=flag",
		"-c", `echo "$A|$HOST_ONLY|$FROM_FILE|$BOTH|$HOME"`}})
	wantCode(t, r, 0)
	if got := strings.TrimSpace(r.Stdout); got != "1|from host|file value|flag|/opt/user" {
		t.Fatalf("env: %q", got)
	}
	r = sb(t, "exec", "-s", scope, "--workdir", "sub/dir", "-c", "pwd")
	if strings.TrimSpace(r.Stdout) != "/opt/workspace/sub/dir" {
		t.Fatalf("--workdir: %s", r)
	}
	r = sb(t, "exec", "-s", scope, "-c", "pwd")
	if strings.TrimSpace(r.Stdout) != "/opt/workspace" {
		t.Fatalf("default workdir: %s", r)
	}
	r = sb(t, "exec", "-s", scope, "--workdir", "/opt/user/x", "-c", "pwd")
	if strings.TrimSpace(r.Stdout) != "/opt/user/x" {
		t.Fatalf("--workdir in /opt/user: %s", r)
	}
	for _, bad := range []string{"../../etc", "/etc", "/opt/workspace/../../tmp"} {
		r = sb(t, "exec", "-s", scope, "--format", "json", "--workdir", bad, "-c", "pwd")
		wantCode(t, r, 125)
		if e := decodeErr(t, r); e.Error.Code != "bad_flag" {
			t.Fatalf("--workdir %s: %+v", bad, e)
		}
	}
}

// The first line of a slow program reaches the user before it ends.
func TestExecStreamsLive(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	wantCode(t, sb(t, "exec", "-s", scope, "-c", "true"), 0) // warm
	cmd := osexec.Command("docker", "sandbox", "exec", "-s", scope, "-c", "echo first; echo err-first >&2; sleep 4; echo second")
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	errLine := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stderr).ReadString('\n')
		errLine <- l
	}()
	br := bufio.NewReader(stdout)
	line, err := br.ReadString('\n')
	firstAt := time.Since(start)
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q: %v", line, err)
	}
	if l := <-errLine; l != "err-first\n" {
		t.Fatalf("stderr first line %q", l)
	}
	rest, _ := br.ReadString('\n')
	endAt := time.Since(start)
	_ = cmd.Wait()
	if rest != "second\n" {
		t.Fatalf("second line %q", rest)
	}
	// The program sleeps 4 s between the lines: the first must have come
	// well before the end, not with it.
	if endAt-firstAt < 3*time.Second {
		t.Fatalf("first line at %s, end at %s: output was buffered", firstAt, endAt)
	}
}

func TestExecJSONSchema(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	r := sb(t, "exec", "-s", scope, "--session", "s1", "--format", "json", "-c", "echo out; echo err >&2; exit 5")
	wantCode(t, r, 5)
	var raw map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &raw); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"container", "created", "duration_ms", "exit_code", "image", "lang", "oom_killed", "runtime", "sandbox_restarted", "scope", "session",
		"signal", "stderr", "stderr_truncated", "stdout", "stdout_truncated", "timed_out"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Fatalf("JSON keys (-want +got):\n%s", diff)
	}
	j := decodeExec(t, r)
	if j.Scope != scope || j.Session != "s1" || len(j.Container) != 12 || j.Lang != "sh" || j.ExitCode != 5 ||
		j.Stdout != "out\n" || j.Stderr != "err\n" || j.Signal != nil || !j.Created || !strings.HasPrefix(j.Image, "docker-sandbox-runtime:") ||
		j.Runtime != wantRuntime(t) || j.SandboxRestarted {
		t.Fatalf("unexpected: %+v", j)
	}
	j2 := decodeExec(t, sb(t, "exec", "-s", scope, "--session", "s1", "--format", "json", "-c", "true"))
	if j2.Created || j2.Container != j.Container {
		t.Fatalf("second call should reuse the container: %+v", j2)
	}
	// A Go template works too.
	r = sb(t, "exec", "-s", scope, "--session", "s1", "--format", "{{.exit_code}}:{{.stdout}}", "-c", "printf x")
	if r.Stdout != "0:x\n" {
		t.Fatalf("template: %q", r.Stdout)
	}
}

func TestExecExitCodes(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	cases := []struct {
		code     string
		exit     int
		signal   string
		timedOut bool
		args     []string
	}{
		{"exit 0", 0, "", false, nil},
		{"exit 3", 3, "", false, nil},
		{"kill -TERM $$", 143, "SIGTERM", false, nil},
		{"kill -KILL $$", 137, "SIGKILL", false, nil},
		{"nonexistent-command-xyz", 127, "", false, nil},
		{"sleep 30", 124, "", true, []string{"--timeout", "1s"}},
	}
	for _, c := range cases {
		t.Run(c.code, func(t *testing.T) {
			args := append([]string{"exec", "-s", scope, "--format", "json"}, c.args...)
			r := sb(t, append(args, "-c", c.code)...)
			wantCode(t, r, c.exit)
			j := decodeExec(t, r)
			sig := ""
			if j.Signal != nil {
				sig = *j.Signal
			}
			if j.ExitCode != c.exit || sig != c.signal || j.TimedOut != c.timedOut || j.OOMKilled {
				t.Fatalf("%+v", j)
			}
		})
	}
}

// At --timeout the whole process group dies, children that ignore SIGTERM
// and children that left the group included, and the plugin exits 124 within
// timeout + 2 s.
func TestExecTimeoutKillsEverything(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	wantCode(t, sb(t, "exec", "-s", scope, "-c", "true"), 0) // warm: time only the run
	code := `trap '' TERM
(trap '' TERM; exec sleep 1001) &
setsid sh -c 'trap "" TERM; exec sleep 1002' &
sleep 1003`
	r := sb(t, "exec", "-s", scope, "--lang", "bash", "--timeout", "2s", "-c", code)
	wantCode(t, r, 124)
	// The property is timeout + 2 s; 3 s more for the CLI's own start and
	// the exec's setup on two loaded cores (-race -p 2).
	if r.Elapsed > (2+2+3)*time.Second {
		t.Fatalf("exit 124 after %s, want within timeout + 2 s (+3 s for a loaded machine)", r.Elapsed)
	}
	if !strings.Contains(r.Stderr, "timeout") {
		t.Errorf("stderr should say it was killed at the timeout: %q", r.Stderr)
	}
	// Nothing of it is left in the sandbox.
	poll(t, 5*time.Second, func() error {
		r := sb(t, "exec", "-s", scope, "-c", `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < $f 2>/dev/null; echo; done`)
		if strings.Contains(r.Stdout, "sleep 100") {
			return fmt.Errorf("left over: %s", r.Stdout)
		}
		return nil
	})
}

// PID 1 reaps orphans that were re-parented to it.
func TestExecPID1ReapsZombies(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	name := "docker-sandbox-" + scope
	wantCode(t, sb(t, "exec", "-s", scope, "-c", "true"), 0)
	// Kill the exec wrapper (the program's parent): the program and its
	// children become PID 1's, which kills them (they belong to no live
	// run) and must reap them: none may stay a zombie.
	r := sb(t, "exec", "-s", scope, "--format", "json", "--lang", "sh", "-c", "sleep 30 & sleep 31 & (sleep 32 &); kill -9 $PPID; sleep 33")
	wantCode(t, r, 125)
	if j := decodeErr(t, r); j.Error.Code != "wrapper_lost" {
		t.Fatalf("exec whose wrapper was killed: %s", r)
	}
	waitOnlyInit(t, name, 10*time.Second)
}

// A sandbox with a short idle TTL goes away by itself, with no client
// process running, and its data stays for the next call.
func TestExecIdleExpiry(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	r := sb(t, "exec", "-s", scope, "--idle-ttl", "2s", "-c", "echo kept > /opt/workspace/f")
	wantCode(t, r, 0)
	name := "docker-sandbox-" + scope
	poll(t, 30*time.Second, func() error {
		if _, err := engine(t).ContainerInspect(context.Background(), name); err == nil {
			return fmt.Errorf("container %s still exists", name)
		}
		return nil
	})
	r = sb(t, "exec", "-s", scope, "--idle-ttl", "2s", "--format", "json", "-c", "cat /opt/workspace/f")
	j := decodeExec(t, r)
	if !j.Created || j.Stdout != "kept\n" {
		t.Fatalf("after expiry: %+v", j)
	}
}

// --tmp-size and --nofile set the sandbox's /tmp tmpfs and its open-files
// limit, as seen from inside; like the other container settings they are
// fixed when the container is created: a later call asking for another
// value is refused (sandbox_mismatch, naming the settings it asked for) and
// leaves the sandbox as it was.
func TestExecTmpSizeNofile(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	probe := "import os, resource\nst = os.statvfs('/tmp')\nprint(st.f_blocks * st.f_frsize, *resource.getrlimit(resource.RLIMIT_NOFILE))\n"
	want := fmt.Sprintf("%d 256 256\n", 8<<20)
	wantStdout(t, sbIn(t, probe, "exec", "-s", s, "--tmp-size", "8m", "--nofile", "256", "--lang", "python"), want)
	c := inspectSandbox(t, s, "")
	if ul := c.HostConfig.Ulimits; len(ul) != 1 || ul[0].Name != "nofile" || ul[0].Soft != 256 || ul[0].Hard != 256 {
		t.Errorf("ulimits %+v", ul)
	}

	for _, tt := range []struct {
		args []string
		word string
	}{
		{[]string{"--tmp-size", "16m", "--nofile", "256"}, "tmp-size 16MiB"},
		{[]string{"--tmp-size", "8m", "--nofile", "512"}, "nofile 512"},
		{[]string{"--nofile", "256"}, "tmp-size 512MiB"}, // the default is another value
	} {
		args := append([]string{"exec", "-s", s, "--format", "json"}, tt.args...)
		r := sb(t, append(args, "-c", "true")...)
		wantCode(t, r, 125)
		if e := decodeErr(t, r); e.Error.Code != "sandbox_mismatch" || !strings.Contains(e.Error.Message, tt.word) {
			t.Errorf("%v: %+v", tt.args, e)
		}
	}
	// The sandbox is the one made first, and joined with its settings.
	wantStdout(t, sbIn(t, probe, "exec", "-s", s, "--tmp-size", "8m", "--nofile", "256", "--lang", "python"), want)
	if c2 := inspectSandbox(t, s, ""); c2.ID != c.ID {
		t.Errorf("container %.12s replaced by %.12s", c.ID, c2.ID)
	}
}
