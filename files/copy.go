package files

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
)

// Runner runs the helper in a sandbox, creating or starting the sandbox when
// needed (exec.Manager).
type Runner interface {
	HelperExec(ctx context.Context, spec sbexec.Spec, rr sbexec.RawRequest) (int, sbexec.Result, error)
}

// Copier moves files between the host and sandboxes.
type Copier struct {
	Runner Runner
	// Spec is the spec of a sandbox that has to be created for a copy.
	Spec func(core.Target) sbexec.Spec
	// Limits cap every copy (on the receiving side, and early on the
	// sending side).
	Limits tarsafe.Limits
	// KeepMode keeps permission bits exactly (cp -a) instead of taking the
	// umask off; setuid, setgid and sticky bits are never kept.
	KeepMode bool
	// Umask of the host side (Umask()).
	Umask fs.FileMode
	// Strict refuses a copy that holds a symbolic link leading outside the
	// copied tree (path_escape); by default such a link is not written and
	// is reported in the result's Skipped, and the rest of the copy
	// completes. It applies in every direction.
	Strict bool
	// Direct are the routes a sandbox -> host copy tries, in order, before
	// it streams through the helper: the first one that applies does the
	// copy. LocalReader reads the sandbox's volume on this machine
	// (copy_local), exec.FrozenReader the engine's archive endpoint while
	// the sandbox is paused (copy_frozen).
	Direct []DirectSource
}

// DirectSource hands consume the archive of path in t's sandbox (docker
// cp's layout: the path's own entry first; lim: the copy's limits) and
// reports ok; ok false: it did nothing (the next route is tried).
type DirectSource interface {
	ReadDirect(ctx context.Context, t core.Target, path string, mustBeDir bool, lim tarsafe.Limits, consume func(io.Reader) error) (ok bool, err error)
}

// errStopped tells a producer or the helper's stream that the other side
// stopped.
var errStopped = errors.New("the copy stopped")

// Copy copies src to dst with docker cp's rules (see package tarsafe):
// host -> sandbox, sandbox -> host, sandbox -> sandbox (streamed from one
// helper to the other, never stored), "-" -> sandbox (a tar stream on stdin,
// extracted into a folder) and sandbox -> "-" (a tar stream on stdout).
func (c *Copier) Copy(ctx context.Context, src, dst Location, stdin io.Reader, stdout io.Writer) (*tarsafe.Result, error) {
	res, err := c.copy(ctx, src, dst, stdin, stdout)
	return res, toExec(err)
}

func (c *Copier) copy(ctx context.Context, src, dst Location, stdin io.Reader, stdout io.Writer) (*tarsafe.Result, error) {
	switch {
	case src.Kind == Stdio && dst.Kind == Sandbox:
		flags := []string{"--raw"}
		if c.KeepMode {
			flags = append(flags, "--keep-mode")
		}
		if c.Strict {
			flags = append(flags, "--strict")
		}
		return c.toSandbox(ctx, dst, flags, func(w io.Writer) error {
			_, err := io.Copy(w, stdin)
			return err
		})
	case src.Kind == Host && dst.Kind == Sandbox:
		base, name, err := hostSource(src.Path)
		if err != nil {
			return nil, err
		}
		defer base.Close()
		return c.toSandbox(ctx, dst, c.inFlags(src, dst), func(w io.Writer) error {
			_, err := tarsafe.Create(w, base, name, tarsafe.CreateOptions{Limits: c.Limits, MustBeDir: src.DirSuffix, Display: src.Arg})
			return err
		})
	case src.Kind == Sandbox && dst.Kind == Sandbox:
		return c.toSandbox(ctx, dst, c.inFlags(src, dst), func(w io.Writer) error {
			return c.stream(ctx, src.Target, c.outArgs(src), w)
		})
	case src.Kind == Sandbox && dst.Kind == Host:
		base, rel, err := hostDest(dst.Path)
		if err != nil {
			return nil, err
		}
		defer base.Close()
		var res *tarsafe.Result
		extract := func(r io.Reader) error {
			var err error
			res, err = tarsafe.Extract(base, tarsafe.Dest{Path: rel, MustBeDir: dst.DirSuffix, Contents: src.Contents, Display: dst.Arg}, r,
				tarsafe.Options{Limits: c.Limits, KeepMode: c.KeepMode, Umask: c.Umask, Strict: c.Strict, Host: true})
			return err
		}
		for _, d := range c.Direct {
			if ok, err := d.ReadDirect(ctx, src.Target, src.Path, src.DirSuffix, c.Limits, extract); ok {
				return res, err
			}
			res = nil
		}
		err = c.fromSandbox(ctx, src.Target, c.outArgs(src), extract)
		return res, err
	case src.Kind == Sandbox && dst.Kind == Stdio:
		var res *tarsafe.Result
		err := c.fromSandbox(ctx, src.Target, c.outArgs(src), func(r io.Reader) error {
			var err error
			res, err = tarsafe.Filter(stdout, r, tarsafe.FilterOptions{Limits: c.Limits, Contents: src.Contents, Strict: c.Strict})
			return err
		})
		return res, err
	case src.Kind == Stdio && dst.Kind == Stdio:
		return nil, core.Errorf(core.CodeBadFlag, "SRC and DST cannot both be -")
	}
	return nil, core.Errorf(core.CodeBadFlag, "one of SRC and DST must be in a sandbox, as SCOPE[/SESSION]:PATH (got %q and %q)", src.Arg, dst.Arg)
}

