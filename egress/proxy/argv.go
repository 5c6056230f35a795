package proxy

// The command lines of `sandbox-helper proxy` and its administration
// subcommands, written once: the plugin builds them with the Argv methods
// (the sidecar's entrypoint, and the execs in the sidecar), and
// sandbox-helper reads them with the Parse functions. Argv returns the
// arguments after the helper's path, "proxy" first (then the subcommand);
// a Parse function takes the arguments after the verb ("proxy") for
// ServeArgs, after the subcommand for the others. For every a that a Parse
// function returns, parsing Argv's arguments again gives a back.
//
// A flag whose value is the default is left out of Argv, except the files
// and addresses, always written so that the command line says what it
// works on.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/docker-sandbox/docker-sandbox/egress/policy"
)

// Verb is the helper's verb for the proxy and its subcommands.
const Verb = "proxy"

// The subcommands of `sandbox-helper proxy`.
const (
	SubPolicy   = "policy"
	SubNetworks = "networks"
	SubLogs     = "logs"
	SubState    = "state"
	SubWait     = "wait"
)

// The operations of `sandbox-helper proxy policy`.
const (
	PolicyGet    = "get"
	PolicyEnsure = "ensure"
	PolicySet    = "set"
	PolicyRm     = "rm"
)

// Default paths in the sidecar (its volume is mounted at /opt/user) and
// defaults of the flags.
const (
	DefaultPolicyFile   = "/opt/user/policy.json"
	DefaultLogFile      = "/opt/user/egress.log"
	DefaultStatsFile    = "/opt/user/stats.json"
	DefaultNetworksFile = "/opt/user/networks.json"
	DefaultListen       = ":3128"
	DefaultWaitAddr     = "127.0.0.1:3128"
	DefaultWaitTimeout  = 20 * time.Second
	DefaultLogsPoll     = 200 * time.Millisecond
	DefaultProbeWait    = 250 * time.Millisecond
)

// The server's limits and timeouts when no flag sets them.
const (
	DefaultMaxTunnels            = 1024
	DefaultMaxTunnelsPerScope    = 256
	DefaultDNSTimeout            = 5 * time.Second
	DefaultConnectTimeout        = 10 * time.Second
	DefaultHeaderTimeout         = 10 * time.Second
	DefaultIdleTimeout           = 5 * time.Minute
	DefaultResponseHeaderTimeout = 60 * time.Second
)

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("sandbox-helper "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // callers report the error their own way
	return fs
}

// listFlag is a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// prefixFlag is a repeatable CIDR flag.
type prefixFlag struct {
	name string
	list *[]netip.Prefix
}

func (p prefixFlag) String() string {
	if p.list == nil {
		return ""
	}
	var s []string
	for _, x := range *p.list {
		s = append(s, x.String())
	}
	return strings.Join(s, ",")
}

func (p prefixFlag) Set(v string) error {
	x, err := policy.ParseCIDR(v)
	if err != nil {
		return fmt.Errorf("bad --%s: %v", p.name, err)
	}
	*p.list = append(*p.list, x)
	return nil
}

// parseFlags parses args with fs and refuses arguments left after the
// flags.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// appendDuration and appendInt append flag and value when value is neither
// zero nor def.
func appendDuration(argv []string, flag string, v, def time.Duration) []string {
	if v == 0 || v == def {
		return argv
	}
	return append(argv, flag, v.String())
}

func appendInt(argv []string, flag string, v, def int) []string {
	if v == 0 || v == def {
		return argv
	}
	return append(argv, flag, strconv.Itoa(v))
}

// ServeArgs: `sandbox-helper proxy [FLAGS]`, the egress proxy (the
// sidecar's entrypoint). A zero limit or timeout is the default.
type ServeArgs struct {
	Listen       string // address to listen on
	PolicyFile   string // re-read when it changes
	LogFile      string // decision log ("-": stdout)
	StatsFile    string // counters, rewritten every 2s ("": none)
	NetworksFile string // the engine's networks as the plugin pushes them ("": none)
	HostProbe    bool
	ProbeWait    time.Duration
	Settings     string // the sidecar's settings (JSON), written to SettingsFile at start
	SettingsFile string
	Hosts        []string // static names NAME=IP[,IP]
	Deny         []netip.Prefix
	Clients      []netip.Prefix
	NoDNS        bool
	// UnsafeAllowLoopback lets loopback through when a scope lists it
	// (benchmarks only).
	UnsafeAllowLoopback   bool
	MaxTunnels            int
	MaxTunnelsPerScope    int
	DNSTimeout            time.Duration
	ConnectTimeout        time.Duration
	HeaderTimeout         time.Duration
	IdleTimeout           time.Duration
	ResponseHeaderTimeout time.Duration
}

