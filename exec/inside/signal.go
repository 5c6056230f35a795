package inside

import (
	"fmt"
	"os"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// Signal implements `sandbox-helper signal --token TOKEN`: it asks PID 1
// to tell the registered `run` wrapper started with that token to stop its
// program (its whole process group) and report. The plugin uses it when the
// user interrupts an exec: closing the exec's stream does not end it. The
// request goes through PID 1 because wrappers ignore the signals that
// sandboxed code, running as the same user, could send them.
// It exits 0 when a wrapper was told, 1 when none carries the token.
func Signal(args []string) int {
	a, err := wire.ParseSignalArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-helper signal: --token TOKEN is required")
		return 2
	}
	rep, err := controlCall(ctlRequest{Op: opSignal, Token: a.Token})
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-helper signal: %v: %v\n", errNoInit, err)
		return 1
	}
	if !rep.OK {
		return 1
	}
	return 0
}
