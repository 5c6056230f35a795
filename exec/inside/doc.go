// Package inside is the in-container half of exec: the code of
// sandbox-helper that runs in every sandbox container. Init is PID 1 (it
// reaps, keeps the control socket every run registers on, drains, ends the
// sandbox at its idle TTL, max lifetime or disk limit, owns the kernels of
// `exec --kernel`); Run is the exec wrapper (runs the code with its limits
// and frames its output, see package wire; with --kernel it runs the code
// in PID 1's kernel instead, kernel_run.go); Signal, Drain and Status ask PID 1 over the control
// socket. Their command lines are wire's InitArgs, RunArgs, SignalArgs,
// DrainArgs and StatusArgs; cmd/sandbox-helper only dispatches to them.
//
// Like the helper, it depends on the standard library and exec/wire only.
package inside

// CheckTarget reports, for a helper command meant for sandbox target
// (SCOPE[/SESSION]), a container that is not that sandbox (its PID 1 is not
// the helper's init for target): nil when it is.
func CheckTarget(target string) error {
	if st := checkPID1(target, ""); st != nil {
		return &targetError{st.Error}
	}
	return nil
}

type targetError struct{ msg string }

func (e *targetError) Error() string { return e.msg }
