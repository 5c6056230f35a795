package tarsafe

import (
	"archive/tar"
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
)

// Dest says where an archive goes, with docker cp's rules.
type Dest struct {
	// Path is the destination, relative to the base root given to Extract,
	// slash-separated; "." is the base itself.
	Path string
	// MustBeDir: the user's destination ended in "/", so it must be an
	// existing folder (a file source is copied into it).
	MustBeDir bool
	// Contents: the user's source ended in "/.": copy what the folder
	// holds, not the folder itself.
	Contents bool
	// Raw: the archive is any tar stream (`cp - DST`), not one made by
	// Create: it is extracted as it is into Path, which must be an existing
	// folder.
	Raw bool
	// Display names the destination in messages ("" for Path).
	Display string
}

// Options tune an extraction.
type Options struct {
	Limits
	// KeepMode keeps the permission bits exactly (cp -a); otherwise Umask
	// is taken off them. Setuid, setgid and sticky bits are never kept.
	KeepMode bool
	Umask    fs.FileMode
	// Strict refuses the whole copy (path_escape) when a symbolic link of
	// the archive leads outside the copied tree; by default such a link is
	// not written, is reported in Result.Skipped, and the rest of the copy
	// completes.
	Strict bool
	// Host: the destination is on the user's machine, where an earlier
	// copy out of a sandbox may have written links that lead to the
	// user's own files (`results -> .ssh`): nothing is written through
	// a link the destination has (a folder of the copy that is a link
	// there is refused, path_escape), and no link of the copy is written
	// into a folder that was there before the copy (it is skipped; the
	// copied path itself being a link is refused): links land only in
	// folders the copy creates, whose content is the copy's.
	Host bool
}

// Extract reads a tar archive from r and writes it to d inside base.
//
// Unless d.Raw, the archive is one made by Create: its first entry is the
// copied file, symbolic link or folder (a name without "/"), and every other
// entry lies in that folder. Then docker cp's rules apply: a folder is copied
// into an existing folder d.Path (or its contents, with d.Contents), or
// becomes d.Path when that does not exist; a file is copied into an existing
// folder d.Path, or to d.Path.
//
// Extract reads r to its end before it commits anything: when r fails (the
// sender's error, or an upload that was not committed), the error is
// returned and nothing of the copy is left behind.
func Extract(base *os.Root, d Dest, r io.Reader, o Options) (*Result, error) {
	x := &extractor{o: o, lim: o.Limits.Norm(), res: newResult(), buf: make([]byte, 256<<10)}
	tr := &trackReader{r: r}
	br := bufio.NewReaderSize(tr, 64<<10)
	x.br = br
	x.tr = tar.NewReader(br)
	dpath, err := cleanDest(d.Path)
	if err != nil {
		return nil, err
	}
	if d.Raw {
		err = x.raw(base, dpath)
	} else {
		err = x.copy(base, dpath, d)
	}
	x.closeParent()
	if x.stgFile != nil {
		x.stgFile.Close()
	}
	if err != nil {
		if tr.err != nil && errors.Is(err, tr.err) {
			return nil, err // the sender's own error, as it is
		}
		disp := d.Display
		if disp == "" {
			disp = d.Path
		}
		return nil, prefix(disp, classify(err))
	}
	return x.res, nil
}

// trackReader remembers the error its reader failed with.
type trackReader struct {
	r   io.Reader
	err error
}

func (t *trackReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		t.err = err
	}
	return n, err
}

// prefix puts name before the message of an *fsproto.Error.
func prefix(name string, err error) error {
	var fe *fsproto.Error
	if name == "" || !errors.As(err, &fe) {
		return err
	}
	return fsproto.Errorf(fe.Code, "%s: %s", name, fe.Message)
}

func cleanDest(p string) (string, error) {
	if p == "" || p == "." {
		return ".", nil
	}
	c, err := CleanName(p)
	if err != nil {
		return "", err
	}
	if c == "" {
		return ".", nil
	}
	return c, nil
}

// classify keeps the sender's own error (read from r) over what tar made of
// it.
func classify(err error) error {
	var fe *fsproto.Error
	if errors.As(err, &fe) {
		return fe
	}
	if errors.Is(err, fsproto.ErrNotCommitted) {
		return errorf(fsproto.CodeBadArchive, "%v", fsproto.ErrNotCommitted)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, tar.ErrHeader) || errors.Is(err, tar.ErrFieldTooLong) || errors.Is(err, tar.ErrInsecurePath) {
		return errorf(fsproto.CodeBadArchive, "the archive is truncated or malformed: %v", err)
	}
	return err
}