func (c *Copier) limitArgs() []string {
	l := c.Limits.Norm()
	return []string{"--max-size", strconv.FormatInt(l.MaxBytes, 10), "--max-file-size", strconv.FormatInt(l.MaxEntryBytes, 10),
		"--max-entries", strconv.FormatInt(l.MaxEntries, 10)}
}

func (c *Copier) outArgs(src Location) []string {
	args := append([]string{"tar-out", "--watch-stdin"}, c.limitArgs()...)
	if src.DirSuffix {
		args = append(args, "--dir")
	}
	return append(args, "--", src.Path)
}

func (c *Copier) inFlags(src, dst Location) []string {
	var flags []string
	if c.KeepMode {
		flags = append(flags, "--keep-mode")
	}
	if c.Strict {
		flags = append(flags, "--strict")
	}
	if src.Contents {
		flags = append(flags, "--contents")
	}
	if dst.DirSuffix {
		flags = append(flags, "--dir")
	}
	return flags
}

// hostSource opens the folder of a host source (its own symbolic links
// resolved: the user named it) and returns the source's name in it.
func hostSource(p string) (*os.Root, string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, "", core.Wrap(core.CodeFileNotFound, err, "cannot copy %s", p)
	}
	if _, err := os.Lstat(abs); err != nil {
		return nil, "", hostOSError(err, p)
	}
	dir, name := filepath.Dir(abs), filepath.Base(abs)
	if dir == abs {
		return nil, "", core.Errorf(core.CodeBadFlag, "cannot copy the root folder %s itself: name a folder in it", abs)
	}
	rdir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, "", hostOSError(err, p)
	}
	root, err := os.OpenRoot(rdir)
	if err != nil {
		return nil, "", hostOSError(err, p)
	}
	return root, name, nil
}

