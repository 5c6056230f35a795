package tarsafe

import (
	"archive/tar"
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"

	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
)

// CreateOptions tune Create.
type CreateOptions struct {
	// Limits fail the archive early (too_large) when the source is over
	// them; the receiving side checks them again.
	Limits
	// TopName is the name of the archive's first entry (the file or folder
	// copied); "" means the base name of the source.
	TopName string
	// MustBeDir: the source named by the user ended in "/": it must be a
	// folder.
	MustBeDir bool
	// Display names the source in messages ("" for name).
	Display string
	// Access, when set, refuses (permission_denied) what the sandbox's
	// user could not open or look up, for a reader with more rights (see
	// Access).
	Access Access
}

// Create writes a tar archive of name (relative to base, slash-separated;
// "." is base itself) to w. The first entry is the source itself, named
// TopName; a folder's entries follow under TopName/. Symbolic links are
// archived as links and never followed; a source that is itself a link is
// refused (path_escape) when it leads outside base. Every folder is opened
// relative to its parent's handle and every file through the root of its
// folder, so a folder swapped for a link while the walk runs cannot lead it
// outside base. Devices and FIFOs are archived as headers without data
// (sockets as FIFOs marked with PAXType) for the receiver to skip and report.
func Create(w io.Writer, base *os.Root, name string, o CreateOptions) (*Result, error) {
	disp := o.Display
	if disp == "" {
		disp = name
	}
	res, err := create(w, base, name, o)
	if err != nil {
		return nil, prefix(disp, err)
	}
	return res, nil
}

func create(w io.Writer, base *os.Root, name string, o CreateOptions) (*Result, error) {
	// The buffer batches headers and small files; a file's data is read in
	// pieces bigger than it (buf), so that, once the header before it is
	// flushed, they go to w without being copied once more.
	bw := bufio.NewWriterSize(w, 128<<10)
	c := &creator{tw: tar.NewWriter(bw), bw: bw, lim: o.Limits.Norm(), res: newResult(), buf: make([]byte, 256<<10), access: o.Access}
	name = path.Clean("./" + name)
	top := o.TopName
	if top == "" {
		_, top = split(name)
	}
	if top == "" || top == "." || top == ".." || containsSlash(top) {
		return nil, errorf(fsproto.CodeBadFlag, "cannot name the copy %q", top)
	}
	// The folder that holds the copied path, opened one folder at a time
	// (Walk), and the path's last element in it.
	dir, osName, err := walk(base, name, false, false, o.Access)
	if err != nil {
		return nil, fsproto.FromOS(err, "")
	}
	defer dir.Close()
	base = dir
	if err := o.Access.check(base, osName, WantSearch); err != nil {
		return nil, fsproto.FromOS(err, "")
	}
	fi, err := base.Lstat(osName)
	if err != nil {
		return nil, fsproto.FromOS(err, "")
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if _, err := statIn(base, osName); fsproto.IsEscape(err) {
			return nil, errorf(fsproto.CodePathEscape, "a symbolic link that leads outside the folder it is copied from: refused")
		}
	}
	if o.MustBeDir && !fi.IsDir() {
		return nil, errorf(fsproto.CodeNotDirectory, "not a folder")
	}
	switch {
	case fi.IsDir():
		r, err := o.Access.openDir(base, osName)
		if err != nil {
			return nil, fsproto.FromOS(err, "")
		}
		err = c.dir(r, top, 0)
		r.Close()
		if err != nil {
			return nil, err
		}
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := base.Readlink(osName)
		if err != nil {
			return nil, errorf(fsproto.CodePathEscape, "changed while the copy ran (it was a symbolic link): refused")
		}
		h, err := c.header(fi, top, target)
		if err != nil {
			return nil, err
		}
		if err := c.write(h); err != nil {
			return nil, err
		}
		c.res.Symlinks++
	case fi.Mode().IsRegular():
		if err := c.file(base, osName, top); err != nil {
			return nil, err
		}
		if c.entries == 0 && len(c.res.Skipped) == 0 {
			return nil, errorf(fsproto.CodeNotFound, "no such file or folder (it was removed while the copy ran)")
		}
	default:
		return nil, errorf(fsproto.CodeUnsupportedFile, "a %s: only files, folders and symbolic links are copied", fsproto.TypeOf(fi.Mode()))
	}
	if err := c.tw.Close(); err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	return c.res, nil
}