type dirMode struct {
	name string
	mode fs.FileMode
}

type extractor struct {
	o   Options
	lim Limits
	res *Result
	buf []byte
	br  *bufio.Reader
	tr  *tar.Reader

	stg     *os.Root // where entries are written
	mapName func(string) (string, error)
	// treePrefix is what starts the names (mapName's) of the copied
	// tree's entries: "top/" when a folder is copied into an existing
	// folder under its own name, "" when the tree is the destination.
	// Links must stay inside the tree.
	treePrefix string
	// archiveTop is "top/" for an archive made by Create (its copied
	// folder's name), "" for a raw one: with a name relative to the
	// copied tree, it makes the name the result reports.
	archiveTop string
	// links are the names of the symbolic links written (mapName's), for
	// the check after a merge; linksOver says there were more than
	// maxDeferred.
	links     []string
	linksOver bool
	// skippedLinks are the names of the links not written: an entry
	// under one is refused (Create never makes one).
	skippedLinks map[string]bool
	entries      int64
	total        int64
	deferred     []dirMode // folders with modes that would block the extraction
	rootMode     *fs.FileMode

	parentName string // the folder parentRoot is open on
	parentRoot *os.Root
	// parentFile and stgFile are handles of parentRoot's and stg's
	// folders for createIn (fastCreate), opened when first needed.
	parentFile *os.File
	stgFile    *os.File
}

// next returns the next header, counting entries against the cap.
func (x *extractor) next() (*tar.Header, error) {
	for {
		h, err := x.tr.Next()
		if err != nil {
			return nil, err
		}
		x.entries++
		if x.entries > x.lim.MaxEntries {
			return nil, errorf(fsproto.CodeTooLarge, "the copy has more than %d entries (the limit: --max-entries or copy_max_entries)", x.lim.MaxEntries)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		return h, nil
	}
}

// finish reads what follows the archive's end: r must end (without error)
// within maxTrailing bytes.
func (x *extractor) finish() error {
	n, err := io.CopyN(io.Discard, x.br, maxTrailing+1)
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	if n > maxTrailing {
		return errorf(fsproto.CodeBadArchive, "more than %d bytes follow the end of the archive", maxTrailing)
	}
	return nil
}

// loop extracts the remaining entries and the end of the stream.
func (x *extractor) loop() error {
	for {
		h, err := x.next()
		if err == io.EOF {
			return x.finish()
		}
		if err != nil {
			return err
		}
		if err := x.entry(h); err != nil {
			return err
		}
	}
}

func (x *extractor) copy(base *os.Root, dpath string, d Dest) error {
	h, err := x.next()
	if err == io.EOF {
		if err := x.finish(); err != nil {
			return err
		}
		return errorf(fsproto.CodeBadArchive, "the archive is empty")
	}
	if err != nil {
		return err
	}
	top, err := CleanName(h.Name)
	if err != nil {
		return err
	}
	if top == "" || containsSlash(top) {
		return errorf(fsproto.CodeBadArchive, "the archive must start with the copied file or folder, not %q", h.Name)
	}
	fi, err := statIn(base, dpath)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fsproto.FromOS(err, "")
	}
	if h.Typeflag != tar.TypeDir {
		return x.single(base, dpath, d, h, top, exists, fi)
	}
	x.archiveTop = top + "/"
	under := func(strip bool) func(string) (string, error) {
		return func(n string) (string, error) {
			if n == top {
				if strip {
					return "", nil
				}
				return n, nil
			}
			if len(n) > len(top) && n[:len(top)] == top && n[len(top)] == '/' {
				if strip {
					return n[len(top)+1:], nil
				}
				return n, nil
			}
			return "", errorf(fsproto.CodePathEscape, "entry %q lies outside the copied folder %q: refused", n, top)
		}
	}
	switch {
	case exists && !fi.IsDir():
		return errorf(fsproto.CodeNotDirectory, "cannot copy a folder onto it: it is not a folder")
	case exists:
		x.mapName = under(d.Contents)
		if !d.Contents {
			x.treePrefix = top + "/"
		}
		return x.into(base, dpath, h)
	default:
		// A new folder: extract into a staging folder next to it, then
		// rename it into place.
		pdir, name := split(dpath)
		parent, err := OpenPath(base, pdir, false)
		if err != nil {
			return fsproto.FromOS(err, "")
		}
		defer parent.Close()
		stgName := randomName(StagingPrefix)
		if err := parent.Mkdir(stgName, 0o700); err != nil {
			return fsproto.FromOS(err, "")
		}
		ok := false
		defer func() {
			if !ok {
				x.closeParent()
				_ = RemoveAll(parent, stgName)
			}
		}()
		stg, err := OpenDir(parent, stgName)
		if err != nil {
			return fsproto.FromOS(err, "")
		}
		defer stg.Close()
		x.stg = stg
		x.mapName = under(true)
		if err := x.entry(h); err != nil {
			return err
		}
		if err := x.loop(); err != nil {
			return err
		}
		if err := x.checkLinks(stg); err != nil {
			return err
		}
		x.closeParent()
		if err := parent.Rename(stgName, name); err != nil {
			return fsproto.FromOS(err, "")
		}
		ok = true
		dst, err := OpenDir(parent, name)
		if err != nil {
			return fsproto.FromOS(err, "")
		}
		defer dst.Close()
		return x.applyModes(dst)
	}
}

