//go:build unix

// Package fsserver is the helper's confined file server, `sandbox-helper fs
// ...`: it lists, reads, writes, deletes and archives paths of a sandbox,
// always through an os.Root opened on /opt/workspace or /opt/user (chosen
// from the path), walked one folder at a time with each folder checked
// (tarsafe.Walk), so that a symbolic link planted by sandboxed code, at any
// depth of a path and at any moment, cannot lead an operation outside
// them, under gVisor too: such a path is refused with path_escape. It
// depends on the standard library only, like the helper.
//
// Usage (PATH as fsproto.Resolve takes it; data on stdin/stdout, raw; an
// error is one JSON object {"code":...,"message":...} on stderr and exit
// status 1, 2 for a bad invocation):
//
//	fs ls [-r] [--watch-stdin] PATH          JSON lines of fsproto.Entry
//	fs cat [--watch-stdin] PATH              the file's bytes
//	fs put [--framed] [--mode OCTAL] PATH    stdin to PATH, atomically; prints fsproto.PutResult
//	fs rm [-r] [-f] PATH                     prints fsproto.RmResult
//	fs tar-out [--watch-stdin] [--dir] [LIMITS] PATH         a tar archive (tarsafe.Create)
//	fs tar-in [--framed] [--raw] [--contents] [--dir] [--keep-mode] [--strict] [LIMITS] PATH
//	                                         extracts stdin (tarsafe.Extract); prints tarsafe.Result
//
// LIMITS are --max-size BYTES, --max-file-size BYTES, --max-entries N.
// --framed: stdin is framed (fsproto.CommitReader); an upload that ends
// before its commit leaves nothing. --watch-stdin: the plugin keeps stdin
// open while it reads; when it closes (the plugin stopped reading, or died),
// the command stops at once.
//
// It builds on Unix only: the helper runs on Linux.
package fsserver

import (
	"bufio"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
)

// Exit statuses.
const (
	ExitOK      = 0
	ExitFailed  = 1
	ExitUsage   = 2
	ExitAborted = 3
)

// Server runs one fs command.
type Server struct {
	// Workspace and User are where /opt/workspace and /opt/user are
	// (tests point them elsewhere).
	Workspace, User string
	Stdin           io.Reader
	Stdout, Stderr  io.Writer
	// Umask is taken off modes of extracted files without --keep-mode.
	Umask fs.FileMode
	// Exit ends the process (--watch-stdin); nil means os.Exit.
	Exit func(int)
}

