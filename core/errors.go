package core

import (
	"errors"
	"fmt"
)

// Error codes used in the JSON error object ({"error":{"code":...}}). They are
// part of the stable schema documented in the README.
const (
	CodeBadFlag            = "bad_flag"
	CodeBadName            = "bad_name"
	CodeBadConfig          = "bad_config"
	CodeEngineUnreachable  = "engine_unreachable"
	CodeImageMissing       = "image_missing"
	CodeImageBuildFailed   = "image_build_failed"
	CodeBadImage           = "bad_image"
	CodeRuntimeUnavailable = "runtime_unavailable"
	// CodeEngineUnsupported: the engine cannot give a guarantee the
	// sandbox needs: a limit its cgroups lack (rootless on cgroup v1), a
	// setting it ignores or a feature it lacks (Podman's Docker-compatible
	// API); nothing was created or kept.
	CodeEngineUnsupported = "engine_unsupported"
	CodeLimitReached      = "limit_reached"
	CodeScopeBusy         = "scope_busy"
	CodeSandboxMismatch   = "sandbox_mismatch"
	CodeSandboxGone       = "sandbox_gone"
	// CodeWrapperLost: the exec's wrapper was killed or stopped (by code in
	// the sandbox) before it reported; every process of the run is killed.
	CodeWrapperLost = "wrapper_lost"
	// CodeStreamTampered: under a runtime that lets code of the sandbox
	// write into another run's streams (gVisor), the run's code on stdin
	// was not the code sent (nothing ran), or its output stream carried
	// bytes that were not its wrapper's frames (no status from it is
	// trusted).
	CodeStreamTampered = "stream_tampered"
	// CodeNotSandbox: the container found by the sandbox's name is not that
	// sandbox (its PID 1 is not the helper's init for that target).
	CodeNotSandbox = "not_a_sandbox"
	// CodeDiskLimit: the sandbox's data is over its --disk limit.
	CodeDiskLimit = "disk_limit"
	// CodeLifetimeReached: the sandbox reached its --max-lifetime during the
	// run; it was removed (its data stays).
	CodeLifetimeReached = "lifetime_reached"
	// CodeKernelDied: the kernel of an exec --kernel call ended during the
	// call; its state is lost and the next call starts a fresh one.
	CodeKernelDied         = "kernel_died"
	CodeNotFound           = "not_found"
	CodeFileNotFound       = "file_not_found"
	CodeInterpreterMissing = "interpreter_not_found"
	CodeInterpreterNoExec  = "interpreter_not_executable"
	CodeEngineError        = "engine_error"
	CodeInternal           = "internal"
	CodeNotImplemented     = "not_implemented"
	// Files and copies (docker sandbox cp, files); the helper's fs server
	// reports the same strings (files/fsproto).
	CodePathEscape       = "path_escape"
	CodeTooLarge         = "too_large"
	CodeIsDirectory      = "is_directory"
	CodeNotDirectory     = "not_directory"
	CodeBadArchive       = "bad_archive"
	CodePermissionDenied = "permission_denied"
	CodeUnsupportedFile  = "unsupported_file_type"
	CodeIOError          = "io_error"
	// Egress (the sidecar proxy).
	CodeEgressNotRunning  = "egress_not_running"
	CodeEgressMismatch    = "egress_mismatch"
	CodeEgressUnavailable = "egress_unavailable"
)

// Error is an error with a stable code and the exit status the CLI uses.
type Error struct {
	Code    string
	Message string
	Exit    int
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil && e.Message == "" {
		return e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with exit status 125.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Exit: 125}
}

// Wrap returns an *Error with exit status 125 that wraps err.
func Wrap(code string, err error, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if err != nil {
		msg += ": " + err.Error()
	}
	return &Error{Code: code, Message: msg, Exit: 125, Err: err}
}

// AsError returns err as an *Error, classifying unknown errors.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error(), Exit: 125, Err: err}
}
