package proxy

import (
	"errors"
	"flag"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var argvCmp = []cmp.Option{cmpopts.EquateEmpty(), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })}

// The command lines the plugin has always sent, to the letter.
func TestProxyArgv(t *testing.T) {
	pool := netip.MustParsePrefix("10.213.0.0/16")
	cases := []struct {
		name string
		got  []string
		want string
	}{
		{"serve", ServeArgs{Listen: ":3128", PolicyFile: "/p", LogFile: "/l", StatsFile: "/s", NetworksFile: "/n", HostProbe: true,
			Settings: `{"a":1}`, SettingsFile: "/set", Clients: []netip.Prefix{pool},
			Deny: []netip.Prefix{pool, netip.MustParsePrefix("192.168.65.254/32")}, Hosts: []string{"a.test=10.0.0.1"}, NoDNS: true}.Argv(),
			`proxy --listen :3128 --policy /p --log /l --stats /s --networks /n --host-probe --settings {"a":1} --settings-file /set ` +
				`--clients 10.213.0.0/16 --deny 10.213.0.0/16 --deny 192.168.65.254/32 --host a.test=10.0.0.1 --no-dns`},
		{"serve defaults left out", ServeArgs{Listen: ":1", PolicyFile: "/p", LogFile: "-", MaxTunnels: DefaultMaxTunnels, DNSTimeout: DefaultDNSTimeout}.Argv(),
			`proxy --listen :1 --policy /p --log - --stats `},
		{"serve limits", ServeArgs{Listen: ":1", PolicyFile: "/p", LogFile: "/l", StatsFile: "/s", UnsafeAllowLoopback: true, ProbeWait: time.Second,
			MaxTunnels: 2, MaxTunnelsPerScope: 1, DNSTimeout: time.Second, ConnectTimeout: 2 * time.Second, HeaderTimeout: 3 * time.Second,
			IdleTimeout: 4 * time.Second, ResponseHeaderTimeout: 5 * time.Second}.Argv(),
			"proxy --listen :1 --policy /p --log /l --stats /s --host-probe-wait 1s --unsafe-allow-loopback --max-tunnels 2 --max-tunnels-per-scope 1 " +
				"--dns-timeout 1s --connect-timeout 2s --header-timeout 3s --idle-timeout 4s --response-header-timeout 5s"},
		{"policy ensure", PolicyArgs{File: "/p", Op: PolicyEnsure, Scope: "s1"}.Argv(), "proxy policy --policy /p ensure s1"},
		{"policy set", PolicyArgs{File: "/p", Op: PolicySet, Scope: "s1"}.Argv(), "proxy policy --policy /p set s1"},
		{"policy rm", PolicyArgs{File: "/p", Op: PolicyRm, Scope: "s1"}.Argv(), "proxy policy --policy /p rm s1"},
		{"policy get", PolicyArgs{File: "/p", Op: PolicyGet, Only: "s2"}.Argv(), "proxy policy --policy /p --scope s2 get"},
		{"networks", NetworksArgs{File: "/n", IfMatch: "none"}.Argv(), "proxy networks --networks /n --if-match none set"},
		{"networks any", NetworksArgs{File: "/n"}.Argv(), "proxy networks --networks /n set"},
		{"logs", LogsArgs{File: "/l", Tail: -1}.Argv(), "proxy logs --log /l --tail -1"},
		{"logs follow", LogsArgs{File: "/l", Tail: 3, Follow: true}.Argv(), "proxy logs --log /l --tail 3 -f"},
		{"logs poll", LogsArgs{File: "/l", Poll: time.Millisecond}.Argv(), "proxy logs --log /l --tail 0 --poll 1ms"},
		{"state", StateArgs{PolicyFile: "/p", StatsFile: "/s"}.Argv(), "proxy state --policy /p --stats /s"},
		{"wait", WaitArgs{Addr: "127.0.0.1:3128"}.Argv(), "proxy wait --addr 127.0.0.1:3128"},
		{"wait timeout", WaitArgs{Addr: "127.0.0.1:3128", Timeout: time.Second}.Argv(), "proxy wait --addr 127.0.0.1:3128 --timeout 1s"},
	}
	for _, tc := range cases {
		if got := strings.Join(tc.got, " "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The helper's defaults, for command lines typed by hand.
func TestProxyArgsDefaults(t *testing.T) {
	s, err := ParseServeArgs(nil)
	want := ServeArgs{Listen: DefaultListen, PolicyFile: DefaultPolicyFile, LogFile: DefaultLogFile, StatsFile: DefaultStatsFile,
		ProbeWait: DefaultProbeWait, MaxTunnels: DefaultMaxTunnels, MaxTunnelsPerScope: DefaultMaxTunnelsPerScope,
		DNSTimeout: DefaultDNSTimeout, ConnectTimeout: DefaultConnectTimeout, HeaderTimeout: DefaultHeaderTimeout,
		IdleTimeout: DefaultIdleTimeout, ResponseHeaderTimeout: DefaultResponseHeaderTimeout}
	if diff := cmp.Diff(want, s, argvCmp...); err != nil || diff != "" {
		t.Errorf("serve: %v (-want +got):\n%s", err, diff)
	}
	for name, c := range map[string]struct{ got, want any }{
		"policy":   {first(ParsePolicyArgs([]string{"get"})), PolicyArgs{File: DefaultPolicyFile, Op: PolicyGet}},
		"networks": {first(ParseNetworksArgs([]string{"set"})), NetworksArgs{File: DefaultNetworksFile}},
		"logs":     {first(ParseLogsArgs(nil)), LogsArgs{File: DefaultLogFile, Tail: -1, Poll: DefaultLogsPoll}},
		"logs -5":  {first(ParseLogsArgs([]string{"--tail", "-5"})), LogsArgs{File: DefaultLogFile, Tail: -1, Poll: DefaultLogsPoll}},
		"state":    {first(ParseStateArgs(nil)), StateArgs{PolicyFile: DefaultPolicyFile, StatsFile: DefaultStatsFile}},
		"wait":     {first(ParseWaitArgs(nil)), WaitArgs{Addr: DefaultWaitAddr, Timeout: DefaultWaitTimeout}},
	} {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func first[T any](v T, err error) any {
	if err != nil {
		return err.Error()
	}
	return v
}

// Moved from cmd/sandbox-helper (TestProxyFlags): the server's flags make
// its configuration; bad ones are refused.
func TestParseServeArgs(t *testing.T) {
	a, err := ParseServeArgs([]string{"--host", "Up.Test.=10.1.2.3,fd00::1", "--deny", "10.213.0.0/16", "--clients", "10.213.0.0/16", "--no-dns"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := a.Config()
	if len(cfg.Hosts["up.test"]) != 2 || len(cfg.Deny) != 1 || !cfg.NoDNS || len(cfg.Clients) != 1 {
		t.Fatalf("%+v", cfg)
	}
	if cfg.MaxTunnels != DefaultMaxTunnels || cfg.IdleTimeout != DefaultIdleTimeout {
		t.Fatalf("defaults: %+v", cfg)
	}
	for _, bad := range [][]string{
		{"--host", "x"}, {"--host", "1.2.3.4=1.2.3.4"}, {"--host", "a=b"}, {"--deny", "x"}, {"--clients", "10.0.0.0/33"}, {"extra"},
		{"--settings", "{}"}, {"--settings-file", "/f"}, {"--settings", "{", "--settings-file", "/f"},
		{"--listen", ""}, {"--policy", ""}, {"--log", ""}, {"--max-tunnels", "0"}, {"--max-tunnels-per-scope", "-1"},
		{"--idle-timeout", "0s"}, {"--host-probe-wait", "-1s"}, {"--dns-timeout", "soon"},
	} {
		if a, err := ParseServeArgs(bad); err == nil {
			t.Errorf("%q accepted as %+v", bad, a)
		}
	}
}

func TestParseProxySubcommandsRejects(t *testing.T) {
	cases := map[string]func() error{
		"policy nothing":        func() error { _, err := ParsePolicyArgs(nil); return err },
		"policy unknown op":     func() error { _, err := ParsePolicyArgs([]string{"frob", "s1"}); return err },
		"policy bad scope":      func() error { _, err := ParsePolicyArgs([]string{"ensure", "bad/name"}); return err },
		"policy no scope":       func() error { _, err := ParsePolicyArgs([]string{"set"}); return err },
		"policy two scopes":     func() error { _, err := ParsePolicyArgs([]string{"rm", "a", "b"}); return err },
		"policy get extra":      func() error { _, err := ParsePolicyArgs([]string{"get", "s1"}); return err },
		"policy --scope ensure": func() error { _, err := ParsePolicyArgs([]string{"--scope", "a", "ensure", "a"}); return err },
		"policy empty file":     func() error { _, err := ParsePolicyArgs([]string{"--policy", "", "get"}); return err },
		"networks no set":       func() error { _, err := ParseNetworksArgs(nil); return err },
		"networks other":        func() error { _, err := ParseNetworksArgs([]string{"get"}); return err },
		"networks extra":        func() error { _, err := ParseNetworksArgs([]string{"set", "x"}); return err },
		"logs extra":            func() error { _, err := ParseLogsArgs([]string{"x"}); return err },
		"logs zero poll":        func() error { _, err := ParseLogsArgs([]string{"--poll", "0s"}); return err },
		"logs bad tail":         func() error { _, err := ParseLogsArgs([]string{"--tail", "x"}); return err },
		"state extra":           func() error { _, err := ParseStateArgs([]string{"x"}); return err },
		"state empty policy":    func() error { _, err := ParseStateArgs([]string{"--policy", ""}); return err },
		"wait bad addr":         func() error { _, err := ParseWaitArgs([]string{"--addr", "localhost"}); return err },
		"wait zero timeout":     func() error { _, err := ParseWaitArgs([]string{"--timeout", "0s"}); return err },
		"wait extra":            func() error { _, err := ParseWaitArgs([]string{"x"}); return err },
	}
	for name, f := range cases {
		if f() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, f := range map[string]func() error{
		"serve":  func() error { _, err := ParseServeArgs([]string{"-h"}); return err },
		"policy": func() error { _, err := ParsePolicyArgs([]string{"--help"}); return err },
		"logs":   func() error { _, err := ParseLogsArgs([]string{"-h"}); return err },
	} {
		if err := f(); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s -h: %v, want flag.ErrHelp", name, err)
		}
	}
}

// proxyRoundTrip parses args (after "proxy") as the helper dispatches
// them; when they parse, the parsed value's Argv must parse back to the
// same value, "proxy" and the subcommand first. It says whether args parse.
func proxyRoundTrip(t *testing.T, args []string) bool {
	t.Helper()
	sub := ""
	if len(args) > 0 {
		switch args[0] {
		case SubPolicy, SubNetworks, SubLogs, SubState, SubWait:
			sub, args = args[0], args[1:]
		}
	}
	var got, again any
	var argv []string
	var err error
	switch sub {
	case "":
		got, again, argv, err = parseTwice(ParseServeArgs, args, 1)
	case SubPolicy:
		got, again, argv, err = parseTwice(ParsePolicyArgs, args, 2)
	case SubNetworks:
		got, again, argv, err = parseTwice(ParseNetworksArgs, args, 2)
	case SubLogs:
		got, again, argv, err = parseTwice(ParseLogsArgs, args, 2)
	case SubState:
		got, again, argv, err = parseTwice(ParseStateArgs, args, 2)
	case SubWait:
		got, again, argv, err = parseTwice(ParseWaitArgs, args, 2)
	}
	if got == nil {
		return false // did not parse
	}
	if err != nil {
		t.Fatalf("proxy %s %q parsed as %+v, whose argv %q does not parse: %v", sub, args, got, argv, err)
	}
	if argv[0] != Verb || (sub != "" && argv[1] != sub) || (sub == "" && len(argv) > 1 && isSub(argv[1])) {
		t.Fatalf("proxy %s: argv %q does not start with the verb and subcommand", sub, argv)
	}
	if diff := cmp.Diff(got, again, argvCmp...); diff != "" {
		t.Fatalf("proxy %s %q: argv %q parses back differently (-first +again):\n%s", sub, args, argv, diff)
	}
	return true
}

// parseTwice parses args; when they parse (got != nil), it parses the
// value's Argv again, after its first skip words.
func parseTwice[T interface{ Argv() []string }](parse func([]string) (T, error), args []string, skip int) (got, again any, argv []string, err error) {
	a, err := parse(args)
	if err != nil {
		return nil, nil, nil, nil
	}
	argv = a.Argv()
	b, err := parse(argv[skip:])
	return a, b, argv, err
}

func isSub(s string) bool {
	switch s {
	case SubPolicy, SubNetworks, SubLogs, SubState, SubWait:
		return true
	}
	return false
}

var proxyArgvSeeds = [][]string{
	ServeArgs{Listen: ":3128", PolicyFile: "/p", LogFile: "/l", StatsFile: "", NetworksFile: "/n", HostProbe: true, ProbeWait: time.Second,
		Settings: `-1`, SettingsFile: "--x", Clients: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Deny: []netip.Prefix{netip.MustParsePrefix("fd00::/8"), netip.MustParsePrefix("1.2.3.4/32")}, Hosts: []string{"A.test.=10.0.0.1,::1"},
		NoDNS: true, UnsafeAllowLoopback: true, MaxTunnels: 3, IdleTimeout: time.Hour}.Argv(),
	{Verb, "-listen=:1", "--deny", "10.1.2.3/8", "--max-tunnels=0x10", "--no-dns=false", "--stats="},
	PolicyArgs{File: "-p", Op: PolicyGet, Only: "--s"}.Argv(),
	PolicyArgs{File: "/p", Op: PolicySet, Scope: "s1"}.Argv(),
	{Verb, SubPolicy, "rm", "s-1"},
	NetworksArgs{File: "/n", IfMatch: "-"}.Argv(),
	LogsArgs{File: "/l", Tail: 0, Follow: true, Poll: time.Second}.Argv(),
	{Verb, SubLogs, "--tail", "-9", "-f=true"},
	StateArgs{PolicyFile: "/p", StatsFile: ""}.Argv(),
	WaitArgs{Addr: "[::1]:1", Timeout: time.Minute}.Argv(),
}

func TestProxyArgvRoundTrip(t *testing.T) {
	for _, argv := range proxyArgvSeeds {
		if !proxyRoundTrip(t, argv[1:]) {
			t.Errorf("%q does not parse", argv)
		}
	}
}

// FuzzParseProxyArgv: no command line makes a parser panic, and whatever
// parses is rebuilt by Argv to the same value.
func FuzzParseProxyArgv(f *testing.F) {
	for _, argv := range proxyArgvSeeds {
		f.Add(strings.Join(argv[1:], "\x00"))
	}
	f.Fuzz(func(t *testing.T, in string) {
		proxyRoundTrip(t, strings.Split(in, "\x00"))
	})
}