// Default returns a server on the real places and standard streams.
func Default() *Server {
	return &Server{Workspace: fsproto.WorkspaceDir, User: fsproto.UserDir, Stdin: os.Stdin,
		Stdout: os.Stdout, Stderr: os.Stderr, Umask: 0o022}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// Run runs `fs ARGS` and returns the exit status.
func (s *Server) Run(args []string) int {
	err := s.run(args)
	if err == nil {
		return ExitOK
	}
	var ue usageError
	code, status := fsproto.CodeBadFlag, ExitUsage
	msg := err.Error()
	if !errors.As(err, &ue) {
		fe := fsproto.FromOS(err, "")
		code, msg, status = fe.Code, fe.Message, ExitFailed
	}
	enc := json.NewEncoder(s.Stderr)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(fsproto.Error{Code: code, Message: msg})
	return status
}

func (s *Server) run(args []string) error {
	if len(args) == 0 {
		return usageError{"fs: missing command (ls, cat, put, rm, tar-out, tar-in)"}
	}
	cmd, args := args[0], args[1:]
	fl := flag.NewFlagSet("fs "+cmd, flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	var (
		recursive  = new(bool)
		force      = new(bool)
		watch      = new(bool)
		framed     = new(bool)
		mode       = new(string)
		raw        = new(bool)
		contents   = new(bool)
		mustDir    = new(bool)
		keepMode   = new(bool)
		strict     = new(bool)
		maxSize    = new(int64)
		maxFile    = new(int64)
		maxEntries = new(int64)
	)
	limits := func() {
		fl.Int64Var(maxSize, "max-size", 0, "")
		fl.Int64Var(maxFile, "max-file-size", 0, "")
		fl.Int64Var(maxEntries, "max-entries", 0, "")
	}
	switch cmd {
	case "ls", "cat", "tar-out":
		fl.BoolVar(watch, "watch-stdin", false, "")
	}
	switch cmd {
	case "ls":
		fl.BoolVar(recursive, "r", false, "")
	case "cat":
	case "put":
		fl.BoolVar(framed, "framed", false, "")
		fl.StringVar(mode, "mode", "", "")
	case "rm":
		fl.BoolVar(recursive, "r", false, "")
		fl.BoolVar(force, "f", false, "")
	case "tar-out":
		fl.BoolVar(mustDir, "dir", false, "")
		limits()
	case "tar-in":
		fl.BoolVar(framed, "framed", false, "")
		fl.BoolVar(raw, "raw", false, "")
		fl.BoolVar(contents, "contents", false, "")
		fl.BoolVar(mustDir, "dir", false, "")
		fl.BoolVar(keepMode, "keep-mode", false, "")
		fl.BoolVar(strict, "strict", false, "")
		limits()
	default:
		return usageError{fmt.Sprintf("fs: unknown command %q (want ls, cat, put, rm, tar-out or tar-in)", cmd)}
	}
	if err := fl.Parse(args); err != nil {
		return usageError{fmt.Sprintf("fs %s: %v", cmd, err)}
	}
	if fl.NArg() != 1 {
		return usageError{fmt.Sprintf("fs %s: want exactly one PATH, got %d arguments", cmd, fl.NArg())}
	}
	p := fl.Arg(0)
	root, rel, space, err := s.open(p)
	if err != nil {
		return err
	}
	defer root.Close()
	if *watch {
		go func() {
			_, _ = io.Copy(io.Discard, s.Stdin)
			exit := s.Exit
			if exit == nil {
				exit = os.Exit
			}
			exit(ExitAborted)
		}()
	}
	lim := tarsafe.Limits{MaxBytes: *maxSize, MaxEntryBytes: *maxFile, MaxEntries: *maxEntries}
	in := s.Stdin
	if *framed {
		in = fsproto.NewCommitReader(bufio.NewReaderSize(s.Stdin, 256<<10))
	}
	switch cmd {
	case "ls":
		return s.ls(root, rel, p, *recursive)
	case "cat":
		return s.cat(root, rel, p)
	case "put":
		return s.put(root, rel, p, in, *mode)
	case "rm":
		return s.rm(root, rel, p, *recursive, *force)
	case "tar-out":
		return tarOut(s.Stdout, root, space, rel, p, lim, *mustDir, nil)
	default: // tar-in
		res, err := tarsafe.Extract(root, tarsafe.Dest{Path: rel, MustBeDir: *mustDir, Contents: *contents, Raw: *raw, Display: display(p)}, in,
			tarsafe.Options{Limits: lim, KeepMode: *keepMode, Umask: s.Umask, Strict: *strict})
		if err != nil {
			return err
		}
		return json.NewEncoder(s.Stdout).Encode(res)
	}
}

// TarOut writes the archive of the sandbox path p as `fs tar-out` does
// (tarsafe.Create; the path's own entry first, named after it), reading
// from space, the folder that is p's space (/opt/workspace or /opt/user,
// or where the engine keeps it: a copy out of a sandbox on a local engine
// reads the volume there, see files.LocalReader).
//
// access (nil in the helper) refuses what the sandbox's user could not
// read, for a reader with more rights (tarsafe.Access).
func TarOut(w io.Writer, space *os.Root, p string, lim tarsafe.Limits, mustBeDir bool, access tarsafe.Access) error {
	sp, rel, err := fsproto.Resolve(p)
	if err != nil {
		return err
	}
	if err := checkWay(space, rel, p); err != nil {
		return err
	}
	return tarOut(w, space, sp, rel, p, lim, mustBeDir, access)
}

// tarOut archives rel of root, the folder of the space sp.
func tarOut(w io.Writer, root *os.Root, sp, rel, p string, lim tarsafe.Limits, mustBeDir bool, access tarsafe.Access) error {
	top := ""
	if rel == "." {
		top = path.Base(sp)
	}
	// Create buffers (and flushes) its own writes: a second buffer here
	// would copy every byte once more on its way to the exec's pipe.
	_, err := tarsafe.Create(w, root, rel, tarsafe.CreateOptions{Limits: lim, TopName: top, MustBeDir: mustBeDir, Display: display(p), Access: access})
	return err
}

// open applies the path rules and opens the root of the path's space.
func (s *Server) open(p string) (*os.Root, string, string, error) {
	space, rel, err := fsproto.Resolve(p)
	if err != nil {
		return nil, "", "", err
	}
	dir := s.Workspace
	if space == fsproto.UserDir {
		dir = s.User
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, "", "", fsproto.FromOS(err, space)
	}
	if err := checkWay(root, rel, p); err != nil {
		root.Close()
		return nil, "", "", err
	}
	return root, rel, space, nil
}

// checkWay refuses rel, with a message that names the folder, when a folder
// on its way is a symbolic link that leads outside the root. What enforces
// it is the walk of every command (tarsafe.Walk, OpenDir): os.Root alone
// refuses such a path on Linux's kernel, but not under gVisor, whose openat
// follows a link despite O_NOFOLLOW|O_DIRECTORY (README, runc vs runsc).
func checkWay(root *os.Root, rel, p string) error {
	for i := 0; i < len(rel); i++ {
		if rel[i] != '/' {
			continue
		}
		way := rel[:i]
		fi, err := root.Lstat(way)
		if err != nil {
			return nil // the operation reports it
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if _, err := root.Stat(way); fsproto.IsEscape(err) {
				return fsproto.Errorf(fsproto.CodePathEscape, "%s: %s on its way is a symbolic link that leads outside the sandbox's workspace or user space: refused", display(p), way)
			}
		}
	}
	return nil
}

// display is the sandbox path of rel in p's space, for messages.
func display(p string) string {
	space, rel, err := fsproto.Resolve(p)
	if err != nil {
		return p
	}
	if rel == "." {
		return space
	}
	return space + "/" + rel
}

// walk opens the folder that holds rel's last element, one folder at a
// time (tarsafe.Walk: under gVisor os.Root alone would follow a link on the
// way), and returns it with that element; with follow, a link as the last
// element is followed too (inside the root; one leading out is path_escape).
func walk(root *os.Root, rel, p string, follow bool) (*os.Root, string, error) {
	dir, n, err := tarsafe.Walk(root, rel, follow)
	if fsproto.IsEscape(err) && follow {
		return nil, "", fsproto.Errorf(fsproto.CodePathEscape, "%s is a symbolic link that leads outside the sandbox's workspace or user space: refused", display(p))
	}
	if err != nil {
		return nil, "", fsproto.FromOS(err, display(p))
	}
	return dir, n, nil
}

// checkLink refuses rel when it is a symbolic link that leads outside the
// root, and returns what rel is (not followed) and, open, the folder that
// holds what rel leads to with its name there (rel itself when it is no
// link); other errors are left to the operation.
func checkLink(root *os.Root, rel, p string) (fs.FileInfo, *os.Root, string, error) {
	dir, n, err := walk(root, rel, p, false)
	if err != nil {
		return nil, nil, "", err
	}
	fi, err := dir.Lstat(n)
	if err != nil {
		dir.Close()
		return nil, nil, "", fsproto.FromOS(err, display(p))
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return fi, dir, n, nil
	}
	dir.Close()
	dir, n, err = walk(root, rel, p, true)
	if err != nil {
		return nil, nil, "", err
	}
	return fi, dir, n, nil
}

func (s *Server) ls(root *os.Root, rel, p string, recursive bool) error {
	fi, at, n, err := checkLink(root, rel, p)
	if err != nil {
		return err
	}
	defer at.Close()
	w := bufio.NewWriterSize(s.Stdout, 64<<10)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	isDir := fi.IsDir()
	if fi.Mode()&fs.ModeSymlink != 0 {
		if st, err := at.Lstat(n); err == nil && st.IsDir() {
			isDir = true
		}
	}
	if !isDir {
		target := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ = tarsafe.ReadlinkIn(root, rel)
		}
		if err := enc.Encode(fsproto.NewEntry(path.Base(rel), fi, target)); err != nil {
			return err
		}
		return w.Flush()
	}
	dir := at
	if n != "." {
		if dir, err = tarsafe.OpenDir(at, n); err != nil {
			return fsproto.FromOS(err, display(p))
		}
		defer dir.Close()
	}
	if err := listDir(dir, "", recursive, enc, 0); err != nil {
		return err
	}
	return w.Flush()
}

func listDir(dir *os.Root, prefix string, recursive bool, enc *json.Encoder, depth int) error {
	if depth > 512 {
		return fsproto.Errorf(fsproto.CodeTooLarge, "%s: folders nested deeper than 512 levels", prefix)
	}
	f, err := dir.Open(".")
	if err != nil {
		return fsproto.FromOS(err, prefix)
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return fsproto.FromOS(err, prefix)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	for _, e := range ents {
		name := prefix + e.Name()
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fsproto.FromOS(err, name)
		}
		target := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ = dir.Readlink(e.Name())
		}
		if err := enc.Encode(fsproto.NewEntry(name, fi, target)); err != nil {
			return err
		}
		if recursive && fi.IsDir() {
			sub, err := tarsafe.OpenDir(dir, e.Name())
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fsproto.FromOS(err, name)
			}
			err = listDir(sub, name+"/", true, enc, depth+1)
			sub.Close()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Server) cat(root *os.Root, rel, p string) error {
	_, dir, n, err := checkLink(root, rel, p)
	if err != nil {
		return err
	}
	defer dir.Close()
	if n == "." {
		return fsproto.Errorf(fsproto.CodeIsDirectory, "%s is a folder: list it with `files ls`", display(p))
	}
	f, err := tarsafe.OpenFile(dir, n, os.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		return fsproto.FromOS(err, display(p))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fsproto.FromOS(err, display(p))
	}
	if fi.IsDir() {
		return fsproto.Errorf(fsproto.CodeIsDirectory, "%s is a folder: list it with `files ls`", display(p))
	}
	if !fi.Mode().IsRegular() {
		return fsproto.Errorf(fsproto.CodeUnsupportedFile, "%s is a %s, not a file", display(p), fsproto.TypeOf(fi.Mode()))
	}
	buf := make([]byte, 1<<20)
	if _, err := io.CopyBuffer(struct{ io.Writer }{s.Stdout}, f, buf); err != nil {
		return fsproto.FromOS(err, display(p))
	}
	return nil
}

func (s *Server) put(root *os.Root, rel, p string, in io.Reader, modeFlag string) (err error) {
	if rel == "." {
		return fsproto.Errorf(fsproto.CodeIsDirectory, "%s is a folder", display(p))
	}
	var mode fs.FileMode = 0o644
	explicit := modeFlag != ""
	if explicit {
		m, perr := strconv.ParseUint(modeFlag, 8, 32)
		if perr != nil || m > 0o777 {
			return usageError{fmt.Sprintf("fs put: invalid --mode %q: want octal permission bits such as 0644 (setuid, setgid and sticky bits are not allowed)", modeFlag)}
		}
		mode = fs.FileMode(m)
	}
	dirName, base := path.Split(rel)
	dirName = strings.TrimSuffix(dirName, "/")
	if dirName == "" {
		dirName = "."
	}
	if dirName != "." {
		// Created one folder at a time, each checked (tarsafe.OpenPath).
		d, err := tarsafe.OpenPath(root, dirName, true)
		if err != nil {
			return fsproto.FromOS(err, display(p))
		}
		d.Close()
	}
	mutating("put", dirName)
	dir, err := tarsafe.OpenPath(root, dirName, false)
	if err != nil {
		return fsproto.FromOS(err, display(p))
	}
	defer dir.Close()
	if fi, err := dir.Lstat(base); err == nil {
		switch {
		case fi.IsDir():
			return fsproto.Errorf(fsproto.CodeIsDirectory, "%s is a folder: put writes files", display(p))
		case fi.Mode()&fs.ModeSymlink != 0:
			if _, err := dir.Stat(base); fsproto.IsEscape(err) {
				return fsproto.Errorf(fsproto.CodePathEscape, "%s is a symbolic link that leads outside the sandbox's workspace or user space: refused", display(p))
			}
		case fi.Mode().IsRegular() && !explicit:
			mode = fi.Mode().Perm()
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fsproto.FromOS(err, display(p))
	}
	tmp := tarsafeTemp()
	f, err := dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fsproto.FromOS(err, display(p))
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			_ = dir.Remove(tmp)
		}
	}()
	buf := make([]byte, 1<<20)
	n, err := io.CopyBuffer(struct{ io.Writer }{f}, in, buf)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return fsproto.FromOS(err, display(p))
		}
		return fsproto.Errorf(fsproto.CodeBadArchive, "%s was not written: %v", display(p), err)
	}
	if err := f.Chmod(mode); err != nil {
		return fsproto.FromOS(err, display(p))
	}
	if err := f.Sync(); err != nil {
		return fsproto.FromOS(err, display(p))
	}
	if err := f.Close(); err != nil {
		return fsproto.FromOS(err, display(p))
	}
	mutating("put-rename", rel)
	if err := dir.Rename(tmp, base); err != nil {
		_ = dir.Remove(tmp)
		done = true
		return fsproto.FromOS(err, display(p))
	}
	done = true
	return json.NewEncoder(s.Stdout).Encode(fsproto.PutResult{Path: display(p), Bytes: n})
}

