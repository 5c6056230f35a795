// Package fsproto is what the plugin and the in-container helper's file
// server (`sandbox-helper fs ...`) agree on: the sandbox path rules, the error
// object the helper prints on stderr, the listing entry, and the commit
// framing of uploads. It depends on the standard library only, like the
// helper.
package fsproto

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// The two places of a sandbox that files may be read from or written to.
const (
	WorkspaceDir = "/opt/workspace"
	UserDir      = "/opt/user"
)

// Error codes. They are the same strings as the plugin's error codes
// (exec.Code*), so that a helper error reaches the user unchanged.
const (
	CodePathEscape       = "path_escape"
	CodeTooLarge         = "too_large"
	CodeNotFound         = "file_not_found"
	CodeIsDirectory      = "is_directory"
	CodeNotDirectory     = "not_directory"
	CodeBadArchive       = "bad_archive"
	CodePermissionDenied = "permission_denied"
	CodeUnsupportedFile  = "unsupported_file_type"
	CodeIOError          = "io_error"
	CodeBadFlag          = "bad_flag"
)

// Error is a file operation's failure with a stable code. The helper prints
// it as one JSON object on stderr: {"code":"path_escape","message":"..."}.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ParseError reads the error object from the helper's stderr: the last line
// that is a JSON object with a code. It returns nil when there is none.
func ParseError(stderr []byte) *Error {
	lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var e Error
		if json.Unmarshal([]byte(lines[i]), &e) == nil && e.Code != "" {
			return &e
		}
	}
	return nil
}

// escapeMessage is the text of os.Root's (unexported) error for a path that
// leads out of the root. TestIsEscape pins it.
const escapeMessage = "path escapes from parent"

// IsEscape reports whether err is os.Root refusing a path (or a symbolic
// link on it) that leads outside the root.
func IsEscape(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == escapeMessage {
			return true
		}
		var fe *Error
		if errors.As(e, &fe) && fe.Code == CodePathEscape {
			return true
		}
	}
	return false
}

// FromOS turns an error of a file operation on name into an *Error (name
// may be "" when the caller prefixes the message itself).
func FromOS(err error, name string) *Error {
	var fe *Error
	if errors.As(err, &fe) {
		return fe
	}
	pre := ""
	if name != "" {
		pre = name + ": "
	}
	if IsEscape(err) {
		return Errorf(CodePathEscape, "%sthe path leads outside the sandbox's workspace or user space, or the destination (through a symbolic link or ..): refused", pre)
	}
	var errno syscall.Errno
	errors.As(err, &errno)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Errorf(CodeNotFound, "%sno such file or folder", pre)
	case errno == syscall.ENOTDIR:
		return Errorf(CodeNotDirectory, "%sa part of the path is not a folder", pre)
	case errno == syscall.EISDIR:
		return Errorf(CodeIsDirectory, "%sis a folder", pre)
	case errno == syscall.ENOTEMPTY || errno == syscall.EEXIST:
		return Errorf(CodeIOError, "%salready exists (%v)", pre, errno)
	case errors.Is(err, fs.ErrPermission):
		return Errorf(CodePermissionDenied, "%spermission denied", pre)
	case errno == syscall.ENOSPC || errno == syscall.EDQUOT:
		return Errorf(CodeIOError, "%sno space left on the device", pre)
	case errno == syscall.ELOOP:
		// Inside a root, only a loop of links, or a link swapped in while
		// the path was in use, gets here: refused like an escape.
		return Errorf(CodePathEscape, "%stoo many levels of symbolic links (a loop, or a link swapped in while the path was in use): refused", pre)
	}
	return Errorf(CodeIOError, "%s%v", pre, unwrapPath(err))
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// Resolve applies the sandbox path rules: a relative p is under
// /opt/workspace, an absolute one must lie under /opt/workspace or /opt/user
// (after removing "." and ".." lexically). It returns the space's folder
// (WorkspaceDir or UserDir) and the slash-separated path inside it ("." for
// the folder itself). A NUL byte or a path outside both is a path_escape
// error. Symbolic links are not resolved here: the helper opens the path
// through os.Root on the space, which refuses links that lead out.
func Resolve(p string) (space, rel string, err error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", "", Errorf(CodePathEscape, "invalid path %q: it contains a NUL byte", p)
	}
	abs := p
	if !path.IsAbs(abs) {
		abs = path.Join(WorkspaceDir, abs)
	}
	abs = path.Clean(abs)
	for _, dir := range []string{WorkspaceDir, UserDir} {
		if abs == dir {
			return dir, ".", nil
		}
		if strings.HasPrefix(abs, dir+"/") {
			return dir, abs[len(dir)+1:], nil
		}
	}
	return "", "", Errorf(CodePathEscape, "path %q is outside the sandbox's files: it must lie under %s (relative paths are taken from there) or %s", p, WorkspaceDir, UserDir)
}

// Entry is one line of `fs ls` and one element of `files ls --format json`.
// JSON strings hold UTF-8 only: a name or link target that is not valid
// UTF-8 shows U+FFFD in place of its bad bytes in Name or LinkTarget, and
// is given exactly (base64 in JSON) in NameBytes or LinkTargetBytes, which
// are left out otherwise.
type Entry struct {
	Name            string    `json:"name"`
	Type            string    `json:"type"`
	Size            int64     `json:"size"`
	Mode            string    `json:"mode"`
	ModTime         time.Time `json:"mod_time"`
	LinkTarget      string    `json:"link_target"`
	NameBytes       []byte    `json:"name_bytes,omitempty"`
	LinkTargetBytes []byte    `json:"link_target_bytes,omitempty"`
}

// Entry types.
const (
	TypeFile        = "file"
	TypeDir         = "dir"
	TypeSymlink     = "symlink"
	TypeFIFO        = "fifo"
	TypeSocket      = "socket"
	TypeCharDevice  = "char-device"
	TypeBlockDevice = "block-device"
	TypeOther       = "other"
)

// TypeOf names the type of a file mode.
func TypeOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return TypeFile
	case m.IsDir():
		return TypeDir
	case m&fs.ModeSymlink != 0:
		return TypeSymlink
	case m&fs.ModeNamedPipe != 0:
		return TypeFIFO
	case m&fs.ModeSocket != 0:
		return TypeSocket
	case m&fs.ModeCharDevice != 0:
		return TypeCharDevice
	case m&fs.ModeDevice != 0:
		return TypeBlockDevice
	}
	return TypeOther
}

// ModeString is the octal permission string of m, with the setuid, setgid
// and sticky bits as the leading digit when set: "0644", "4755".
func ModeString(m fs.FileMode) string {
	v := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return fmt.Sprintf("%04o", v)
}

// NewEntry describes fi (from Lstat) under name.
func NewEntry(name string, fi fs.FileInfo, linkTarget string) Entry {
	e := Entry{Name: name, Type: TypeOf(fi.Mode()), Size: fi.Size(), Mode: ModeString(fi.Mode()),
		ModTime: fi.ModTime().UTC(), LinkTarget: linkTarget}
	if !utf8.ValidString(name) {
		e.NameBytes = []byte(name)
	}
	if !utf8.ValidString(linkTarget) {
		e.LinkTargetBytes = []byte(linkTarget)
	}
	return e
}

// PutResult is what `fs put` prints on stdout.
type PutResult struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// RmResult is what `fs rm` prints on stdout.
type RmResult struct {
	Path    string `json:"path"`
	Removed bool   `json:"removed"`
}
