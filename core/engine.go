package core

import (
	"errors"
	"net"
	"strings"
)

// EngineError classifies an error from the engine: unreachable engines get
// their own code so scripts can tell them from bad input.
func EngineError(err error, what string) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if IsUnreachable(err) {
		return Wrap(CodeEngineUnreachable, err, "cannot reach the Docker Engine (check `docker context ls`, DOCKER_HOST, or that the engine runs)")
	}
	return Wrap(CodeEngineError, err, "%s", what)
}

// IsUnreachable tells a connection failure from an API error.
func IsUnreachable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "Cannot connect to the Docker daemon") || strings.Contains(s, "connect: no such file or directory") ||
		strings.Contains(s, "connection refused")
}

// NativeRuntime reports whether name, a container's runtime as the engine
// reports it (HostConfig.Runtime: the engine fills in its default one),
// runs the container's processes on the host's kernel as runc does, where
// code of the sandbox cannot open or trace the helper's processes and so
// cannot write into a run's stream. Any other name (runsc, kata, or a name
// of the engine's configuration that may stand for either) gets the checks
// for other runtimes: the run's exit code asked of the engine, no exec
// channel. "oci" is what Podman's API calls its configured runtime (crun
// or runc by default).
func NativeRuntime(name string) bool {
	switch name {
	case "runc", "crun", "io.containerd.runc.v2", "io.containerd.runtime.v1.linux", "oci":
		return true
	}
	return false
}