// Argv is the proxy's command line.
func (a ServeArgs) Argv() []string {
	argv := []string{Verb, "--listen", a.Listen, "--policy", a.PolicyFile, "--log", a.LogFile, "--stats", a.StatsFile}
	if a.NetworksFile != "" {
		argv = append(argv, "--networks", a.NetworksFile)
	}
	if a.HostProbe {
		argv = append(argv, "--host-probe")
	}
	argv = appendDuration(argv, "--host-probe-wait", a.ProbeWait, DefaultProbeWait)
	if a.Settings != "" || a.SettingsFile != "" {
		argv = append(argv, "--settings", a.Settings, "--settings-file", a.SettingsFile)
	}
	for _, p := range a.Clients {
		argv = append(argv, "--clients", p.String())
	}
	for _, p := range a.Deny {
		argv = append(argv, "--deny", p.String())
	}
	for _, h := range a.Hosts {
		argv = append(argv, "--host", h)
	}
	if a.NoDNS {
		argv = append(argv, "--no-dns")
	}
	if a.UnsafeAllowLoopback {
		argv = append(argv, "--unsafe-allow-loopback")
	}
	argv = appendInt(argv, "--max-tunnels", a.MaxTunnels, DefaultMaxTunnels)
	argv = appendInt(argv, "--max-tunnels-per-scope", a.MaxTunnelsPerScope, DefaultMaxTunnelsPerScope)
	argv = appendDuration(argv, "--dns-timeout", a.DNSTimeout, DefaultDNSTimeout)
	argv = appendDuration(argv, "--connect-timeout", a.ConnectTimeout, DefaultConnectTimeout)
	argv = appendDuration(argv, "--header-timeout", a.HeaderTimeout, DefaultHeaderTimeout)
	argv = appendDuration(argv, "--idle-timeout", a.IdleTimeout, DefaultIdleTimeout)
	argv = appendDuration(argv, "--response-header-timeout", a.ResponseHeaderTimeout, DefaultResponseHeaderTimeout)
	return argv
}

