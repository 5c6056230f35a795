package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/egress/policy"
	"github.com/docker-sandbox/docker-sandbox/egress/proxy"
)

func policyCmd(t *testing.T, file, stdin string, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := proxyPolicy(append([]string{"--policy", file}, args...), strings.NewReader(stdin), &out, &errb)
	if code != 0 {
		return errb.String(), code
	}
	return out.String(), 0
}

func TestProxyPolicyCommands(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.json")
	out, code := policyCmd(t, file, "", "ensure", "s1")
	if code != 0 {
		t.Fatalf("ensure: %s", out)
	}
	var e1 scopeOut
	if err := json.Unmarshal([]byte(out), &e1); err != nil || e1.Name != "s1" || len(e1.Token) != 32 {
		t.Fatalf("ensure printed %q (%v)", out, err)
	}
	// ensure keeps the token and the rules; set changes the rules only.
	out, _ = policyCmd(t, file, `{"allow":["PyPI.org.","*.example.com"],"allow_ports":[443],"allow_cidrs":["10.1.2.3/16"],"deny":["*.Internal.Example"]}`, "set", "s1")
	var e2 scopeOut
	_ = json.Unmarshal([]byte(out), &e2)
	if e2.Token != e1.Token {
		t.Fatal("set changed the token")
	}
	want := policy.Rules{Allow: []string{"*.example.com", "pypi.org"}, AllowPorts: []int{443}, AllowCIDRs: []string{"10.1.0.0/16"}, Deny: []string{"*.internal.example"}}
	if d := cmp.Diff(want, e2.Rules); d != "" {
		t.Fatalf("set: %s", d)
	}
	out, _ = policyCmd(t, file, "", "ensure", "s1")
	var e3 scopeOut
	_ = json.Unmarshal([]byte(out), &e3)
	if e3.Token != e1.Token || cmp.Diff(want, e3.Rules) != "" {
		t.Fatalf("ensure after set: %+v", e3)
	}
	// get never prints tokens.
	out, _ = policyCmd(t, file, "", "get")
	if strings.Contains(out, e1.Token) || !strings.Contains(out, "pypi.org") {
		t.Fatalf("get: %s", out)
	}
	policyCmd(t, file, "", "ensure", "s2")
	out, _ = policyCmd(t, file, "", "--scope", "s2", "get")
	if strings.Contains(out, "s1") {
		t.Fatalf("get --scope s2: %s", out)
	}
	// Bad input changes nothing.
	for _, c := range []struct{ stdin, verb, scope string }{
		{`{"allow":["**"]}`, "set", "s1"},
		{`{"allow_ports":[70000]}`, "set", "s1"},
		{`{"bogus":1}`, "set", "s1"},
		{``, "set", "s1"},
		{``, "ensure", "bad/name"},
		{``, "frob", "s1"},
	} {
		if msg, code := policyCmd(t, file, c.stdin, c.verb, c.scope); code == 0 {
			t.Errorf("%s %s %q accepted: %s", c.verb, c.scope, c.stdin, msg)
		}
	}
	f, _ := policy.Load(file)
	if cmp.Diff(want, f.Scopes["s1"].Rules) != "" {
		t.Fatalf("bad input changed the policy: %+v", f.Scopes["s1"])
	}
	if _, code := policyCmd(t, file, "", "rm", "s1"); code != 0 {
		t.Fatal("rm failed")
	}
	f, _ = policy.Load(file)
	if _, ok := f.Scopes["s1"]; ok || len(f.Scopes) != 1 {
		t.Fatalf("after rm: %v", f.Names())
	}
}