// hostDest opens the folder that holds the host destination and returns the
// destination's name in it ("." when it is the root folder). The user's
// own symbolic links on the way to the destination are resolved first
// (they named it), and so is the destination itself when it is a link to a
// folder (the copy goes into that folder, as with docker cp: /tmp on
// macOS); a destination that is a link to anything else is refused: the
// copy would write through it, and an earlier copy out of a sandbox may
// have made it (`report.txt -> .bashrc`). Everything the copy writes below
// it goes through tarsafe.Extract with Options.Host.
func hostDest(p string) (*os.Root, string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, "", core.Wrap(core.CodeFileNotFound, err, "bad destination %s", p)
	}
	var resolved string
	lfi, err := os.Lstat(abs)
	if err == nil && lfi.Mode()&fs.ModeSymlink != 0 {
		if fi, serr := os.Stat(abs); serr == nil && !fi.IsDir() {
			target, _ := os.Readlink(abs)
			return nil, "", core.Errorf(core.CodePathEscape, "the destination %s is a symbolic link (to %q), not a folder: a copy out never writes through a link (an earlier copy may have made it); name what it leads to, or remove the link", p, target)
		}
	}
	switch {
	case err == nil:
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			resolved = r
			break
		}
		fallthrough // a dangling link: the link itself is the destination
	case errors.Is(err, fs.ErrNotExist):
		d, err := filepath.EvalSymlinks(filepath.Dir(abs))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, "", core.Errorf(core.CodeFileNotFound, "the destination's folder %s does not exist", filepath.Dir(abs))
			}
			return nil, "", hostOSError(err, p)
		}
		resolved = filepath.Join(d, filepath.Base(abs))
	default:
		return nil, "", hostOSError(err, p)
	}
	parent := filepath.Dir(resolved)
	if parent == resolved {
		root, err := os.OpenRoot(resolved)
		if err != nil {
			return nil, "", hostOSError(err, p)
		}
		return root, ".", nil
	}
	root, err := os.OpenRoot(parent)
	if err != nil {
		return nil, "", hostOSError(err, p)
	}
	return root, filepath.Base(resolved), nil
}

func hostOSError(err error, p string) error {
	fe := fsproto.FromOS(err, p)
	return fe
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (b *limitedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf.Bytes()...)
}

// call runs `sandbox-helper fs ARGS` in t's sandbox and turns a failure into
// the helper's error.
func (c *Copier) call(ctx context.Context, t core.Target, args []string, stdin io.Reader, stdout io.Writer) error {
	stderr := &limitedBuffer{max: 64 << 10}
	exit, _, err := c.Runner.HelperExec(ctx, c.Spec(t), sbexec.RawRequest{
		Args: wire.FSArgs{Args: args}.Argv(), Stdin: stdin, Stdout: stdout, Stderr: stderr,
	})
	if err != nil {
		return err
	}
	if exit != 0 {
		if fe := fsproto.ParseError(stderr.Bytes()); fe != nil {
			return fe
		}
		msg := strings.TrimSpace(string(stderr.Bytes()))
		if exit == 2 || exit == 126 || exit == 127 {
			return core.Errorf(core.CodeSandboxMismatch, "the helper in sandbox %s cannot run `fs %s` (%s): its container was made by another version of the plugin; stop it with `docker sandbox stop %s` (its data stays) and copy again", t, args[0], msg, t)
		}
		return core.Errorf(core.CodeInternal, "the helper's `fs %s` failed with exit status %d: %s", args[0], exit, msg)
	}
	return nil
}

// stream runs an output command (tar-out, cat, ls) with --watch-stdin: its
// stdin stays open while the call runs, so that the helper stops as soon as
// the call is abandoned (the connection closes, and with it the exec's
// stdin).
func (c *Copier) stream(ctx context.Context, t core.Target, args []string, w io.Writer) error {
	hold, release := io.Pipe()
	defer release.Close()
	return c.call(ctx, t, args, hold, w)
}

