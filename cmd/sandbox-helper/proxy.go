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
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/docker-sandbox/docker-sandbox/egress/policy"
	"github.com/docker-sandbox/docker-sandbox/egress/proxy"
)

// Default paths in the sidecar: its volume is mounted at /opt/user.
const (
	defaultPolicyFile   = "/opt/user/policy.json"
	defaultLogFile      = "/opt/user/egress.log"
	defaultStatsFile    = "/opt/user/stats.json"
	defaultNetworksFile = "/opt/user/networks.json"
)

// maxStdinJSON bounds what the admin commands read.
const maxStdinJSON = 1 << 20

// runProxy implements `sandbox-helper proxy`:
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
		case "policy":
			return proxyPolicy(args[1:], os.Stdin, os.Stdout, os.Stderr)
		case "networks":
			return proxyNetworks(args[1:], os.Stdin, os.Stderr)
		case "logs":
			return proxyLogs(args[1:], os.Stdin, os.Stdout, os.Stderr)
		case "state":
			return proxyState(args[1:], os.Stdout, os.Stderr)
		case "wait":
			return proxyWait(args[1:], os.Stderr)
		}
	}
	return proxyServe(args)
}

// listFlag is a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// proxyOptions are the server's flags.
type proxyOptions struct {
	listen, policyFile, logFile, statsFile string
	networksFile                           string
	settings, settingsFile                 string
	hostProbe                              bool
	probeWait                              time.Duration
	cfg                                    proxy.Config
}

func parseProxyFlags(args []string, stderr io.Writer) (*proxyOptions, error) {
	fs := flag.NewFlagSet("sandbox-helper proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &proxyOptions{}
	fs.StringVar(&o.listen, "listen", ":3128", "address to listen on")
	fs.StringVar(&o.policyFile, "policy", defaultPolicyFile, "policy file (re-read when it changes)")
	fs.StringVar(&o.logFile, "log", defaultLogFile, "decision log, one JSON line per decision (\"-\": stdout)")
	fs.StringVar(&o.statsFile, "stats", defaultStatsFile, "counters, rewritten every 2s (\"\": none)")
	fs.StringVar(&o.networksFile, "networks", "", "the engine's networks as the plugin pushes them: addresses of the engine's host, each scope's subnet (a scope's credential is then accepted only from its subnet)")
	fs.BoolVar(&o.hostProbe, "host-probe", false, "probe private destinations reached through a router at one hop before dialling them (the engine's host answers)")
	fs.DurationVar(&o.probeWait, "host-probe-wait", 250*time.Millisecond, "longest wait of one probe when the next hop does not answer")
	fs.StringVar(&o.settings, "settings", "", "the sidecar's settings (JSON), written to --settings-file at start so that they survive the container")
	fs.StringVar(&o.settingsFile, "settings-file", "", "where --settings go")
	var hosts, deny, clients listFlag
	fs.Var(&hosts, "host", "static name NAME=IP[,IP] resolved without DNS (repeatable)")
	fs.Var(&deny, "deny", "prefix never dialled (repeatable)")
	fs.Var(&clients, "clients", "accept clients only from this prefix (repeatable; default: any)")
	fs.BoolVar(&o.cfg.NoDNS, "no-dns", false, "resolve only --host names (no DNS at all)")
	fs.BoolVar(&o.cfg.UnsafeAllowLoopback, "unsafe-allow-loopback", false, "let loopback through when a scope lists it (benchmarks only)")
	fs.IntVar(&o.cfg.MaxTunnels, "max-tunnels", 1024, "concurrent upstream connections, all scopes")
	fs.IntVar(&o.cfg.MaxTunnelsPerScope, "max-tunnels-per-scope", 256, "concurrent upstream connections per scope")
	fs.DurationVar(&o.cfg.DNSTimeout, "dns-timeout", 5*time.Second, "one DNS lookup")
	fs.DurationVar(&o.cfg.ConnectTimeout, "connect-timeout", 10*time.Second, "one TCP connect")
	fs.DurationVar(&o.cfg.HeaderTimeout, "header-timeout", 10*time.Second, "a client's request headers")
	fs.DurationVar(&o.cfg.IdleTimeout, "idle-timeout", 5*time.Minute, "a tunnel or body with no traffic")
	fs.DurationVar(&o.cfg.ResponseHeaderTimeout, "response-header-timeout", 60*time.Second, "an upstream's response headers")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	o.cfg.Hosts = map[string][]netip.Addr{}
	for _, h := range hosts {
		name, ips, ok := strings.Cut(h, "=")
		ph, err := policy.ParseHost(name)
		if !ok || err != nil || ph.IsLiteral() {
			return nil, fmt.Errorf("bad --host %q: want NAME=IP[,IP]", h)
		}
		for _, s := range strings.Split(ips, ",") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("bad --host %q: %v", h, err)
			}
			o.cfg.Hosts[ph.Name] = append(o.cfg.Hosts[ph.Name], a)
		}
	}
	for _, d := range deny {
		p, err := policy.ParseCIDR(d)
		if err != nil {
			return nil, fmt.Errorf("bad --deny: %v", err)
		}
		o.cfg.Deny = append(o.cfg.Deny, p)
	}
	for _, c := range clients {
		p, err := policy.ParseCIDR(c)
		if err != nil {
			return nil, fmt.Errorf("bad --clients: %v", err)
		}
		o.cfg.Clients = append(o.cfg.Clients, p)
	}
	if (o.settings == "") != (o.settingsFile == "") {
		return nil, fmt.Errorf("--settings and --settings-file go together")
	}
	if o.settings != "" && !json.Valid([]byte(o.settings)) {
		return nil, fmt.Errorf("bad --settings: not JSON")
	}
	return o, nil
}