func TestProxyLogsTailAndFollow(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "egress.log")
	_ = os.WriteFile(file+".1", []byte("a\nb\n"), 0o600)
	_ = os.WriteFile(file, []byte("c\nd\npartial"), 0o600)
	var out bytes.Buffer
	if code := proxyLogs([]string{"--log", file}, strings.NewReader(""), &out, io.Discard); code != 0 || out.String() != "a\nb\nc\nd\n" {
		t.Fatalf("logs: %d %q", code, out.String())
	}
	out.Reset()
	if code := proxyLogs([]string{"--log", file, "--tail", "3"}, strings.NewReader(""), &out, io.Discard); code != 0 || out.String() != "b\nc\nd\n" {
		t.Fatalf("logs --tail 3: %d %q", code, out.String())
	}
	// Follow: new lines appear, a rotation is followed, and the end of
	// stdin ends it.
	pr, pw := io.Pipe()
	or, ow := io.Pipe()
	done := make(chan int)
	go func() {
		done <- proxyLogs([]string{"--log", file, "--tail", "1", "-f", "--poll", "10ms"}, pr, ow, io.Discard)
	}()
	br := bufio.NewReader(or)
	appendLine := func(s string) {
		f, _ := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0o600)
		_, _ = f.WriteString(s)
		f.Close()
	}
	appendLine("\n")        // completes "partial", before or after the start
	next := func() string { // skips the backlog's end mark
		for {
			l, err := br.ReadString('\n')
			if l != proxy.BacklogMark+"\n" || err != nil {
				return l
			}
		}
	}
	l := next()
	if l == "d\n" { // started before the append: the last line, then the new one
		l = next()
	}
	if l != "partial\n" {
		t.Fatalf("followed line %q", l)
	}
	_ = os.Rename(file, file+".1")
	_ = os.WriteFile(file, []byte("e\n"), 0o600)
	if l := next(); l != "e\n" {
		t.Fatalf("after rotation %q", l)
	}
	pw.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("logs -f did not end with its stdin")
	}
}

// The helper binary runs the proxy: it answers, refuses without
// credentials, writes a decision line and its counters, and stops on
// SIGTERM.
func TestProxyServeProcess(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pol, logf, stats := filepath.Join(dir, "policy.json"), filepath.Join(dir, "egress.log"), filepath.Join(dir, "stats.json")
	cmd := helperCommand(t, ctx, nil, "proxy", "--listen", addr, "--policy", pol, "--log", logf, "--stats", stats, "--no-dns")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var resp *http.Response
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_, _ = io.WriteString(c, "CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n")
			resp, err = http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "CONNECT"})
			c.Close()
			if err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy did not answer: %v\n%s", err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp.StatusCode != http.StatusProxyAuthRequired {
		t.Fatalf("status %d", resp.StatusCode)
	}
	_ = cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, stderr.String())
	}
	b, _ := os.ReadFile(logf)
	if !bytes.Contains(b, []byte(`"code":"auth_required"`)) {
		t.Fatalf("log: %s", b)
	}
	b, _ = os.ReadFile(stats)
	if !bytes.Contains(b, []byte(`"denied":1`)) {
		t.Fatalf("stats: %s", b)
	}
}

func TestProxyWait(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if code := proxyWait([]string{"--addr", addr, "--timeout", "5s"}, io.Discard); code != 0 {
		t.Fatalf("listening: exit %d", code)
	}
	l.Close()
	start := time.Now()
	if code := proxyWait([]string{"--addr", addr, "--timeout", "200ms"}, io.Discard); code != 1 || time.Since(start) > 3*time.Second {
		t.Fatalf("closed: exit %d after %s", code, time.Since(start))
	}
}