// fromSandbox runs an output command and hands its stdout to consume. The
// stream consume reads ends with the helper's error when the helper failed,
// so that nothing is committed from a partial stream.
func (c *Copier) fromSandbox(ctx context.Context, t core.Target, args []string, consume func(io.Reader) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := newBufPipe(1<<20, 128<<10)
	done := make(chan error, 1)
	go func() {
		err := c.stream(ctx, t, args, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	cerr := consume(pr)
	if cerr != nil {
		cancel()
	}
	pr.CloseWithError(errStopped)
	herr := <-done
	if cerr != nil {
		return cerr
	}
	if herr != nil {
		return herr
	}
	return nil
}

// toSandbox runs `fs tar-in --framed FLAGS LIMITS DST` with what produce
// writes as its stdin, and returns the helper's result. When produce fails,
// the upload is not committed (the helper removes what it wrote) and
// produce's error is returned.
func (c *Copier) toSandbox(ctx context.Context, dst Location, flags []string, produce func(io.Writer) error) (*tarsafe.Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(produce(pw))
	}()
	framer := fsproto.NewFramer(pr)
	out := &limitedBuffer{max: 1 << 20}
	args := append(append(append([]string{"tar-in", "--framed"}, flags...), c.limitArgs()...), "--", dst.Path)
	err := c.call(ctx, dst.Target, args, framer, out)
	// Stop the source if it still runs (the helper stopped reading). It is
	// not waited for: it may be blocked reading a terminal.
	cancel()
	pr.CloseWithError(errStopped)
	// The source's own failure comes first (the helper then saw an
	// uncommitted upload); a source that failed only because the helper
	// stopped reading reports nothing of its own.
	if ferr := framer.Err(); ferr != nil && !errors.Is(ferr, errStopped) && !errors.Is(ferr, io.ErrClosedPipe) && !errors.Is(ferr, context.Canceled) {
		return nil, ferr
	}
	if err != nil {
		return nil, err
	}
	var res tarsafe.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return nil, core.Errorf(core.CodeInternal, "bad result from the helper: %v", err)
	}
	return &res, nil
}

// List lists a sandbox path: a folder's entries (recursive: all below it,
// named by their path from it), or the entry of a file or link.
func (c *Copier) List(ctx context.Context, loc Location, recursive bool, each func(fsproto.Entry) error) error {
	args := []string{"ls", "--watch-stdin"}
	if recursive {
		args = append(args, "-r")
	}
	args = append(args, "--", loc.Path)
	err := c.fromSandbox(ctx, loc.Target, args, func(r io.Reader) error {
		dec := json.NewDecoder(r)
		for {
			var e fsproto.Entry
			err := dec.Decode(&e)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				var fe *fsproto.Error
				var se *core.Error
				if errors.As(err, &fe) || errors.As(err, &se) {
					return err
				}
				return core.Errorf(core.CodeInternal, "bad listing from the helper: %v", err)
			}
			if err := each(e); err != nil {
				return err
			}
		}
	})
	return toExec(err)
}

// Cat writes a sandbox file to w.
func (c *Copier) Cat(ctx context.Context, loc Location, w io.Writer) error {
	return toExec(c.fromSandbox(ctx, loc.Target, []string{"cat", "--watch-stdin", "--", loc.Path}, func(r io.Reader) error {
		_, err := io.Copy(w, r)
		return err
	}))
}

// Put writes r to a sandbox file, atomically: the file is replaced only
// once r ended without error. mode is octal ("" keeps an existing file's
// mode, 0644 for a new one).
func (c *Copier) Put(ctx context.Context, loc Location, r io.Reader, mode string) (fsproto.PutResult, error) {
	var res fsproto.PutResult
	args := []string{"put", "--framed"}
	if mode != "" {
		args = append(args, "--mode", mode)
	}
	args = append(args, "--", loc.Path)
	framer := fsproto.NewFramer(r)
	out := &limitedBuffer{max: 64 << 10}
	err := c.call(ctx, loc.Target, args, framer, out)
	if ferr := framer.Err(); ferr != nil {
		return res, core.Wrap(core.CodeIOError, ferr, "reading standard input; %s was not changed", loc.Path)
	}
	if err != nil {
		return res, toExec(err)
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return res, core.Errorf(core.CodeInternal, "bad result from the helper: %v", err)
	}
	return res, nil
}

// Remove deletes a sandbox file, symbolic link (the link itself) or, with
// recursive, folder. With force, a missing path is not an error (Removed is
// then false).
func (c *Copier) Remove(ctx context.Context, loc Location, recursive, force bool) (fsproto.RmResult, error) {
	var res fsproto.RmResult
	args := []string{"rm"}
	if recursive {
		args = append(args, "-r")
	}
	if force {
		args = append(args, "-f")
	}
	args = append(args, "--", loc.Path)
	out := &limitedBuffer{max: 64 << 10}
	if err := c.call(ctx, loc.Target, args, nil, out); err != nil {
		return res, toExec(err)
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return res, core.Errorf(core.CodeInternal, "bad result from the helper: %v", err)
	}
	return res, nil
}