func containsSlash(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return true
		}
	}
	return false
}

// raw extracts any archive into the existing folder dpath.
func (x *extractor) raw(base *os.Root, dpath string) error {
	fi, err := statIn(base, dpath)
	if err != nil {
		return fsproto.FromOS(err, "")
	}
	if !fi.IsDir() {
		return errorf(fsproto.CodeNotDirectory, "not a folder: an archive is extracted into a folder")
	}
	x.mapName = func(n string) (string, error) { return n, nil }
	return x.into(base, dpath, nil)
}

// into extracts (first, then the rest of the archive) into the existing
// folder dpath, through a staging folder inside it that is merged into it at
// the end.
func (x *extractor) into(base *os.Root, dpath string, first *tar.Header) error {
	dst, err := OpenPath(base, dpath, false)
	if err != nil {
		return fsproto.FromOS(err, "")
	}
	defer dst.Close()
	stgName := randomName(StagingPrefix)
	if err := dst.Mkdir(stgName, 0o700); err != nil {
		return fsproto.FromOS(err, "")
	}
	defer func() {
		x.closeParent()
		_ = RemoveAll(dst, stgName)
	}()
	stg, err := OpenDir(dst, stgName)
	if err != nil {
		return fsproto.FromOS(err, "")
	}
	defer stg.Close()
	x.stg = stg
	if first != nil {
		if err := x.entry(first); err != nil {
			return err
		}
	}
	if err := x.loop(); err != nil {
		return err
	}
	if err := x.checkLinks(stg); err != nil {
		return err
	}
	x.closeParent()
	x.rootMode = nil // an existing folder keeps its mode
	followed := false
	if err := x.merge(dst, stgName, ".", true, &followed); err != nil {
		return err
	}
	if followed && x.linksOver {
		return errorf(fsproto.CodeTooLarge, "the copy has more than %d symbolic links and goes through a link of the destination: too many links to check", maxDeferred)
	}
	extracting("merge", ".")
	if err := x.merge(dst, stgName, ".", false, nil); err != nil {
		return err
	}
	if err := x.checkLanded(dst); err != nil {
		return err
	}
	extracting("modes", ".")
	return x.applyModes(dst)
}

// testHookExtract, when set (by tests only), runs before a phase of an
// extraction into an existing folder changes the destination ("merge",
// "modes"), and when the merge is about to move entries into an existing
// folder of the destination ("merge-dir", its name): the windows in which
// sandboxed code (when the destination is in a sandbox) can swap a folder
// of it for a link.
var testHookExtract func(stage, name string)

func extracting(stage, name string) {
	if testHookExtract != nil {
		testHookExtract(stage, name)
	}
}

