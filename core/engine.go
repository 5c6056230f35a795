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
