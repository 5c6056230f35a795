package wire

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The command lines the plugin has always sent, to the letter.
func TestArgv(t *testing.T) {
	cases := []struct {
		name string
		got  []string
		want string
	}{
		{"init", InitArgs{IdleTTL: 5 * time.Minute, Target: "s/a", Spec: "h"}.Argv(),
			"init --idle-ttl 5m0s --target s/a --spec h"},
		{"init limits", InitArgs{MaxLifetime: time.Hour, Disk: 42, Target: "s", Spec: "h"}.Argv(),
			"init --idle-ttl 0s --target s --spec h --max-lifetime 1h0m0s --disk 42"},
		{"init serve stdin", InitArgs{Target: "s", Spec: "h", ServeStdin: true}.Argv(),
			"init --idle-ttl 0s --target s --spec h --serve-stdin"},
		{"run code", RunArgs{Token: "t", Timeout: time.Minute, MaxOutput: 9, Workdir: "/w", Spec: "h", Target: "s",
			Interps: []string{"python3", "python"}, CodeExt: ".py", Args: []string{"-x"}}.Argv(),
			"run --token t --timeout 1m0s --max-output 9 --workdir /w --spec h --target s --interp python3,python --code-ext .py -- -x"},
		{"run no code", RunArgs{Token: "t", Timeout: time.Second, MaxOutput: 1, Spec: "h", Target: "s",
			NoCode: true, Interps: []string{"sh"}, Args: []string{"-c", "x"}}.Argv(),
			"run --token t --timeout 1s --max-output 1 --workdir  --spec h --target s --no-code --interp sh -- -c x"},
		{"run kernel", RunArgs{Token: "t", Timeout: time.Second, MaxOutput: 1, Spec: "h", Target: "s",
			Interps: []string{"python3"}, CodeExt: ".py", Kernel: KernelPython, KernelReset: true}.Argv(),
			"run --token t --timeout 1s --max-output 1 --workdir  --spec h --target s --interp python3 --code-ext .py --kernel python --kernel-reset --"},
		{"signal", SignalArgs{Token: "t"}.Argv(), "signal --token t"},
		{"drain", DrainArgs{Holder: "x"}.Argv(), "drain --holder x"},
		{"undrain", DrainArgs{Holder: "x", Undo: true}.Argv(), "drain --holder x --undo"},
		{"status", StatusArgs{}.Argv(), "status"},
		{"status newest", StatusArgs{Newest: true, Dirs: []string{"/v/a", "/v/b"}}.Argv(), "status --newest -- /v/a /v/b"},
		{"fs", FSArgs{Args: []string{"ls", "/opt/workspace"}}.Argv(), "fs ls /opt/workspace"},
		{"fs target", FSArgs{Target: "s/a", Args: []string{"cat", "f"}}.Argv(), "fs --target s/a cat f"},
	}
	for _, tc := range cases {
		if got := strings.Join(tc.got, " "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestParseRunArgs(t *testing.T) {
	a, err := ParseRunArgs([]string{"--interp", " python3, ,python ", "--code-ext", "py", "--timeout", "1m", "--max-output", "42",
		"--workdir", "/opt/workspace", "--spec", "h", "--token", "t", "--target", "s", "--", "--timeout", "x"})
	want := RunArgs{Token: "t", Timeout: time.Minute, MaxOutput: 42, Workdir: "/opt/workspace", Spec: "h", Target: "s",
		Interps: []string{"python3", "python"}, CodeExt: ".py", Args: []string{"--timeout", "x"}}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for name, args := range map[string][]string{
		"no interp":         {"--timeout", "1s", "--max-output", "1"},
		"no timeout":        {"--interp", "sh", "--max-output", "1"},
		"no max output":     {"--interp", "sh", "--timeout", "1s"},
		"relative workdir":  {"--interp", "sh", "--timeout", "1s", "--max-output", "1", "--workdir", "w"},
		"slash in code-ext": {"--interp", "sh", "--timeout", "1s", "--max-output", "1", "--code-ext", "./x"},
		"unknown flag":      {"--interp", "sh", "--timeout", "1s", "--max-output", "1", "-c", "x"},
		"short code sum":    {"--interp", "sh", "--timeout", "1s", "--max-output", "1", "--code-sha256", "abc"},
		"upper code sum":    {"--interp", "sh", "--timeout", "1s", "--max-output", "1", "--code-sha256", strings.Repeat("A", 64)},
		"unknown kernel":    {"--interp", "sh", "--timeout", "1s", "--max-output", "1", "--kernel", "bash"},
		"kernel no code":    {"--interp", "sh", "--timeout", "1s", "--max-output", "1", "--kernel", "python", "--no-code"},
		"reset no kernel":   {"--interp", "sh", "--timeout", "1s", "--max-output", "1", "--kernel-reset"},
	} {
		if a, err := ParseRunArgs(args); err == nil {
			t.Errorf("%s: accepted as %+v", name, a)
		}
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]func() error{
		"init extra":        func() error { _, err := ParseInitArgs([]string{"x"}); return err },
		"init negative":     func() error { _, err := ParseInitArgs([]string{"--disk", "-1"}); return err },
		"init bad ttl":      func() error { _, err := ParseInitArgs([]string{"--idle-ttl", "soon"}); return err },
		"signal no token":   func() error { _, err := ParseSignalArgs(nil); return err },
		"drain extra":       func() error { _, err := ParseDrainArgs([]string{"x"}); return err },
		"status extra":      func() error { _, err := ParseStatusArgs([]string{"x"}); return err },
		"status no dirs":    func() error { _, err := ParseStatusArgs([]string{"--newest"}); return err },
		"fs empty target":   func() error { _, err := ParseFSArgs([]string{"--target", ""}); return err },
		"fs missing target": func() error { _, err := ParseFSArgs([]string{"--target"}); return err },
	}
	for name, f := range cases {
		if f() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ParseInitArgs([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("init -h: %v, want flag.ErrHelp", err)
	}
}

// roundTrip parses args for verb; when they parse, the parsed value's Argv
// must parse back to the same value, verb first.
func roundTrip(t *testing.T, verb string, args []string) {
	t.Helper()
	var got, again any
	var argv []string
	var err error
	switch verb {
	case VerbInit:
		var a InitArgs
		if a, err = ParseInitArgs(args); err == nil {
			got, argv = a, a.Argv()
			again, err = ParseInitArgs(argv[1:])
		}
	case VerbRun:
		var a RunArgs
		if a, err = ParseRunArgs(args); err == nil {
			got, argv = a, a.Argv()
			again, err = ParseRunArgs(argv[1:])
		}
	case VerbSignal:
		var a SignalArgs
		if a, err = ParseSignalArgs(args); err == nil {
			got, argv = a, a.Argv()
			again, err = ParseSignalArgs(argv[1:])
		}
	case VerbDrain:
		var a DrainArgs
		if a, err = ParseDrainArgs(args); err == nil {
			got, argv = a, a.Argv()
			again, err = ParseDrainArgs(argv[1:])
		}
	case VerbStatus:
		var a StatusArgs
		if a, err = ParseStatusArgs(args); err == nil {
			got, argv = a, a.Argv()
			again, err = ParseStatusArgs(argv[1:])
		}
	case VerbFS:
		var a FSArgs
		if a, err = ParseFSArgs(args); err == nil {
			got, argv = a, a.Argv()
			again, err = ParseFSArgs(argv[1:])
		}
	default:
		return
	}
	if got == nil {
		return // did not parse
	}
	if err != nil {
		t.Fatalf("%s %q parsed as %+v, whose argv %q does not parse: %v", verb, args, got, argv, err)
	}
	if argv[0] != verb {
		t.Fatalf("%s: argv %q does not start with the verb", verb, argv)
	}
	if diff := cmp.Diff(got, again, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("%s %q: argv %q parses back differently (-first +again):\n%s", verb, args, argv, diff)
	}
}

func TestArgvRoundTrip(t *testing.T) {
	for _, argv := range [][]string{
		InitArgs{IdleTTL: time.Second, MaxLifetime: time.Hour, Disk: 1, Target: "s/a", Spec: "h"}.Argv(),
		InitArgs{Target: "s", Spec: "h", ServeStdin: true}.Argv(),
		RunArgs{Token: "t", Timeout: time.Minute, MaxOutput: 9, Workdir: "/w", Interps: []string{"a", "b"}, CodeExt: ".py", CodeSum: strings.Repeat("0f", 32), Args: []string{"--", "-x", ""}}.Argv(),
		RunArgs{NoCode: true, Timeout: 1, MaxOutput: 1, Interps: []string{"sh"}}.Argv(),
		RunArgs{Timeout: 1, MaxOutput: 1, Interps: []string{"node"}, CodeExt: ".js", Kernel: KernelNode, KernelReset: true}.Argv(),
		RunArgs{Timeout: 1, MaxOutput: 1, Interps: []string{"awk"}, InterpArgs: []string{"-f", "", "--", "a,b"}, CodeExt: ".awk", Args: []string{"x"}}.Argv(),
		SignalArgs{Token: "-t"}.Argv(),
		DrainArgs{Holder: "h", Undo: true}.Argv(),
		StatusArgs{}.Argv(),
		StatusArgs{Newest: true, Dirs: []string{"-x", "--", "/v"}}.Argv(),
		FSArgs{Args: []string{"ls", "--target"}}.Argv(),
		FSArgs{Target: "--target", Args: []string{"--target", "x"}}.Argv(),
	} {
		roundTrip(t, argv[0], argv[1:])
	}
}

// FuzzParseArgv: no command line makes a parser panic, and whatever parses
// is rebuilt by Argv to the same value.
func FuzzParseArgv(f *testing.F) {
	for _, argv := range [][]string{
		InitArgs{IdleTTL: time.Second, Disk: 1, Target: "s/a", Spec: "h"}.Argv(),
		RunArgs{Token: "t", Timeout: time.Minute, MaxOutput: 9, Interps: []string{"a"}, CodeExt: ".py", Args: []string{"x"}}.Argv(),
		RunArgs{Timeout: time.Minute, MaxOutput: 9, Interps: []string{"a"}, CodeSum: strings.Repeat("a9", 32)}.Argv(),
		RunArgs{Timeout: time.Second, MaxOutput: 1, Interps: []string{"awk"}, InterpArgs: []string{"-f"}, Args: []string{"x"}}.Argv(),
		{VerbRun, "--interp", " a, ,b", "--code-ext", "py", "-timeout=1s", "--max-output=3", "--no-code", "x", "-y"},
		SignalArgs{Token: "t"}.Argv(),
		DrainArgs{Holder: "h", Undo: true}.Argv(),
		StatusArgs{Newest: true, Dirs: []string{"/v"}}.Argv(),
		FSArgs{Target: "s", Args: []string{"ls"}}.Argv(),
	} {
		f.Add(strings.Join(argv, "\x00"))
	}
	f.Fuzz(func(t *testing.T, in string) {
		argv := strings.Split(in, "\x00")
		roundTrip(t, argv[0], argv[1:])
	})
}