// single copies a file or symbolic link (the archive's only entry).
func (x *extractor) single(base *os.Root, dpath string, d Dest, h *tar.Header, top string, exists bool, fi fs.FileInfo) error {
	var dirPath, name string
	switch {
	case exists && fi.IsDir():
		dirPath, name = dpath, top
	case exists:
		if d.MustBeDir {
			return errorf(fsproto.CodeNotDirectory, "not a folder")
		}
		dirPath, name = split(dpath)
	default:
		if d.MustBeDir {
			return errorf(fsproto.CodeNotFound, "no such folder (a destination ending in / must be an existing folder)")
		}
		dirPath, name = split(dpath)
	}
	if d.Contents {
		return errorf(fsproto.CodeNotDirectory, "the source is not a folder: \"/.\" copies a folder's contents")
	}
	dir, err := OpenPath(base, dirPath, false)
	if err != nil {
		return fsproto.FromOS(err, "")
	}
	defer dir.Close()
	tmp := randomName(StagingPrefix)
	written := false
	defer func() {
		if written {
			_ = dir.Remove(tmp)
		}
	}()
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
		if err := x.checkSize(h); err != nil {
			return err
		}
		written = true
		if err := x.writeFile(dir, nil, tmp, h, name, top); err != nil {
			return err
		}
	case tar.TypeSymlink:
		// The copied path is itself a link: it is written when it stays
		// in the destination's folder, and refused otherwise, Strict or
		// not (skipping it would copy nothing and report success). On
		// the host it would land in a folder that was there: refused
		// (Options.Host).
		if x.o.Host {
			return errorf(fsproto.CodePathEscape, "%s is a symbolic link (to %q): a copy out does not write a link into a folder of this machine that was there before the copy (a later copy could write through it); copy what it leads to instead", top, h.Linkname)
		}
		if !LinkInside(name, h.Linkname) {
			return errorf(fsproto.CodePathEscape, "%s is a symbolic link to %q, which leads outside the destination: refused", top, h.Linkname)
		}
		if err := dir.Symlink(h.Linkname, tmp); err != nil {
			return fsproto.FromOS(err, name)
		}
		written = true
		if _, err := dir.Stat(tmp); fsproto.IsEscape(err) {
			return errorf(fsproto.CodePathEscape, "%s is a symbolic link to %q, which leads outside the destination: refused", top, h.Linkname)
		}
		x.res.Symlinks++
	case tar.TypeLink:
		return errorf(fsproto.CodePathEscape, "%s is a hard link to %q, outside the copy: refused", top, h.Linkname)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		x.res.skip(top, skippedType(h), "devices, FIFOs and sockets are not copied")
	default:
		x.res.skip(top, typeName(h.Typeflag), "unsupported entry type")
	}
	if _, err := x.next(); err != io.EOF {
		if err != nil {
			return err
		}
		return errorf(fsproto.CodePathEscape, "the archive of a single file holds more entries: refused")
	}
	if err := x.finish(); err != nil {
		return err
	}
	if !written {
		return nil
	}
	if cur, err := dir.Lstat(name); err == nil && cur.IsDir() {
		return errorf(fsproto.CodeIsDirectory, "cannot replace the folder %s with a file", join(dirPath, name))
	}
	if err := dir.Rename(tmp, name); err != nil {
		return fsproto.FromOS(err, join(dirPath, name))
	}
	written = false
	return nil
}

// skippedType names a device or FIFO entry's type; Create marks sockets
// (which tar cannot carry) as FIFOs with a PAX record.
func skippedType(h *tar.Header) string {
	if t := h.PAXRecords[PAXType]; t != "" {
		return t
	}
	return typeName(h.Typeflag)
}

// PAXType is the PAX record Create uses to tell a socket (archived as a
// FIFO without data) from a FIFO.
const PAXType = "DOCKERSANDBOX.type"

func (x *extractor) checkSize(h *tar.Header) error {
	if h.Size < 0 {
		return errorf(fsproto.CodeBadArchive, "entry %q has a negative size", h.Name)
	}
	if x.total+h.Size > x.lim.MaxBytes {
		return tooLarge(h.Name, h.Size, x.lim.MaxBytes, "the copy", "--max-size or copy_max_size")
	}
	if h.Size > x.lim.MaxEntryBytes {
		return tooLarge(h.Name, h.Size, x.lim.MaxEntryBytes, "one file", "--max-file-size or copy_max_file_size")
	}
	x.total += h.Size
	return nil
}

// copyFull copies src to dst in writes of len(buf) (but the last): the
// stream arrives in small pieces, the disk prefers big writes.
func copyFull(dst io.Writer, src io.Reader, buf []byte) (int64, error) {
	var total int64
	for {
		n, err := io.ReadFull(src, buf)
		if n > 0 {
			w, werr := dst.Write(buf[:n])
			total += int64(w)
			if werr != nil {
				return total, werr
			}
		}
		switch err {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			return total, nil
		default:
			return total, err
		}
	}
}

