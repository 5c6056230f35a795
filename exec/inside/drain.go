package inside

import (
	"fmt"
	"io"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// Draining: how `docker sandbox stop` and `rm` make sure that no program
// starts in a container they are about to remove, without pausing it (an
// exec that starts while the engine freezes the container can deadlock the
// engine's shim: the exec waits on the frozen cgroup, unpause waits on the
// exec). PID 1 decides, on its one control loop: every `run` registers with
// it for its life (see control.go), and `drain` asks it to refuse new
// registrations once none is registered. So either the drain sees the run,
// or the run is refused (before it reads any stdin, so the plugin can try it
// again elsewhere). Nothing in the sandbox's files takes part, so sandboxed
// code cannot hold a drain off or fake one.

// exitDrainBusy is drain's exit code when a run is registered.
const exitDrainBusy = 3

// Drain is `sandbox-helper drain [--holder ID] [--undo]`: exit 0 when
// the sandbox is drained (no run is registered, and none will be while the
// drain holds), exitDrainBusy when a run is registered; --undo lifts the
// holder's drain (a stop/rm that did not remove the container after all).
// A drain holds for drainHold at most, so that a stop/rm that died cannot
// leave the sandbox refusing every run. Exit 1 when PID 1 does not answer.
func Drain(args []string, stdout, stderr io.Writer) int {
	a, err := wire.ParseDrainArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-helper drain: %v\nusage: sandbox-helper drain [--holder ID] [--undo]\n", err)
		return 2
	}
	op := opDrain
	if a.Undo {
		op = opUndrain
	}
	rep, err := controlCall(ctlRequest{Op: op, Token: a.Holder})
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-helper drain: %v: %v\n", errNoInit, err)
		return 1
	}
	switch {
	case rep.OK && op == opUndrain:
		return 0
	case rep.OK:
		fmt.Fprintln(stdout, "drained")
		return 0
	case rep.Refused == "busy":
		fmt.Fprintln(stdout, "busy")
		return exitDrainBusy
	default:
		fmt.Fprintf(stderr, "sandbox-helper drain: refused: %s %s\n", rep.Refused, rep.Message)
		return 1
	}
}
