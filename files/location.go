package files

import (
	"errors"
	"path/filepath"
	"strings"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
)

// Kind is where a location is.
type Kind int

// Kinds of locations.
const (
	Host Kind = iota
	Sandbox
	Stdio // "-": a tar stream on stdin or stdout
)

// Location is one side of a copy, or the path of a files command.
type Location struct {
	Kind   Kind
	Target core.Target // Sandbox
	// Path is the host path as given (Host), or the absolute, cleaned path
	// inside the sandbox (Sandbox).
	Path string
	// Arg is the argument as the user wrote it.
	Arg string
	// DirSuffix: the path ended in "/" (or "/."): it names a folder.
	DirSuffix bool
	// Contents: the path ended in "/." (or is "."): a copy takes what the
	// folder holds, not the folder.
	Contents bool
}

func (l Location) String() string { return l.Arg }

// ParseLocation parses a cp argument: "-", a host path, or
// SCOPE[/SESSION]:PATH. An argument is a host path when it starts with "/"
// or "." (or a Windows drive), or has no ":" — as with docker cp.
func ParseLocation(arg string) (Location, error) {
	if arg == "-" {
		return Location{Kind: Stdio, Arg: arg}, nil
	}
	if arg == "" {
		return Location{}, core.Errorf(core.CodeBadFlag, "empty path: give a host path, - or SCOPE[/SESSION]:PATH")
	}
	i := strings.IndexByte(arg, ':')
	if i < 0 || arg[0] == '/' || arg[0] == '.' || filepath.VolumeName(arg) != "" {
		if strings.IndexByte(arg, 0) >= 0 {
			return Location{}, core.Errorf(core.CodePathEscape, "invalid path %q: it contains a NUL byte", arg)
		}
		l := Location{Kind: Host, Path: arg, Arg: arg}
		l.DirSuffix = strings.HasSuffix(arg, "/") || strings.HasSuffix(arg, string(filepath.Separator)) || hasDotSuffix(arg)
		l.Contents = hasDotSuffix(arg)
		return l, nil
	}
	t, err := core.ParseTarget(arg[:i])
	if err != nil {
		return Location{}, err
	}
	return SandboxLocation(t, arg[i+1:], arg)
}

// ParseFilesLocation parses the PATH of a files command: SCOPE[/SESSION]:PATH
// unless useDefault (--scope or --session given), or the argument has no
// ":", in which case it is a path in def.
func ParseFilesLocation(arg string, def core.Target, useDefault bool) (Location, error) {
	if !useDefault {
		if i := strings.IndexByte(arg, ':'); i >= 0 {
			t, err := core.ParseTarget(arg[:i])
			if err != nil {
				return Location{}, err
			}
			return SandboxLocation(t, arg[i+1:], arg)
		}
	}
	if err := def.Validate(); err != nil {
		return Location{}, err
	}
	return SandboxLocation(def, arg, arg)
}

// SandboxLocation applies the sandbox path rules to p: a relative path is
// under /opt/workspace, an absolute one must lie under /opt/workspace or
// /opt/user; a NUL byte or a path outside both is path_escape (exit 125).
func SandboxLocation(t core.Target, p, arg string) (Location, error) {
	space, rel, err := fsproto.Resolve(p)
	if err != nil {
		return Location{}, toExec(err)
	}
	abs := space
	if rel != "." {
		abs += "/" + rel
	}
	l := Location{Kind: Sandbox, Target: t, Path: abs, Arg: arg}
	l.Contents = p == "" || p == "." || hasDotSuffix(p)
	l.DirSuffix = l.Contents || strings.HasSuffix(p, "/")
	return l, nil
}

func hasDotSuffix(p string) bool {
	return p == "." || strings.HasSuffix(p, "/.") || (filepath.Separator != '/' && strings.HasSuffix(p, string(filepath.Separator)+"."))
}

// toExec turns a file server error into the CLI's error (exit 125).
func toExec(err error) error {
	if err == nil {
		return nil
	}
	var se *core.Error
	if errors.As(err, &se) {
		return se
	}
	var fe *fsproto.Error
	if errors.As(err, &fe) {
		code := fe.Code
		if code == fsproto.CodeBadFlag {
			code = core.CodeBadFlag
		}
		return &core.Error{Code: code, Message: fe.Message, Exit: 125, Err: err}
	}
	return core.AsError(err)
}
