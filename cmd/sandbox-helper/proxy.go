package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/docker-sandbox/docker-sandbox/egress/policy"
	"github.com/docker-sandbox/docker-sandbox/egress/proxy"
)

// The usage lines of the proxy and its subcommands.
const (
	serveUsage = `proxy [--listen ADDR] [--policy FILE] [--log FILE] [--stats FILE]
    [--networks FILE] [--host-probe] [--settings JSON --settings-file FILE]
    [--host NAME=IP]... [--no-dns] [--deny CIDR]... [--clients CIDR]...
    [--max-tunnels N] [--max-tunnels-per-scope N] [timeouts]`
	policyUsage   = "proxy policy [--policy FILE] ([--scope S] get | ensure SCOPE | set SCOPE | rm SCOPE)"
	networksUsage = "proxy networks [--networks FILE] [--if-match SHA256|none] set"
	logsUsage     = "proxy logs [--log FILE] [--tail N] [-f]"
	stateUsage    = "proxy state [--policy FILE] [--stats FILE]"
	waitUsage     = "proxy wait [--addr HOST:PORT] [--timeout D]"
)

// maxStdinJSON bounds what the admin commands read.
const maxStdinJSON = 1 << 20

// runProxy implements `sandbox-helper proxy` (the command lines are
// proxy.ServeArgs, proxy.PolicyArgs, ...):
//
//	sandbox-helper proxy [--listen ADDR] [--policy FILE] [--log FILE] [--stats FILE]
//	                     [--networks FILE] [--host-probe] [--settings JSON --settings-file FILE]
//	                     [--host NAME=IP]... [--no-dns] [--deny CIDR]... [--clients CIDR]...
//	                     [--max-tunnels N] [--max-tunnels-per-scope N] [timeouts]
//
// runs the egress proxy (the sidecar's entrypoint). The administration
// commands run next to it, through an exec in the sidecar:
//
//	sandbox-helper proxy policy [--policy FILE] get [--scope S]
//	sandbox-helper proxy policy [--policy FILE] ensure SCOPE
//	sandbox-helper proxy policy [--policy FILE] set SCOPE     (rules as JSON on stdin)
//	sandbox-helper proxy policy [--policy FILE] rm SCOPE
//	sandbox-helper proxy networks [--networks FILE] set     (the engine's networks as JSON on stdin)
//	sandbox-helper proxy logs [--log FILE] [--tail N] [-f]
//	sandbox-helper proxy state [--policy FILE] [--stats FILE]
//	sandbox-helper proxy wait [--addr 127.0.0.1:3128] [--timeout 20s]
func runProxy(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case proxy.SubPolicy:
			return proxyPolicy(args[1:], os.Stdin, os.Stdout, os.Stderr)
		case proxy.SubNetworks:
			return proxyNetworks(args[1:], os.Stdin, os.Stderr)
		case proxy.SubLogs:
			return proxyLogs(args[1:], os.Stdin, os.Stdout, os.Stderr)
		case proxy.SubState:
			return proxyState(args[1:], os.Stdout, os.Stderr)
		case proxy.SubWait:
			return proxyWait(args[1:], os.Stderr)
		}
	}
	return proxyServe(args)
}

// parseArgs reports a parse error of the command named name: its usage
// for -h (exit 0), the error otherwise (exit 2, one line, which the plugin
// shows). ok says whether to go on.
func parseArgs(err error, name, usage string, stderr io.Writer) (code int, ok bool) {
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(stderr, "usage: sandbox-helper %s\n", usage)
		return 0, false
	default:
		fmt.Fprintf(stderr, "sandbox-helper %s: %v\n", name, err)
		return 2, false
	}
}