// ParseServeArgs parses the proxy's arguments (after "proxy"). The error
// wraps flag.ErrHelp for -h.
func ParseServeArgs(args []string) (ServeArgs, error) {
	a := ServeArgs{}
	fs := newFlagSet(Verb)
	fs.StringVar(&a.Listen, "listen", DefaultListen, "address to listen on")
	fs.StringVar(&a.PolicyFile, "policy", DefaultPolicyFile, "policy file (re-read when it changes)")
	fs.StringVar(&a.LogFile, "log", DefaultLogFile, "decision log, one JSON line per decision (\"-\": stdout)")
	fs.StringVar(&a.StatsFile, "stats", DefaultStatsFile, "counters, rewritten every 2s (\"\": none)")
	fs.StringVar(&a.NetworksFile, "networks", "", "the engine's networks as the plugin pushes them: addresses of the engine's host, each scope's subnet (a scope's credential is then accepted only from its subnet)")
	fs.BoolVar(&a.HostProbe, "host-probe", false, "probe private destinations reached through a router at one hop before dialling them (the engine's host answers)")
	fs.DurationVar(&a.ProbeWait, "host-probe-wait", DefaultProbeWait, "longest wait of one probe when the next hop does not answer")
	fs.StringVar(&a.Settings, "settings", "", "the sidecar's settings (JSON), written to --settings-file at start so that they survive the container")
	fs.StringVar(&a.SettingsFile, "settings-file", "", "where --settings go")
	var hosts listFlag
	fs.Var(&hosts, "host", "static name NAME=IP[,IP] resolved without DNS (repeatable)")
	fs.Var(prefixFlag{"deny", &a.Deny}, "deny", "prefix never dialled (repeatable)")
	fs.Var(prefixFlag{"clients", &a.Clients}, "clients", "accept clients only from this prefix (repeatable; default: any)")
	fs.BoolVar(&a.NoDNS, "no-dns", false, "resolve only --host names (no DNS at all)")
	fs.BoolVar(&a.UnsafeAllowLoopback, "unsafe-allow-loopback", false, "let loopback through when a scope lists it (benchmarks only)")
	fs.IntVar(&a.MaxTunnels, "max-tunnels", DefaultMaxTunnels, "concurrent upstream connections, all scopes")
	fs.IntVar(&a.MaxTunnelsPerScope, "max-tunnels-per-scope", DefaultMaxTunnelsPerScope, "concurrent upstream connections per scope")
	fs.DurationVar(&a.DNSTimeout, "dns-timeout", DefaultDNSTimeout, "one DNS lookup")
	fs.DurationVar(&a.ConnectTimeout, "connect-timeout", DefaultConnectTimeout, "one TCP connect")
	fs.DurationVar(&a.HeaderTimeout, "header-timeout", DefaultHeaderTimeout, "a client's request headers")
	fs.DurationVar(&a.IdleTimeout, "idle-timeout", DefaultIdleTimeout, "a tunnel or body with no traffic")
	fs.DurationVar(&a.ResponseHeaderTimeout, "response-header-timeout", DefaultResponseHeaderTimeout, "an upstream's response headers")
	if err := parseFlags(fs, args); err != nil {
		return ServeArgs{}, err
	}
	for _, h := range hosts {
		if _, _, err := parseHostFlag(h); err != nil {
			return ServeArgs{}, err
		}
	}
	a.Hosts = []string(hosts)
	switch {
	case a.Listen == "":
		return ServeArgs{}, errors.New("--listen needs an ADDRESS, such as :3128")
	case a.PolicyFile == "":
		return ServeArgs{}, errors.New("--policy needs a FILE")
	case a.LogFile == "":
		return ServeArgs{}, errors.New("--log needs a FILE (\"-\": stdout)")
	case (a.Settings == "") != (a.SettingsFile == ""):
		return ServeArgs{}, errors.New("--settings and --settings-file go together")
	case a.Settings != "" && !json.Valid([]byte(a.Settings)):
		return ServeArgs{}, errors.New("bad --settings: not JSON")
	case a.MaxTunnels <= 0 || a.MaxTunnelsPerScope <= 0:
		return ServeArgs{}, errors.New("--max-tunnels and --max-tunnels-per-scope must be > 0")
	case a.ProbeWait <= 0 || a.DNSTimeout <= 0 || a.ConnectTimeout <= 0 || a.HeaderTimeout <= 0 || a.IdleTimeout <= 0 || a.ResponseHeaderTimeout <= 0:
		return ServeArgs{}, errors.New("--host-probe-wait and the timeouts must be > 0")
	}
	return a, nil
}

// parseHostFlag reads one --host NAME=IP[,IP].
func parseHostFlag(h string) (string, []netip.Addr, error) {
	name, ips, ok := strings.Cut(h, "=")
	ph, err := policy.ParseHost(name)
	if !ok || err != nil || ph.IsLiteral() {
		return "", nil, fmt.Errorf("bad --host %q: want NAME=IP[,IP]", h)
	}
	var addrs []netip.Addr
	for _, s := range strings.Split(ips, ",") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return "", nil, fmt.Errorf("bad --host %q: %v", h, err)
		}
		addrs = append(addrs, a)
	}
	return ph.Name, addrs, nil
}

// Config is the server's configuration from the arguments (a returned by
// ParseServeArgs): everything but the policy, networks, prober and logs.
func (a ServeArgs) Config() Config {
	c := Config{
		Hosts:                 map[string][]netip.Addr{},
		Deny:                  a.Deny,
		Clients:               a.Clients,
		NoDNS:                 a.NoDNS,
		UnsafeAllowLoopback:   a.UnsafeAllowLoopback,
		MaxTunnels:            a.MaxTunnels,
		MaxTunnelsPerScope:    a.MaxTunnelsPerScope,
		DNSTimeout:            a.DNSTimeout,
		ConnectTimeout:        a.ConnectTimeout,
		HeaderTimeout:         a.HeaderTimeout,
		IdleTimeout:           a.IdleTimeout,
		ResponseHeaderTimeout: a.ResponseHeaderTimeout,
	}
	for _, h := range a.Hosts {
		if name, addrs, err := parseHostFlag(h); err == nil {
			c.Hosts[name] = append(c.Hosts[name], addrs...)
		}
	}
	return c
}