// writeFile creates name in dir with h's content; display names it in
// messages, report in the result. With df (dir's handle, fastCreate), an
// entry of that name already written by the archive is replaced (clear);
// without, name must not exist.
func (x *extractor) writeFile(dir *os.Root, df *os.File, name string, h *tar.Header, display, report string) error {
	var f *os.File
	var err error
	if df != nil {
		f, err = createIn(df, name)
		if errors.Is(err, fs.ErrExist) {
			if err := x.clear(dir, name, display); err != nil {
				return err
			}
			f, err = createIn(df, name)
		}
	} else {
		f, err = dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	}
	if err != nil {
		return fsproto.FromOS(err, display)
	}
	n, err := copyFull(f, io.LimitReader(x.tr, h.Size), x.buf)
	if err == nil && n < h.Size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		f.Close()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return fsproto.FromOS(err, display)
		}
		return err
	}
	if h.Mode&0o7000 != 0 {
		x.res.strip(report)
	}
	if err := f.Chmod(permOf(h.Mode, x.o.KeepMode, x.o.Umask)); err != nil {
		f.Close()
		return fsproto.FromOS(err, display)
	}
	if df != nil && !h.ModTime.IsZero() {
		_ = setTimes(f, h.ModTime)
	}
	if err := f.Close(); err != nil {
		return fsproto.FromOS(err, display)
	}
	if df == nil && !h.ModTime.IsZero() {
		_ = dir.Chtimes(name, time.Time{}, h.ModTime)
	}
	x.res.Files++
	x.res.Bytes += n
	return nil
}

// parent returns a root on folder dir of the staging root, creating it (and
// its parents) when missing.
func (x *extractor) parent(dir string) (*os.Root, error) {
	if dir == "." {
		return x.stg, nil
	}
	if x.parentRoot != nil && x.parentName == dir {
		return x.parentRoot, nil
	}
	x.closeParent()
	// Opened (and created) one folder at a time, each checked: sandboxed
	// code can exchange a folder of the staging folder for a link.
	r, err := OpenPath(x.stg, dir, true)
	if err != nil {
		return nil, fsproto.FromOS(err, dir)
	}
	x.parentRoot, x.parentName = r, dir
	return r, nil
}

func (x *extractor) closeParent() {
	if x.parentFile != nil {
		x.parentFile.Close()
		x.parentFile = nil
	}
	if x.parentRoot != nil {
		x.parentRoot.Close()
		x.parentRoot, x.parentName = nil, ""
	}
}

// dirFile returns the handle of the folder dir of the staging root, which
// parent returned as r, for createIn; nil without fastCreate or when it
// cannot be opened (the caller then goes through r).
func (x *extractor) dirFile(dir string, r *os.Root) *os.File {
	if !fastCreate {
		return nil
	}
	if dir == "." {
		if x.stgFile == nil {
			f, err := x.stg.Open(".")
			if err != nil {
				return nil
			}
			x.stgFile = f
		}
		return x.stgFile
	}
	if r != x.parentRoot {
		return nil
	}
	if x.parentFile == nil {
		f, err := r.Open(".")
		if err != nil {
			return nil
		}
		x.parentFile = f
	}
	return x.parentFile
}