func proxyServe(args []string) int {
	o, err := proxy.ParseServeArgs(args)
	if code, ok := parseArgs(err, "proxy", serveUsage, os.Stderr); !ok {
		return code
	}
	cfg := o.Config()
	errLog := log.New(os.Stderr, "sandbox-helper proxy: ", log.LstdFlags)
	var logW io.Writer = os.Stdout
	if o.LogFile != "-" {
		rf := &proxy.RotatingFile{Path: o.LogFile, Max: 64 << 20}
		defer rf.Close()
		logW = rf
	}
	// Decisions reach the file within 50ms, in one write per batch.
	lg := proxy.NewBufferedLogger(logW, 50*time.Millisecond)
	defer lg.Close()
	cfg.Log = lg
	cfg.ErrorLog = errLog
	// A policy change takes effect within 100ms.
	src := &proxy.FileSource{Path: o.PolicyFile, Every: 100 * time.Millisecond, OnError: func(err error) { errLog.Print(err) }}
	if _, err := src.Current(); err != nil {
		errLog.Printf("policy: %v (every request is refused until it is fixed)", err)
	}
	cfg.Policy = src
	if o.NetworksFile != "" {
		cfg.Networks = &proxy.NetFile{Path: o.NetworksFile, Every: 100 * time.Millisecond, OnError: func(err error) { errLog.Print(err) }}
	}
	if o.HostProbe {
		cfg.Prober = proxy.NewHostProber(o.ProbeWait)
	}
	if o.SettingsFile != "" {
		if err := policy.WriteAtomic(o.SettingsFile, []byte(o.Settings+"\n"), 0o600); err != nil {
			errLog.Printf("cannot record the settings in %s: %v", o.SettingsFile, err)
		}
	}
	srv := proxy.New(cfg)
	l, err := net.Listen("tcp", o.Listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-helper proxy: %v\n", err)
		return 1
	}
	errLog.Printf("listening on %s, policy %s, log %s", l.Addr(), o.PolicyFile, o.LogFile)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan struct{})
	if o.StatsFile != "" {
		go writeStats(srv, o.StatsFile, done)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case <-sigs:
		close(done)
		srv.Close()
		if o.StatsFile != "" {
			saveStats(srv, o.StatsFile)
		}
		return 0
	case err := <-errc:
		close(done)
		fmt.Fprintf(os.Stderr, "sandbox-helper proxy: %v\n", err)
		return 1
	}
}

func saveStats(srv *proxy.Server, path string) []byte {
	b, _ := json.Marshal(srv.Stats())
	_ = policy.WriteAtomic(path, append(b, '\n'), 0o600)
	return b
}

func writeStats(srv *proxy.Server, path string, done <-chan struct{}) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	var last []byte
	for {
		b, _ := json.Marshal(srv.Stats())
		if string(b) != string(last) {
			_ = policy.WriteAtomic(path, append(b, '\n'), 0o600)
			last = b
		}
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

// scopeOut is what `policy ensure|set` prints: the scope's entry with its
// token, which the plugin puts in the sandbox's proxy URL.
type scopeOut struct {
	Name string `json:"scope"`
	policy.Scope
}

func proxyPolicy(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a, err := proxy.ParsePolicyArgs(args)
	if code, ok := parseArgs(err, "proxy policy", policyUsage, stderr); !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sandbox-helper proxy policy: "+format+"\n", a...)
		return 1
	}
	if a.Op == proxy.PolicyGet {
		f, err := policy.Load(a.File)
		if err != nil {
			return fail("%v", err)
		}
		r := f.Redacted()
		if a.Only != "" {
			s, ok := r.Scopes[a.Only]
			r.Scopes = map[string]policy.Scope{}
			if ok {
				r.Scopes[a.Only] = s
			}
		}
		_, _ = stdout.Write(r.Marshal())
		return 0
	}
	name := a.Scope
	var rules *policy.Rules
	if a.Op == proxy.PolicySet {
		dec := json.NewDecoder(io.LimitReader(stdin, maxStdinJSON))
		dec.DisallowUnknownFields()
		var r policy.Rules
		if err := dec.Decode(&r); err != nil {
			return fail("rules on stdin: %v", err)
		}
		n, err := r.Normalize()
		if err != nil {
			return fail("%v", err)
		}
		rules = &n
	}
	var out scopeOut
	_, err = policy.Update(a.File, func(f *policy.File) error {
		s, ok := f.Scopes[name]
		if a.Op == proxy.PolicyRm {
			delete(f.Scopes, name)
			return nil
		}
		if !ok || s.Token == "" {
			s.Token = policy.NewToken()
			s.Rules = policy.Rules{Allow: []string{}, AllowPorts: []int{}, AllowCIDRs: []string{}}
			s.Updated = time.Now().UTC()
		}
		if rules != nil {
			s.Rules = *rules
			s.Updated = time.Now().UTC()
		}
		f.Scopes[name] = s
		out = scopeOut{Name: name, Scope: s}
		return nil
	})
	if err != nil {
		return fail("%v", err)
	}
	if a.Op == proxy.PolicyRm {
		return 0
	}
	b, _ := json.Marshal(out)
	fmt.Fprintf(stdout, "%s\n", b)
	return 0
}