// PolicyArgs: `sandbox-helper proxy policy [--policy FILE] [--scope S] get`
// (the policy without tokens, or only scope S's), or `... ensure|set|rm
// SCOPE` (set reads the rules as JSON on stdin; ensure and set print the
// scope's entry with its token).
type PolicyArgs struct {
	File  string
	Op    string // PolicyGet, PolicyEnsure, PolicySet or PolicyRm
	Scope string // the scope of ensure, set and rm
	Only  string // get: only this scope ("": all)
}

// Argv is policy's command line.
func (a PolicyArgs) Argv() []string {
	argv := []string{Verb, SubPolicy, "--policy", a.File}
	if a.Only != "" {
		argv = append(argv, "--scope", a.Only)
	}
	argv = append(argv, a.Op)
	if a.Op != PolicyGet {
		argv = append(argv, a.Scope)
	}
	return argv
}

// ParsePolicyArgs parses policy's arguments (after "proxy policy").
func ParsePolicyArgs(args []string) (PolicyArgs, error) {
	var a PolicyArgs
	fs := newFlagSet(Verb + " " + SubPolicy)
	fs.StringVar(&a.File, "policy", DefaultPolicyFile, "policy file")
	fs.StringVar(&a.Only, "scope", "", "only this scope (get)")
	if err := fs.Parse(args); err != nil {
		return PolicyArgs{}, err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return PolicyArgs{}, errors.New("want get, ensure SCOPE, set SCOPE or rm SCOPE")
	}
	a.Op = rest[0]
	switch a.Op {
	case PolicyGet:
		if len(rest) > 1 {
			return PolicyArgs{}, fmt.Errorf("get: unexpected argument %q (only this scope: --scope %s get)", rest[1], rest[1])
		}
	case PolicyEnsure, PolicySet, PolicyRm:
		if len(rest) != 2 || !policy.ValidScope(rest[1]) {
			return PolicyArgs{}, fmt.Errorf("%s needs one valid scope name", a.Op)
		}
		if a.Only != "" {
			return PolicyArgs{}, fmt.Errorf("--scope goes with get, not %s", a.Op)
		}
		a.Scope = rest[1]
	default:
		return PolicyArgs{}, fmt.Errorf("unknown operation %q: want get, ensure SCOPE, set SCOPE or rm SCOPE", a.Op)
	}
	if a.File == "" {
		return PolicyArgs{}, errors.New("--policy needs a FILE")
	}
	return a, nil
}

// NetworksArgs: `sandbox-helper proxy networks [--networks FILE]
// [--if-match SHA256|none] set`, replace the networks file with the JSON
// on stdin (only the version IfMatch names, when given).
type NetworksArgs struct {
	File    string
	IfMatch string // SHA-256 of the file to replace, hex, or "none" ("": any)
}

// Argv is networks' command line.
func (a NetworksArgs) Argv() []string {
	argv := []string{Verb, SubNetworks, "--networks", a.File}
	if a.IfMatch != "" {
		argv = append(argv, "--if-match", a.IfMatch)
	}
	return append(argv, "set")
}

// ParseNetworksArgs parses networks' arguments (after "proxy networks").
func ParseNetworksArgs(args []string) (NetworksArgs, error) {
	var a NetworksArgs
	fs := newFlagSet(Verb + " " + SubNetworks)
	fs.StringVar(&a.File, "networks", DefaultNetworksFile, "networks file")
	fs.StringVar(&a.IfMatch, "if-match", "", "replace only this version (SHA-256 of the file, hex, or none)")
	if err := fs.Parse(args); err != nil {
		return NetworksArgs{}, err
	}
	if fs.NArg() != 1 || fs.Arg(0) != "set" {
		return NetworksArgs{}, errors.New("want set (the networks as JSON on stdin)")
	}
	if a.File == "" {
		return NetworksArgs{}, errors.New("--networks needs a FILE")
	}
	return a, nil
}

