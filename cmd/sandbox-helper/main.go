// Command sandbox-helper is the in-container helper of `docker sandbox`.
//
// It is a static program that depends on the standard library only (plus the
// project's stdlib-only packages: exec/inside, the in-container half of
// exec, which init, run, signal, drain and status dispatch to; exec/wire;
// files/fsserver for fs; egress/proxy for proxy), so that it runs unchanged in any
// image: the plugin mounts it read-only at /opt/sandbox/sandbox-helper in every
// sandbox container. It relies on nothing in the image besides the interpreter
// it is asked to run.
//
// Subcommands (their command lines are exec/wire's InitArgs, RunArgs,
// SignalArgs, DrainArgs, StatusArgs and FSArgs, which the plugin builds):
//
//	sandbox-helper init --idle-ttl DURATION [--spec HASH]
//
// is PID 1 of the sandbox container: it reaps zombies, exits once nothing but
// itself has run for longer than the idle TTL (0 means never), and on SIGTERM
// or SIGINT kills every other process and exits 0. --spec is only carried in
// argv, where `run` reads it back from /proc/1/cmdline.
//
//	sandbox-helper run --interp LIST --timeout DURATION --max-output BYTES
//	                   [--code-ext EXT] [--no-code] [--workdir DIR] [--spec HASH]
//	                   -- [USER ARGS...]
//
// is the exec wrapper. Unless --no-code is given, stdin starts with a code
// header (see wire.ReadCodeHeader) and the code; the rest of stdin is the
// program's stdin. Everything the program writes is framed onto stdout
// (wire.Stdout, wire.Stderr), followed by exactly one wire.Status frame; the
// wrapper then exits with the program's exit code.
//
//	sandbox-helper version
//
// prints the version (set with -ldflags "-X main.version=...").
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/docker-sandbox/docker-sandbox/exec/inside"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(realMain(os.Args[1:]))
}

// realMain dispatches to a subcommand and returns the process exit code.
func realMain(args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return 2
	}
	switch args[0] {
	case "init":
		return inside.Init(args[1:])
	case "run":
		return inside.Run(args[1:])
	case "signal":
		return inside.Signal(args[1:])
	case "fs":
		return runFS(args[1:])
	case "status":
		return inside.Status(args[1:])
	case "drain":
		return inside.Drain(args[1:], os.Stdout, os.Stderr)
	case "shell":
		return inside.Shell(args[1:])
	case "touch":
		return inside.Touch(args[1:])
	case "channel":
		return inside.Channel(args[1:])
	case "proxy":
		return runProxy(args[1:])
	case "version", "--version", "-version":
		fmt.Fprintln(os.Stdout, version)
		return 0
	case "help", "-h", "-help", "--help":
		usage(os.Stdout)
		return 0
	default:
		fmt.Fprintf(os.Stderr, "sandbox-helper: unknown subcommand %q (want init, run, signal, fs, status, drain, channel, shell, touch, proxy or version)\n", args[0])
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  sandbox-helper init --idle-ttl DURATION [--max-lifetime DURATION] [--disk BYTES] [--target SCOPE[/SESSION]] [--spec HASH]
  sandbox-helper drain [--holder ID] [--undo]
  sandbox-helper run --interp LIST --timeout DURATION --max-output BYTES [--code-ext EXT] [--no-code] [--workdir DIR] [--spec HASH] [--target SCOPE[/SESSION]] [--token TOKEN] -- [ARGS...]
  sandbox-helper signal --token TOKEN
  sandbox-helper status [--newest DIR...]
  sandbox-helper fs [--target SCOPE[/SESSION]] COMMAND [ARGS...]
  sandbox-helper shell [--] COMMAND [ARGS...]
  sandbox-helper touch
  sandbox-helper proxy [FLAGS] | proxy policy|networks|logs|state|wait ...
  sandbox-helper version
`)
}

// Every helper process is non-dumpable before it does anything else: code
// in the sandbox runs as the same uid and could otherwise ptrace it, read
// its memory or write into its /proc/PID/fd (the helper binary is also
// execute-only, which makes the kernel mark it so at execve already).
func init() { _ = inside.SetNonDumpable() }