// proxyNetworks replaces the networks file with the JSON on stdin (after
// validating it), atomically: the proxy picks it up within 100 ms. With
// --if-match (the SHA-256 of the file the plugin read, or "none"), it
// replaces only that version, under a lock, and exits 3 when the file
// changed meanwhile: two plugins pushing at once cannot leave the older
// picture of the engine's networks in place.
func proxyNetworks(args []string, stdin io.Reader, stderr io.Writer) int {
	a, err := proxy.ParseNetworksArgs(args)
	if code, ok := parseArgs(err, "proxy networks", networksUsage, stderr); !ok {
		return code
	}
	b, err := io.ReadAll(io.LimitReader(stdin, maxStdinJSON+1))
	if err != nil || len(b) > maxStdinJSON {
		fmt.Fprintf(stderr, "sandbox-helper proxy networks: reading stdin: %v (at most %d bytes)\n", err, maxStdinJSON)
		return 1
	}
	n, err := policy.ParseNetworks(b)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-helper proxy networks: %v\n", err)
		return 1
	}
	unlock, err := policy.Lock(a.File)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-helper proxy networks: %v\n", err)
		return 1
	}
	defer unlock()
	if a.IfMatch != "" {
		cur := "none"
		if old, err := os.ReadFile(a.File); err == nil {
			sum := sha256.Sum256(old)
			cur = hex.EncodeToString(sum[:])
		} else if !os.IsNotExist(err) {
			fmt.Fprintf(stderr, "sandbox-helper proxy networks: %v\n", err)
			return 1
		}
		if cur != a.IfMatch {
			fmt.Fprintln(stderr, "sandbox-helper proxy networks: the file changed meanwhile")
			return 3
		}
	}
	out := n.Marshal()
	if err := policy.WriteAtomic(a.File, out, 0o600); err != nil {
		fmt.Fprintf(stderr, "sandbox-helper proxy networks: %v\n", err)
		return 1
	}
	// FILE.sha, a symbolic link to the content's SHA-256: the plugin
	// learns the version with one stat through the Engine API (a read of
	// the file costs ten times more).
	sum := sha256.Sum256(out)
	if err := replaceSymlink(hex.EncodeToString(sum[:]), a.File+".sha"); err != nil {
		fmt.Fprintf(stderr, "sandbox-helper proxy networks: %v\n", err)
		return 1
	}
	return 0
}

