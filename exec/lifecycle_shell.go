package exec

import (
	"context"
	"errors"
	"strings"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// errNotRunningYet makes withContainer start a container that exists but is
// not running (its message is what isNotRunning looks for).
var errNotRunningYet = errors.New("container is not running")

// Ensure makes the target's sandbox exist and run (creating or starting it as
// Run does) without running anything in it, and returns its container's ID.
// `docker sandbox shell` then execs its shell into that container (by ID: not
// into whatever holds the name by then). A container of that name that is
// not the plugin's own sandbox of the target (OwnSandboxInspect: a
// look-alike) is an error, and is neither started nor used.
func (m *Manager) Ensure(ctx context.Context, spec Spec) (string, Result, error) {
	var id string
	res, err := m.withContainer(ctx, &spec, func(name string) (bool, error) {
		c, err := m.Engine.ContainerInspect(ctx, name)
		if err != nil {
			return false, err
		}
		if t, ok := OwnSandboxInspect(&c); !ok || t != spec.Target {
			return false, notOwnError(name, spec.Target)
		}
		if c.State == nil || !c.State.Running || c.State.Paused {
			return false, errNotRunningYet
		}
		id = c.ID
		return true, nil
	})
	return id, res, err
}

// notOwnError: a container holds the target's name and is not its sandbox.
func notOwnError(name string, t core.Target) *core.Error {
	return core.Errorf(core.CodeEngineError, "a container named %s exists and is not the docker sandbox of %s (its name, labels and mounts do not all say so): the plugin leaves it alone; remove or rename it, or use another scope", name, t)
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
	// The engine answers the start with an HTTP error (not the upgrade)
	// only before it started anything: 409 paused or not running, 404 gone,
	// 500 "is not running: Removal In Progress" while an rm removes it.
	s := err.Error()
	for _, code := range []string{"409", "404", "500"} {
		if strings.Contains(s, "unable to upgrade to tcp, received "+code) {
			return true
		}
	}
	return false
}

// IsGoneError reports an engine answer that means the container is not (or no
// longer) there to exec into: not found, not running, being removed, paused.
func IsGoneError(err error) bool { return err != nil && (isNotFound(err) || isNotRunning(err)) }