// entry extracts one entry into the staging root.
func (x *extractor) entry(h *tar.Header) error {
	clean, err := CleanName(h.Name)
	if err != nil {
		return err
	}
	name, err := x.mapName(clean)
	if err != nil {
		return err
	}
	if name == "" {
		if h.Typeflag != tar.TypeDir {
			return errorf(fsproto.CodeBadArchive, "entry %q names the destination folder itself but is not a folder", h.Name)
		}
		m := permOf(h.Mode, x.o.KeepMode, x.o.Umask)
		x.rootMode = &m
		x.res.Dirs++
		if h.Mode&0o7000 != 0 {
			x.res.strip(reportName(clean))
		}
		return nil
	}
	for i := 0; i < len(name) && len(x.skippedLinks) > 0; i++ {
		if name[i] == '/' && x.skippedLinks[name[:i]] {
			return errorf(fsproto.CodePathEscape, "entry %q lies under a symbolic link of the archive that leads outside the copy: refused", h.Name)
		}
	}
	if name == x.parentName {
		x.closeParent() // the entry may replace the folder
	}
	dirName, base := split(name)
	switch h.Typeflag {
	case tar.TypeDir:
		p, err := x.parent(dirName)
		if err != nil {
			return err
		}
		if err := p.Mkdir(base, 0o700); err != nil {
			fi, lerr := p.Lstat(base)
			if lerr != nil || !fi.IsDir() {
				if !errors.Is(err, fs.ErrExist) {
					return fsproto.FromOS(err, name)
				}
				if err := p.Remove(base); err != nil {
					return fsproto.FromOS(err, name)
				}
				if err := p.Mkdir(base, 0o700); err != nil {
					return fsproto.FromOS(err, name)
				}
			}
		} else {
			x.res.Dirs++
		}
		if h.Mode&0o7000 != 0 {
			x.res.strip(clean)
		}
		m := permOf(h.Mode, x.o.KeepMode, x.o.Umask)
		if m&0o700 != 0o700 {
			// Applied at the end: a read-only folder would stop the
			// entries that go into it.
			if len(x.deferred) >= maxDeferred {
				return errorf(fsproto.CodeTooLarge, "the copy has more than %d folders without owner write permission", maxDeferred)
			}
			x.deferred = append(x.deferred, dirMode{name, m})
			m |= 0o700
		}
		// On the folder itself, opened and checked: Chmod by name
		// follows a link swapped in for it.
		d, err := OpenDir(p, base)
		if err != nil {
			return fsproto.FromOS(err, name)
		}
		err = d.Chmod(".", m)
		d.Close()
		if err != nil {
			return fsproto.FromOS(err, name)
		}
		return nil
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
		if err := x.checkSize(h); err != nil {
			return err
		}
		p, err := x.parent(dirName)
		if err != nil {
			return err
		}
		df := x.dirFile(dirName, p)
		if df == nil {
			if err := x.clear(p, base, name); err != nil {
				return err
			}
		}
		return x.writeFile(p, df, base, h, name, clean)
	case tar.TypeSymlink:
		if !LinkInside(strings.TrimPrefix(name, x.treePrefix), h.Linkname) {
			if x.o.Strict {
				return errorf(fsproto.CodePathEscape, "%s is a symbolic link to %q, which leads outside the copy: refused (--strict)", name, h.Linkname)
			}
			if len(x.skippedLinks) >= maxDeferred {
				return errorf(fsproto.CodeTooLarge, "the copy has more than %d symbolic links that lead outside it", maxDeferred)
			}
			if x.skippedLinks == nil {
				x.skippedLinks = map[string]bool{}
			}
			x.skippedLinks[name] = true
			x.res.skipLink(clean, fsproto.TypeSymlink, linkReason(h.Linkname), h.Linkname)
			return nil
		}
		p, err := x.parent(dirName)
		if err != nil {
			return err
		}
		if err := x.clear(p, base, name); err != nil {
			return err
		}
		if err := p.Symlink(h.Linkname, base); err != nil {
			return fsproto.FromOS(err, name)
		}
		x.res.Symlinks++
		return nil
	case tar.TypeLink:
		tc, err := CleanName(h.Linkname)
		if err != nil {
			return errorf(fsproto.CodePathEscape, "%s is a hard link to %q, outside the copy: refused", name, h.Linkname)
		}
		target, err := x.mapName(tc)
		if err != nil || target == "" {
			return errorf(fsproto.CodePathEscape, "%s is a hard link to %q, outside the copy: refused", name, h.Linkname)
		}
		fi, err := lstatIn(x.stg, target)
		if err != nil || !fi.Mode().IsRegular() {
			return errorf(fsproto.CodePathEscape, "%s is a hard link to %q, which is not a file this copy wrote: refused", name, h.Linkname)
		}
		p, err := x.parent(dirName)
		if err != nil {
			return err
		}
		if err := x.clear(p, base, name); err != nil {
			return err
		}
		x.closeParent()
		if err := linkIn(x.stg, target, name); err != nil {
			return fsproto.FromOS(err, name)
		}
		x.res.Hardlinks++
		return nil
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		x.res.skip(clean, skippedType(h), "devices, FIFOs and sockets are not copied")
		return nil
	default:
		x.res.skip(clean, typeName(h.Typeflag), "unsupported entry type")
		return nil
	}
}

// reportName is an archive name as results report it ("." for the root).
func reportName(clean string) string {
	if clean == "" {
		return "."
	}
	return clean
}