// replaceSymlink makes link point to target, atomically.
func replaceSymlink(target, link string) error {
	tmp := fmt.Sprintf("%s.tmp%d", link, os.Getpid())
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// proxyWait waits until the proxy accepts connections (after the sidecar
// started), so that the first request of a sandbox does not race it.
func proxyWait(args []string, stderr io.Writer) int {
	a, err := proxy.ParseWaitArgs(args)
	if code, ok := parseArgs(err, "proxy wait", waitUsage, stderr); !ok {
		return code
	}
	deadline := time.Now().Add(a.Timeout)
	for {
		c, err := net.DialTimeout("tcp", a.Addr, time.Second)
		if err == nil {
			c.Close()
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "sandbox-helper proxy wait: %s does not accept connections: %v\n", a.Addr, err)
			return 1
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// proxyState prints the redacted policy and the counters in one object.
func proxyState(args []string, stdout, stderr io.Writer) int {
	a, err := proxy.ParseStateArgs(args)
	if code, ok := parseArgs(err, "proxy state", stateUsage, stderr); !ok {
		return code
	}
	f, err := policy.Load(a.PolicyFile)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-helper proxy state: %v\n", err)
		return 1
	}
	out := struct {
		Policy *policy.File    `json:"policy"`
		Stats  json.RawMessage `json:"stats"`
	}{Policy: f.Redacted(), Stats: json.RawMessage("null")}
	if b, err := os.ReadFile(a.StatsFile); a.StatsFile != "" && err == nil && json.Valid(b) {
		out.Stats = json.RawMessage(b)
	}
	b, _ := json.Marshal(out)
	fmt.Fprintf(stdout, "%s\n", b)
	return 0
}

// proxyLogs prints the decision log (the rotated file, then the current
// one); with -f it keeps printing new lines, across rotations, until its
// stdin ends (the plugin's side of the exec went away).
func proxyLogs(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a, err := proxy.ParseLogsArgs(args)
	if code, ok := parseArgs(err, "proxy logs", logsUsage, stderr); !ok {
		return code
	}
	stop := make(chan struct{})
	if a.Follow {
		go func() {
			_, _ = io.Copy(io.Discard, stdin)
			close(stop)
		}()
	}
	w := bufio.NewWriterSize(stdout, 64<<10)
	defer w.Flush()
	write := func(line string) bool {
		_, err := w.WriteString(line)
		return err == nil
	}
	// With --tail, the existing lines are kept in a window and written at
	// the end.
	var lines []string
	emit := write
	if a.Tail >= 0 {
		emit = func(line string) bool {
			if a.Tail > 0 {
				lines = append(lines, line)
				if len(lines) > a.Tail {
					lines = lines[1:]
				}
			}
			return true
		}
	}
	readAll := func(path string) (int64, os.FileInfo) {
		f, err := os.Open(path)
		if err != nil {
			return 0, nil
		}
		defer f.Close()
		fi, _ := f.Stat()
		br := bufio.NewReaderSize(f, 64<<10)
		var off int64
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return off, fi // a partial last line is read again when complete
			}
			off += int64(len(line))
			if !emit(line) {
				return off, fi
			}
		}
	}
	readAll(a.File + ".1")
	off, fi := readAll(a.File)
	for _, l := range lines {
		write(l)
	}
	if !a.Follow {
		return 0
	}
	emit = write
	// The end of the backlog, so that a reader filtering it (the plugin's
	// --scope with --tail) knows when to print what it kept.
	write(proxy.BacklogMark + "\n")
	if err := w.Flush(); err != nil {
		return 0
	}
	t := time.NewTicker(a.Poll)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return 0
		case <-t.C:
		}
		cur, err := os.Stat(a.File)
		if err != nil {
			continue
		}
		if fi == nil || !os.SameFile(fi, cur) || cur.Size() < off {
			off, fi = 0, cur // rotated: the new file from its start
		}
		if cur.Size() == off {
			continue
		}
		f, err := os.Open(a.File)
		if err != nil {
			continue
		}
		if _, err := f.Seek(off, io.SeekStart); err == nil {
			br := bufio.NewReaderSize(f, 64<<10)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					break
				}
				off += int64(len(line))
				if !emit(line) {
					f.Close()
					return 0
				}
			}
		}
		f.Close()
		if err := w.Flush(); err != nil {
			return 0
		}
	}
}
