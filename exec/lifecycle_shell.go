package exec

import (
	"context"
	"errors"
	"strings"
)

// errNotRunningYet makes withContainer start a container that exists but is
// not running (its message is what isNotRunning looks for).
var errNotRunningYet = errors.New("container is not running")

// Ensure makes the target's sandbox exist and run (creating or starting it as
// Run does) without running anything in it, and returns the container's name.
// `docker sandbox shell` then execs its shell into it.
func (m *Manager) Ensure(ctx context.Context, spec Spec) (string, Result, error) {
	name := spec.ContainerName()
	res, err := m.withContainer(ctx, &spec, func(name string) (bool, error) {
		c, err := m.Engine.ContainerInspect(ctx, name)
		if err != nil {
			return false, err
		}
		if c.State == nil || !c.State.Running || c.State.Paused {
			return false, errNotRunningYet
		}
		return true, nil
	})
	return name, res, err
}

// execNotStarted reports that the engine refused to start an exec (409: its
// container is paused, by a stop or rm checking that it is idle, or not
// running; 404: gone; or, after the attach, its reason in the stream that
// the container is stopped or going). The exec's program never ran, so the call can create
// a new exec, once the container runs again or, gone, is created anew.
func execNotStarted(err error) bool {
	if err == nil {
		return false
	}
	var se *execStartError
	if errors.As(err, &se) {
		return se.containerGoing()
	}
	s := err.Error()
	return strings.Contains(s, "unable to upgrade to tcp, received 409") || strings.Contains(s, "unable to upgrade to tcp, received 404")
}

// IsGoneError reports an engine answer that means the container is not (or no
// longer) there to exec into: not found, not running, being removed, paused.
func IsGoneError(err error) bool { return err != nil && (isNotFound(err) || isNotRunning(err)) }