// clear removes what an earlier entry of the same name left (archives may
// repeat names; the last one wins, as with tar).
func (x *extractor) clear(p *os.Root, base, name string) error {
	fi, err := p.Lstat(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fsproto.FromOS(err, name)
	}
	if fi.IsDir() {
		return errorf(fsproto.CodeIsDirectory, "entry %s would replace a folder of the same archive with a file", name)
	}
	if err := p.Remove(base); err != nil {
		return fsproto.FromOS(err, name)
	}
	return nil
}

// checkLinks finds the symbolic links written in the staging root that
// resolve, through other links, to somewhere outside the copied tree: each
// is removed and reported (Strict: the copy is refused). It records the
// links that stay, for checkLanded.
func (x *extractor) checkLinks(stg *os.Root) error {
	if x.res.Symlinks == 0 {
		return nil
	}
	tree := stg
	if x.treePrefix != "" {
		t, err := OpenDir(stg, strings.TrimSuffix(x.treePrefix, "/"))
		if err != nil {
			return fsproto.FromOS(err, "")
		}
		defer t.Close()
		tree = t
	}
	return walkLinks(tree, ".", 0, func(p string, out bool) error {
		if !out {
			if len(x.links) < maxDeferred {
				x.links = append(x.links, x.treePrefix+p)
			} else {
				x.linksOver = true
			}
			return nil
		}
		if x.o.Strict {
			return errorf(fsproto.CodePathEscape, "%s is a symbolic link that leads outside the copy (through other links): refused (--strict)", p)
		}
		target, _ := ReadlinkIn(tree, p)
		if err := removeIn(tree, p); err != nil {
			return fsproto.FromOS(err, p)
		}
		x.res.Symlinks--
		x.res.skipLink(x.archiveTop+p, fsproto.TypeSymlink, ReasonLinkChain, target)
		return nil
	})
}