func proxyServe(args []string) int {
	o, err := parseProxyFlags(args, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "sandbox-helper proxy: %v\n", err)
		return 2
	}
	errLog := log.New(os.Stderr, "sandbox-helper proxy: ", log.LstdFlags)
	var logW io.Writer = os.Stdout
	if o.logFile != "-" {
		rf := &proxy.RotatingFile{Path: o.logFile, Max: 64 << 20}
		defer rf.Close()
		logW = rf
	}
	// Decisions reach the file within 50ms, in one write per batch.
	lg := proxy.NewBufferedLogger(logW, 50*time.Millisecond)
	defer lg.Close()
	o.cfg.Log = lg
	o.cfg.ErrorLog = errLog
	// A policy change takes effect within 100ms.
	src := &proxy.FileSource{Path: o.policyFile, Every: 100 * time.Millisecond, OnError: func(err error) { errLog.Print(err) }}
	if _, err := src.Current(); err != nil {
		errLog.Printf("policy: %v (every request is refused until it is fixed)", err)
	}
	o.cfg.Policy = src
	if o.networksFile != "" {
		o.cfg.Networks = &proxy.NetFile{Path: o.networksFile, Every: 100 * time.Millisecond, OnError: func(err error) { errLog.Print(err) }}
	}
	if o.hostProbe {
		o.cfg.Prober = proxy.NewHostProber(o.probeWait)
	}
	if o.settingsFile != "" {
		if err := policy.WriteAtomic(o.settingsFile, []byte(o.settings+"\n"), 0o600); err != nil {
			errLog.Printf("cannot record the settings in %s: %v", o.settingsFile, err)
		}
	}
	srv := proxy.New(o.cfg)
	l, err := net.Listen("tcp", o.listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-helper proxy: %v\n", err)
		return 1
	}
	errLog.Printf("listening on %s, policy %s, log %s", l.Addr(), o.policyFile, o.logFile)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan struct{})
	if o.statsFile != "" {
		go writeStats(srv, o.statsFile, done)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case <-sigs:
		close(done)
		srv.Close()
		if o.statsFile != "" {
			saveStats(srv, o.statsFile)
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
	fs := flag.NewFlagSet("sandbox-helper proxy policy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("policy", defaultPolicyFile, "policy file")
	scopeFlag := fs.String("scope", "", "only this scope (get)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sandbox-helper proxy policy: "+format+"\n", a...)
		return 1
	}
	if len(rest) == 0 {
		return fail("want get, ensure SCOPE, set SCOPE or rm SCOPE")
	}
	verb := rest[0]
	if verb == "get" {
		f, err := policy.Load(*file)
		if err != nil {
			return fail("%v", err)
		}
		r := f.Redacted()
		if *scopeFlag != "" {
			s, ok := r.Scopes[*scopeFlag]
			r.Scopes = map[string]policy.Scope{}
			if ok {
				r.Scopes[*scopeFlag] = s
			}
		}
		_, _ = stdout.Write(r.Marshal())
		return 0
	}
	if len(rest) != 2 || !policy.ValidScope(rest[1]) {
		return fail("%s needs one valid scope name", verb)
	}
	name := rest[1]
	var rules *policy.Rules
	if verb == "set" {
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
	_, err := policy.Update(*file, func(f *policy.File) error {
		s, ok := f.Scopes[name]
		switch verb {
		case "rm":
			delete(f.Scopes, name)
			return nil
		case "ensure", "set":
		default:
			return fmt.Errorf("unknown verb %q", verb)
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
	if verb == "rm" {
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
	fs := flag.NewFlagSet("sandbox-helper proxy networks", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("networks", defaultNetworksFile, "networks file")
	ifMatch := fs.String("if-match", "", "replace only this version (SHA-256 of the file, hex, or none)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 || fs.Arg(0) != "set" {
		fmt.Fprintln(stderr, "sandbox-helper proxy networks: want set (the networks as JSON on stdin)")
		return 2
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
	unlock, err := policy.Lock(*file)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-helper proxy networks: %v\n", err)
		return 1
	}
	defer unlock()
	if *ifMatch != "" {
		cur := "none"
		if old, err := os.ReadFile(*file); err == nil {
			sum := sha256.Sum256(old)
			cur = hex.EncodeToString(sum[:])
		} else if !os.IsNotExist(err) {
			fmt.Fprintf(stderr, "sandbox-helper proxy networks: %v\n", err)
			return 1
		}
		if cur != *ifMatch {
			fmt.Fprintln(stderr, "sandbox-helper proxy networks: the file changed meanwhile")
			return 3
		}
	}
	out := n.Marshal()
	if err := policy.WriteAtomic(*file, out, 0o600); err != nil {
		fmt.Fprintf(stderr, "sandbox-helper proxy networks: %v\n", err)
		return 1
	}
	// FILE.sha, a symbolic link to the content's SHA-256: the plugin
	// learns the version with one stat through the Engine API (a read of
	// the file costs ten times more).
	sum := sha256.Sum256(out)
	if err := replaceSymlink(hex.EncodeToString(sum[:]), *file+".sha"); err != nil {
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
	fs := flag.NewFlagSet("sandbox-helper proxy wait", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:3128", "the proxy's address")
	timeout := fs.Duration("timeout", 20*time.Second, "how long to wait")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	deadline := time.Now().Add(*timeout)
	for {
		c, err := net.DialTimeout("tcp", *addr, time.Second)
		if err == nil {
			c.Close()
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "sandbox-helper proxy wait: %s does not accept connections: %v\n", *addr, err)
			return 1
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// proxyState prints the redacted policy and the counters in one object.
func proxyState(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandbox-helper proxy state", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("policy", defaultPolicyFile, "policy file")
	stats := fs.String("stats", defaultStatsFile, "stats file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	f, err := policy.Load(*file)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-helper proxy state: %v\n", err)
		return 1
	}
	out := struct {
		Policy *policy.File    `json:"policy"`
		Stats  json.RawMessage `json:"stats"`
	}{Policy: f.Redacted(), Stats: json.RawMessage("null")}
	if b, err := os.ReadFile(*stats); err == nil && json.Valid(b) {
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
	fs := flag.NewFlagSet("sandbox-helper proxy logs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("log", defaultLogFile, "decision log")
	follow := fs.Bool("f", false, "follow")
	tail := fs.Int("tail", -1, "only the last N lines (-1: all)")
	poll := fs.Duration("poll", 200*time.Millisecond, "how often -f looks for new lines")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	stop := make(chan struct{})
	if *follow {
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
	if *tail >= 0 {
		emit = func(line string) bool {
			if *tail > 0 {
				lines = append(lines, line)
				if len(lines) > *tail {
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
	readAll(*file + ".1")
	off, fi := readAll(*file)
	for _, l := range lines {
		write(l)
	}
	if !*follow {
		return 0
	}
	emit = write
	// The end of the backlog, so that a reader filtering it (the plugin's
	// --scope with --tail) knows when to print what it kept.
	write(proxy.BacklogMark + "\n")
	if err := w.Flush(); err != nil {
		return 0
	}
	t := time.NewTicker(*poll)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return 0
		case <-t.C:
		}
		cur, err := os.Stat(*file)
		if err != nil {
			continue
		}
		if fi == nil || !os.SameFile(fi, cur) || cur.Size() < off {
			off, fi = 0, cur // rotated: the new file from its start
		}
		if cur.Size() == off {
			continue
		}
		f, err := os.Open(*file)
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