type creator struct {
	tw      *tar.Writer
	bw      *bufio.Writer
	lim     Limits
	res     *Result
	buf     []byte
	entries int64
	total   int64
	access  Access
}

func (c *creator) header(fi fs.FileInfo, name, link string) (*tar.Header, error) {
	c.entries++
	if c.entries > c.lim.MaxEntries {
		return nil, errorf(fsproto.CodeTooLarge, "the copy has more than %d entries (the limit: --max-entries or copy_max_entries)", c.lim.MaxEntries)
	}
	if len(name) > MaxNameLen {
		return nil, errorf(fsproto.CodeBadArchive, "%s: the name is over %d bytes", name[:64]+"...", MaxNameLen)
	}
	h, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return nil, fsproto.FromOS(err, name)
	}
	h.Name = name
	h.Uname, h.Gname = "", ""
	h.AccessTime, h.ChangeTime = timeZero, timeZero
	return h, nil
}

func (c *creator) write(h *tar.Header) error {
	if err := c.tw.WriteHeader(h); err != nil {
		return err
	}
	return nil
}

// dir archives the folder r as name and everything in it.
func (c *creator) dir(r *os.Root, name string, depth int) error {
	if depth > maxDepth {
		return errorf(fsproto.CodeTooLarge, "%s: folders nested deeper than %d levels", name, maxDepth)
	}
	fi, err := r.Stat(".")
	if err != nil {
		return fsproto.FromOS(err, name)
	}
	h, err := c.header(fi, name+"/", "")
	if err != nil {
		return err
	}
	if err := c.write(h); err != nil {
		return err
	}
	c.res.Dirs++
	f, err := r.Open(".")
	if err != nil {
		return fsproto.FromOS(err, name)
	}
	defer f.Close()
	searched := false
	for {
		ents, err := f.ReadDir(256)
		for _, e := range ents {
			if !searched {
				// Every entry is looked up in r.
				if err := c.access.checkInfo(fi, name, WantSearch); err != nil {
					return fsproto.FromOS(err, name+"/"+e.Name())
				}
				searched = true
			}
			if err := c.child(r, e, name+"/"+e.Name(), depth); err != nil {
				return err
			}
		}
		if err == io.EOF || (err == nil && len(ents) == 0) {
			return nil
		}
		if err != nil {
			return fsproto.FromOS(err, name)
		}
	}
}

// testHookChild, when set (by tests only), runs after a folder's entry was
// listed and before it is opened: the window a swap races for.
var testHookChild func(name string)

func (c *creator) child(r *os.Root, e fs.DirEntry, name string, depth int) error {
	n := e.Name()
	if testHookChild != nil {
		testHookChild(name)
	}
	switch t := e.Type(); {
	case t&fs.ModeSymlink != 0:
		return c.link(r, n, name)
	case t.IsDir():
		sub, err := c.access.openDir(r, n)
		if errors.Is(err, syscall.ELOOP) {
			// It turned into a link since it was listed: one that stays
			// inside is followed, one folder at a time.
			sub, err = c.access.openPath(r, n)
		}
		if fsproto.IsEscape(err) {
			err = &fs.PathError{Op: "openat", Path: n, Err: syscall.ELOOP}
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while the copy ran
		}
		if errors.Is(err, syscall.ELOOP) {
			return errorf(fsproto.CodePathEscape, "%s turned into a symbolic link while the copy ran: refused", name)
		}
		if err != nil {
			return fsproto.FromOS(err, name)
		}
		defer sub.Close()
		return c.dir(sub, name, depth+1)
	case t.IsRegular():
		return c.file(r, n, name)
	default:
		fi, err := r.Lstat(n)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fsproto.FromOS(err, name)
		}
		return c.special(fi, name)
	}
}