// checkLanded checks, after a merge into an existing folder, the links the
// copy placed there: a folder of the destination that is itself a link
// (one that stays inside, so the merge followed it) puts what the copy
// holds elsewhere, and a relative link may then lead outside. Such a link
// is removed and reported (Strict: the copy fails, the rest of it stays).
func (x *extractor) checkLanded(dst *os.Root) error {
	var first error
	for _, p := range x.links {
		fi, err := lstatIn(dst, p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		if _, err := statIn(dst, p); !fsproto.IsEscape(err) {
			continue
		}
		target, _ := ReadlinkIn(dst, p)
		if err := removeIn(dst, p); err != nil {
			return fsproto.FromOS(err, p)
		}
		x.res.Symlinks--
		if x.o.Strict {
			if first == nil {
				first = errorf(fsproto.CodePathEscape, "%s is a symbolic link that leads outside the destination from where it landed (through a link the destination already had): it was removed, and the copy refused (--strict)", p)
			}
			continue
		}
		x.res.skipLink(x.archiveTop+strings.TrimPrefix(p, x.treePrefix), fsproto.TypeSymlink, ReasonLinkLanded, target)
	}
	return first
}

// walkLinks calls each for every symbolic link below dir of r, with
// whether it resolves (through other links) outside r.
func walkLinks(r *os.Root, dir string, depth int, each func(p string, out bool) error) error {
	if depth > maxDepth {
		return errorf(fsproto.CodeTooLarge, "folders nested deeper than %d levels", maxDepth)
	}
	f, err := openFolder(r, dir)
	if err != nil {
		return fsproto.FromOS(err, dir)
	}
	defer f.Close()
	for {
		ents, err := f.ReadDir(1024)
		for _, e := range ents {
			p := join(dir, e.Name())
			switch {
			case e.Type()&fs.ModeSymlink != 0:
				_, serr := statIn(r, p)
				if err := each(p, fsproto.IsEscape(serr)); err != nil {
					return err
				}
			case e.IsDir():
				if err := walkLinks(r, p, depth+1, each); err != nil {
					return err
				}
			}
		}
		if err == io.EOF || (err == nil && len(ents) == 0) {
			return nil
		}
		if err != nil {
			return fsproto.FromOS(err, dir)
		}
	}
}

// applyModes sets the deferred folder modes, relative to dst.
func (x *extractor) applyModes(dst *os.Root) error {
	for i := len(x.deferred) - 1; i >= 0; i-- {
		d := x.deferred[i]
		r, err := OpenPath(dst, d.name, false)
		if err != nil {
			return fsproto.FromOS(err, d.name)
		}
		err = r.Chmod(".", d.mode)
		r.Close()
		if err != nil {
			return fsproto.FromOS(err, d.name)
		}
	}
	if x.rootMode != nil {
		if err := dst.Chmod(".", *x.rootMode); err != nil {
			return fsproto.FromOS(err, ".")
		}
	}
	return nil
}

// merge moves the staging folder stg (inside dst) into dst: missing entries
// are renamed into place, folders are merged, other entries replace what
// they find (by rename: an existing hard or symbolic link is replaced, never
// written through). With check, it changes nothing and only reports the
// conflicts and escapes a merge would meet, so that a refused copy leaves
// the destination as it was.
//
// followed, when not nil, is set when the merge goes into a folder of the
// destination through a symbolic link.
func (x *extractor) merge(dst *os.Root, stg, rel string, check bool, followed *bool) error {
	src := join(stg, rel)
	process := func(e fs.DirEntry) error {
		s, t := join(src, e.Name()), join(rel, e.Name())
		if x.o.Host && e.Type()&fs.ModeSymlink != 0 {
			// A link into a folder the destination had: left out
			// (Options.Host).
			if !check {
				target, _ := ReadlinkIn(dst, s)
				name := t
				if x.treePrefix == "" && x.archiveTop != "" {
					name = x.archiveTop + t // a folder's contents: named from the folder
				}
				x.res.skipLink(name, "symlink", ReasonLinkExisting, target)
				x.res.Symlinks-- // counted when the archive wrote it
				return fsOS(removeIn(dst, s), t)
			}
			return nil
		}
		tfi, err := lstatIn(dst, t)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if check {
				return nil
			}
			return fsOS(renameIn(dst, s, t), t)
		case err != nil:
			return fsproto.FromOS(err, t)
		case e.IsDir():
			if tfi.Mode()&fs.ModeSymlink != 0 && x.o.Host {
				return errorf(fsproto.CodePathEscape, "%s is a symbolic link on this machine: a copy out never writes through a link (an earlier copy may have made it); remove it, or copy elsewhere", t)
			}
			if tfi.Mode()&fs.ModeSymlink != 0 {
				st, err := statIn(dst, t)
				if err != nil {
					if fsproto.IsEscape(err) {
						return errorf(fsproto.CodePathEscape, "%s in the destination is a symbolic link that leads outside it: the copy does not write through it", t)
					}
					return fsproto.FromOS(err, t)
				}
				tfi = st
				if followed != nil {
					*followed = true
				}
			}
			if !tfi.IsDir() {
				return errorf(fsproto.CodeNotDirectory, "cannot replace %s, which is not a folder, with a folder", t)
			}
			if !check {
				extracting("merge-dir", t)
			}
			if err := x.merge(dst, stg, t, check, followed); err != nil {
				return err
			}
			if check {
				return nil
			}
			return fsOS(removeIn(dst, s), t)
		default:
			if tfi.IsDir() {
				return errorf(fsproto.CodeIsDirectory, "cannot replace the folder %s with a file", t)
			}
			if check {
				return nil
			}
			return fsOS(renameIn(dst, s, t), t)
		}
	}
	if check {
		f, err := openFolder(dst, src)
		if err != nil {
			return fsproto.FromOS(err, rel)
		}
		defer f.Close()
		for {
			ents, err := f.ReadDir(1024)
			for _, e := range ents {
				if err := process(e); err != nil {
					return err
				}
			}
			if err == io.EOF || (err == nil && len(ents) == 0) {
				return nil
			}
			if err != nil {
				return fsproto.FromOS(err, rel)
			}
		}
	}
	// Every entry processed leaves the staging folder, so read from the
	// start until it is empty.
	for {
		f, err := openFolder(dst, src)
		if err != nil {
			return fsproto.FromOS(err, rel)
		}
		ents, err := f.ReadDir(1024)
		f.Close()
		if err != nil && err != io.EOF {
			return fsproto.FromOS(err, rel)
		}
		if len(ents) == 0 {
			return nil
		}
		for _, e := range ents {
			if err := process(e); err != nil {
				return err
			}
		}
	}
}

func fsOS(err error, name string) error {
	if err == nil {
		return nil
	}
	return fsproto.FromOS(err, name)
}

// openFolder opens the folder rel of root for reading its entries, through
// OpenPath.
func openFolder(root *os.Root, rel string) (*os.File, error) {
	d, err := OpenPath(root, rel, false)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Open(".")
}