// testHookMutate, when set (by tests only), runs after an operation checked
// its path and before it changes something through it: the window in
// which sandboxed code can swap a folder of the path for a link.
var testHookMutate func(op, rel string)

func mutating(op, rel string) {
	if testHookMutate != nil {
		testHookMutate(op, rel)
	}
}

func tarsafeTemp() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%sput-%x", tarsafe.StagingPrefix, b)
}

func (s *Server) rm(root *os.Root, rel, p string, recursive, force bool) error {
	if rel == "." {
		return fsproto.Errorf(fsproto.CodeBadFlag, "%s cannot be removed itself: remove what it holds", display(p))
	}
	done := func(removed bool) error {
		return json.NewEncoder(s.Stdout).Encode(fsproto.RmResult{Path: display(p), Removed: removed})
	}
	dir, n, err := tarsafe.Walk(root, rel, false)
	if err != nil {
		if force && errors.Is(err, fs.ErrNotExist) {
			return done(false)
		}
		return fsproto.FromOS(err, display(p))
	}
	defer dir.Close()
	fi, err := dir.Lstat(n)
	if err != nil {
		if force && errors.Is(err, fs.ErrNotExist) {
			return done(false)
		}
		return fsproto.FromOS(err, display(p))
	}
	if fi.IsDir() {
		if !recursive {
			return fsproto.Errorf(fsproto.CodeIsDirectory, "%s is a folder: remove it with -r", display(p))
		}
		mutating("rm -r", rel)
		if err := tarsafe.RemoveAll(dir, n); err != nil {
			return fsproto.FromOS(err, display(p))
		}
		return done(true)
	}
	// A file, or a symbolic link itself (never what it leads to).
	mutating("rm", rel)
	if err := dir.Remove(n); err != nil {
		return fsproto.FromOS(err, display(p))
	}
	return done(true)
}