// special archives a device or FIFO as a header without data, and a socket
// as a marked FIFO, for the receiver to report.
func (c *creator) special(fi fs.FileInfo, name string) error {
	m := fi.Mode()
	switch {
	case m&fs.ModeSocket != 0:
		c.entries++
		if c.entries > c.lim.MaxEntries {
			return errorf(fsproto.CodeTooLarge, "the copy has more than %d entries (the limit: --max-entries or copy_max_entries)", c.lim.MaxEntries)
		}
		return c.write(&tar.Header{Name: name, Typeflag: tar.TypeFifo, Mode: int64(m.Perm()), ModTime: fi.ModTime(),
			PAXRecords: map[string]string{PAXType: fsproto.TypeSocket}, Format: tar.FormatPAX})
	case m&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe) != 0:
		h, err := c.header(fi, name, "")
		if err != nil {
			return err
		}
		return c.write(h)
	}
	c.res.skip(name, fsproto.TypeOf(m), "unsupported file type")
	return nil
}

func (c *creator) link(r *os.Root, n, name string) error {
	target, err := r.Readlink(n)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		// No longer a link (swapped while the copy ran): skip it.
		c.res.skip(name, fsproto.TypeSymlink, "changed while the copy ran")
		return nil
	}
	fi, err := r.Lstat(n)
	if err != nil {
		return fsproto.FromOS(err, name)
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return nil // swapped between the two calls: skip it
	}
	h, err := c.header(fi, name, target)
	if err != nil {
		return err
	}
	if err := c.write(h); err != nil {
		return err
	}
	c.res.Symlinks++
	return nil
}

// file archives the file n of r. What is archived is what the opened handle
// shows (fstat), whatever the name led to when it was listed.
func (c *creator) file(r *os.Root, n, name string) error {
	f, err := OpenFile(r, n, openReadFlags)
	if errors.Is(err, syscall.ELOOP) {
		f, err = c.access.openFileFollowing(r, n, openReadFlags) // see dir
	}
	if fsproto.IsEscape(err) {
		err = &fs.PathError{Op: "openat", Path: n, Err: syscall.ELOOP}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if errors.Is(err, syscall.ELOOP) {
		return errorf(fsproto.CodePathEscape, "%s turned into a symbolic link while the copy ran: refused", name)
	}
	if err != nil {
		return fsproto.FromOS(err, name)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fsproto.FromOS(err, name)
	}
	if err := c.access.checkInfo(fi, n, WantRead); err != nil {
		return fsproto.FromOS(err, name)
	}
	if !fi.Mode().IsRegular() {
		// Swapped while the copy ran (a link to a folder or a FIFO now):
		// archive nothing under this name.
		c.res.skip(name, fsproto.TypeOf(fi.Mode()), "changed while the copy ran")
		return nil
	}
	size := fi.Size()
	if c.total+size > c.lim.MaxBytes {
		return tooLarge(name, size, c.lim.MaxBytes, "the copy", "--max-size or copy_max_size")
	}
	if size > c.lim.MaxEntryBytes {
		return tooLarge(name, size, c.lim.MaxEntryBytes, "one file", "--max-file-size or copy_max_file_size")
	}
	c.total += size
	h, err := c.header(fi, name, "")
	if err != nil {
		return err
	}
	if err := c.write(h); err != nil {
		return err
	}
	if size >= int64(len(c.buf)) {
		// A big file: its data goes straight from buf to w (bufio writes
		// a piece bigger than its free space directly when empty).
		if err := c.bw.Flush(); err != nil {
			return err
		}
	}
	n64, err := io.CopyBuffer(c.tw, io.LimitReader(f, size), c.buf)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return fsproto.FromOS(err, name)
		}
		return err
	}
	if n64 < size {
		// The file shrank while it was read: pad, to keep the archive
		// well-formed.
		if _, err := io.CopyBuffer(c.tw, io.LimitReader(zeros{}, size-n64), c.buf); err != nil {
			return err
		}
	}
	c.res.Files++
	c.res.Bytes += size
	return nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