// `proxy networks set` validates, writes atomically, and with --if-match
// replaces only the version the plugin read: a stale push changes nothing.
func TestProxyNetworksSet(t *testing.T) {
	file := filepath.Join(t.TempDir(), "networks.json")
	set := func(stdin string, args ...string) int {
		var errb bytes.Buffer
		return proxyNetworks(append(append([]string{"--networks", file}, args...), "set"), strings.NewReader(stdin), &errb)
	}
	v1 := `{"version":1,"host":["172.17.0.1"],"scopes":{"a":"10.213.0.0/26"}}`
	v2 := `{"version":1,"host":["172.17.0.1","172.25.0.1"],"scopes":{"a":"10.213.0.0/26"}}`
	if c := set(v1, "--if-match", "deadbeef"); c != 3 {
		t.Fatalf("a stale push on no file: exit %d", c)
	}
	if c := set(v1, "--if-match", "none"); c != 0 {
		t.Fatalf("first push: exit %d", c)
	}
	b1, _ := os.ReadFile(file)
	sum := sha256.Sum256(b1)
	if c := set(v2, "--if-match", "none"); c != 3 {
		t.Fatalf("a push made before the file existed: exit %d", c)
	}
	if c := set(v2, "--if-match", hex.EncodeToString(sum[:])); c != 0 {
		t.Fatalf("a push of the version read: exit %d", c)
	}
	if c := set(v1, "--if-match", hex.EncodeToString(sum[:])); c != 3 {
		t.Fatalf("a push of an older picture over a newer one: exit %d", c)
	}
	for _, bad := range []string{`{"version":2}`, `{"version":1,"host":["x"]}`, `{"version":1,"scopes":{"bad name":"10.0.0.0/8"}}`, `not json`, `{"version":1,"extra":1}`} {
		if c := set(bad); c != 1 {
			t.Errorf("%s: exit %d", bad, c)
		}
	}
	n, ok, err := policy.LoadNetworks(file)
	if err != nil || !ok || len(n.Host) != 2 {
		t.Fatalf("the file after refused pushes: %+v %v %v", n, ok, err)
	}
	// The link next to it names the version.
	b2, _ := os.ReadFile(file)
	sum2 := sha256.Sum256(b2)
	if target, err := os.Readlink(file + ".sha"); err != nil || target != hex.EncodeToString(sum2[:]) {
		t.Fatalf("version link: %q %v", target, err)
	}
}

// The subcommands read their command lines with the egress/proxy parsers:
// -h prints the usage (exit 0); a bad command line is one line naming the
// subcommand (exit 2), and nothing runs.
func TestProxySubcommandArgs(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "policy.json")
	cases := []struct {
		name string
		run  func(args []string, stderr io.Writer) int
		bad  []string
	}{
		{"policy", func(a []string, e io.Writer) int { return proxyPolicy(a, strings.NewReader(""), io.Discard, e) },
			[]string{"--policy", file, "ensure", "bad/name"}},
		{"networks", func(a []string, e io.Writer) int { return proxyNetworks(a, strings.NewReader(""), e) },
			[]string{"--networks", filepath.Join(dir, "n.json"), "get"}},
		{"logs", func(a []string, e io.Writer) int { return proxyLogs(a, strings.NewReader(""), io.Discard, e) },
			[]string{"--log", filepath.Join(dir, "l"), "--poll", "0s", "-f"}},
		{"state", func(a []string, e io.Writer) int { return proxyState(a, io.Discard, e) },
			[]string{"--policy", file, "extra"}},
		{"wait", func(a []string, e io.Writer) int { return proxyWait(a, e) },
			[]string{"--addr", "nowhere"}},
	}
	for _, c := range cases {
		var errb bytes.Buffer
		if code := c.run([]string{"-h"}, &errb); code != 0 || !strings.HasPrefix(errb.String(), "usage: sandbox-helper proxy "+c.name) {
			t.Errorf("%s -h: exit %d, %q", c.name, code, errb.String())
		}
		errb.Reset()
		code := c.run(c.bad, &errb)
		msg := errb.String()
		if code != 2 || !strings.HasPrefix(msg, "sandbox-helper proxy "+c.name+": ") || strings.Count(msg, "\n") != 1 {
			t.Errorf("%s %q: exit %d, %q", c.name, c.bad, code, msg)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused command line left files: %v", entries)
	}
}