// LogsArgs: `sandbox-helper proxy logs [--log FILE] [--tail N] [-f]`, the
// decision log; with Follow, new lines until stdin ends.
type LogsArgs struct {
	File   string
	Tail   int // only the last Tail lines (negative: all)
	Follow bool
	Poll   time.Duration // how often Follow looks for new lines (0: the default)
}

// Argv is logs' command line.
func (a LogsArgs) Argv() []string {
	argv := []string{Verb, SubLogs, "--log", a.File, "--tail", strconv.Itoa(a.Tail)}
	if a.Follow {
		argv = append(argv, "-f")
	}
	return appendDuration(argv, "--poll", a.Poll, DefaultLogsPoll)
}

// ParseLogsArgs parses logs' arguments (after "proxy logs").
func ParseLogsArgs(args []string) (LogsArgs, error) {
	var a LogsArgs
	fs := newFlagSet(Verb + " " + SubLogs)
	fs.StringVar(&a.File, "log", DefaultLogFile, "decision log")
	fs.BoolVar(&a.Follow, "f", false, "follow")
	fs.IntVar(&a.Tail, "tail", -1, "only the last N lines (-1: all)")
	fs.DurationVar(&a.Poll, "poll", DefaultLogsPoll, "how often -f looks for new lines")
	switch err := parseFlags(fs, args); {
	case err != nil:
		return LogsArgs{}, err
	case a.File == "":
		return LogsArgs{}, errors.New("--log needs a FILE")
	case a.Poll <= 0:
		return LogsArgs{}, errors.New("--poll must be > 0")
	}
	if a.Tail < 0 {
		a.Tail = -1 // any negative number: all
	}
	return a, nil
}

// StateArgs: `sandbox-helper proxy state [--policy FILE] [--stats FILE]`,
// the policy without tokens and the counters, in one JSON object.
type StateArgs struct {
	PolicyFile string
	StatsFile  string // "": no counters
}

// Argv is state's command line.
func (a StateArgs) Argv() []string {
	return []string{Verb, SubState, "--policy", a.PolicyFile, "--stats", a.StatsFile}
}

// ParseStateArgs parses state's arguments (after "proxy state").
func ParseStateArgs(args []string) (StateArgs, error) {
	var a StateArgs
	fs := newFlagSet(Verb + " " + SubState)
	fs.StringVar(&a.PolicyFile, "policy", DefaultPolicyFile, "policy file")
	fs.StringVar(&a.StatsFile, "stats", DefaultStatsFile, "stats file")
	if err := parseFlags(fs, args); err != nil {
		return StateArgs{}, err
	}
	if a.PolicyFile == "" {
		return StateArgs{}, errors.New("--policy needs a FILE")
	}
	return a, nil
}

// WaitArgs: `sandbox-helper proxy wait [--addr HOST:PORT] [--timeout D]`,
// wait until the proxy accepts connections.
type WaitArgs struct {
	Addr    string
	Timeout time.Duration // 0: the default
}

// Argv is wait's command line.
func (a WaitArgs) Argv() []string {
	return appendDuration([]string{Verb, SubWait, "--addr", a.Addr}, "--timeout", a.Timeout, DefaultWaitTimeout)
}

// ParseWaitArgs parses wait's arguments (after "proxy wait").
func ParseWaitArgs(args []string) (WaitArgs, error) {
	var a WaitArgs
	fs := newFlagSet(Verb + " " + SubWait)
	fs.StringVar(&a.Addr, "addr", DefaultWaitAddr, "the proxy's address")
	fs.DurationVar(&a.Timeout, "timeout", DefaultWaitTimeout, "how long to wait")
	if err := parseFlags(fs, args); err != nil {
		return WaitArgs{}, err
	}
	if _, _, err := net.SplitHostPort(a.Addr); err != nil {
		return WaitArgs{}, fmt.Errorf("bad --addr %q: want HOST:PORT", a.Addr)
	}
	if a.Timeout <= 0 {
		return WaitArgs{}, errors.New("--timeout must be > 0")
	}
	return a, nil
}
