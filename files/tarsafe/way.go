package tarsafe

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
)

// The walks of this file open a path one folder at a time and prove each
// folder they opened is the folder its name holds. os.Root alone confines
// a path on Linux's kernel, where it opens each folder on the way with
// openat(O_NOFOLLOW|O_DIRECTORY); gVisor's openat follows a symbolic link
// despite O_NOFOLLOW when O_DIRECTORY is set (README, runc vs runsc), so a
// folder exchanged for a link to / while os.Root walks a path (or a tree)
// would lead it outside there. Every operation then takes one name in a
// folder opened here: an operation on one name follows no link on the way.

// maxLinks is how many links a walk resolves before it calls the path a
// loop (Linux's limit).
const maxLinks = 40

// changed is the error of a folder that was exchanged (for a link or
// another folder) while it was being opened: fsproto.FromOS calls an ELOOP
// a loop or a link swapped in while the path was in use (path_escape).
func changed(name string) error {
	return &fs.PathError{Op: "openat", Path: name, Err: syscall.ELOOP}
}

// OpenDir opens the folder name (one path element) of parent and checks
// that what it opened is what name holds now: a folder, not a symbolic
// link, the same file as name's own no-follow stat. A name that is, or
// turned into, a link (os.Root follows a link inside the root; gVisor any)
// is refused with an ELOOP error, as is a folder exchanged meanwhile.
func OpenDir(parent *os.Root, name string) (*os.Root, error) {
	r, err := parent.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	if err := sameAsName(parent, name, r.Stat); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// OpenFile opens the file name (one path element) of parent for reading
// with flag and checks, as OpenDir does, that the handle is what name
// holds now and not a link's target.
func OpenFile(parent *os.Root, name string, flag int) (*os.File, error) {
	f, err := parent.OpenFile(name, flag, 0)
	if err != nil {
		return nil, err
	}
	if err := sameAsName(parent, name, func(string) (fs.FileInfo, error) { return f.Stat() }); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// OpenFileFollowing opens the file rel of root for reading with flag, as
// OpenFile, through Walk: links on the way and as the last element are
// followed when they stay inside root.
func OpenFileFollowing(root *os.Root, rel string, flag int) (*os.File, error) {
	dir, n, err := Walk(root, rel, true)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	return OpenFile(dir, n, flag)
}

// testHookOpened, when set (by tests only), runs between the opening of
// name and its check: the window in which sandboxed code exchanges it.
var testHookOpened func(name string)

func sameAsName(parent *os.Root, name string, opened func(string) (fs.FileInfo, error)) error {
	if testHookOpened != nil {
		testHookOpened(name)
	}
	got, err := opened(".")
	if err != nil {
		return err
	}
	now, err := parent.Lstat(name)
	if err != nil {
		return err
	}
	if now.Mode()&fs.ModeSymlink != 0 || !os.SameFile(got, now) {
		return changed(name)
	}
	return nil
}

// Walk opens, one folder at a time through OpenDir, the folder of root that
// holds the last element of rel (a cleaned relative slash path) and returns
// it, for the caller to close, with that element ("." when rel names the
// folder itself). A symbolic link on the way is resolved as os.Root
// resolves one: followed when it stays inside root, path_escape when it is
// absolute or leads above root. With followLast, a link as the last element
// is resolved too. A missing last element is returned as it is, for the
// operation to report or create.
func Walk(root *os.Root, rel string, followLast bool) (*os.Root, string, error) {
	return walk(root, rel, followLast, false, nil)
}

// Access is the permission check of a reader with more rights than the
// sandbox's user (the local route of a copy out reads as root): asked with
// a file's stat and what the kernel would check for that user (read,
// search), it returns an error where the user's own open or lookup would
// fail with EACCES. nil checks nothing.
type Access func(fi fs.FileInfo, want fs.FileMode) error

// What an Access is asked for: read (open a file or folder), search (look
// a name up in a folder).
const (
	WantRead   fs.FileMode = 4
	WantSearch fs.FileMode = 1
)

// check asks a about the folder r (name: for the error).
func (a Access) check(r *os.Root, name string, want fs.FileMode) error {
	if a == nil {
		return nil
	}
	fi, err := r.Stat(".")
	if err != nil {
		return err
	}
	return a.checkInfo(fi, name, want)
}

// openFileFollowing is OpenFileFollowing with a's search check of each
// folder on the way (where links lead: the user's own open would need it).
func (a Access) openFileFollowing(root *os.Root, rel string, flag int) (*os.File, error) {
	dir, n, err := walk(root, rel, true, false, a)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	return OpenFile(dir, n, flag)
}

// openPath is OpenPath (no mkdir) with a's search check of each folder on
// the way and its read check of the folder opened.
func (a Access) openPath(root *os.Root, rel string) (*os.Root, error) {
	dir, n, err := walk(root, rel, true, false, a)
	if err != nil {
		return nil, err
	}
	if n == "." {
		if err := a.check(dir, rel, WantRead); err != nil {
			dir.Close()
			return nil, err
		}
		return dir, nil
	}
	defer dir.Close()
	return a.openDir(dir, n)
}

// openDir is OpenDir, then a's read and search check of the folder opened
// (the user's own open, and the lookups in it, would need both: the helper
// itself fails on a folder it can list but not search, so the local route
// refuses it by the same name).
func (a Access) openDir(parent *os.Root, name string) (*os.Root, error) {
	r, err := OpenDir(parent, name)
	if err != nil {
		return nil, err
	}
	if err := a.check(r, name, WantRead|WantSearch); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (a Access) checkInfo(fi fs.FileInfo, name string, want fs.FileMode) error {
	if a == nil || a(fi, want) == nil {
		return nil
	}
	return &fs.PathError{Op: "openat", Path: name, Err: syscall.EACCES}
}

// OpenPath opens the folder rel of root through Walk, following links on
// the way and as the last element; with mkdir it creates the folders that
// are missing (mode 0755, less the umask).
func OpenPath(root *os.Root, rel string, mkdir bool) (*os.Root, error) {
	dir, n, err := walk(root, rel, true, mkdir, nil)
	if err != nil {
		return nil, err
	}
	if n == "." {
		return dir, nil
	}
	defer dir.Close()
	if mkdir {
		if err := dir.Mkdir(n, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	return OpenDir(dir, n)
}

func walk(root *os.Root, rel string, followLast, mkdir bool, access Access) (*os.Root, string, error) {
	todo := strings.Split(rel, "/")
	var stack []*os.Root
	closeAll := func() {
		for _, r := range stack {
			r.Close()
		}
	}
	cur := func() *os.Root {
		if len(stack) == 0 {
			return root
		}
		return stack[len(stack)-1]
	}
	done := func(n string) (*os.Root, string, error) {
		if len(stack) == 0 {
			d, err := root.OpenRoot(".")
			if err != nil {
				return nil, "", err
			}
			return d, n, nil
		}
		top := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		closeAll()
		return top, n, nil
	}
	fail := func(err error) (*os.Root, string, error) {
		closeAll()
		return nil, "", err
	}
	links := 0
	for len(todo) > 0 {
		n := todo[0]
		todo = todo[1:]
		last := len(todo) == 0
		switch n {
		case "", ".":
			if last {
				return done(".")
			}
			continue
		case "..":
			if len(stack) == 0 {
				return fail(escapeError(rel))
			}
			stack[len(stack)-1].Close()
			stack = stack[:len(stack)-1]
			if last {
				return done(".")
			}
			continue
		}
		if last && !followLast {
			return done(n)
		}
		if err := access.check(cur(), n, WantSearch); err != nil {
			return fail(err)
		}
		fi, err := cur().Lstat(n)
		if errors.Is(err, fs.ErrNotExist) && mkdir && !last {
			if err := cur().Mkdir(n, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fail(err)
			}
			fi, err = cur().Lstat(n)
		}
		if err != nil {
			if last {
				return done(n)
			}
			return fail(err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if links++; links > maxLinks {
				return fail(&fs.PathError{Op: "openat", Path: rel, Err: syscall.ELOOP})
			}
			target, err := cur().Readlink(n)
			if err != nil {
				return fail(changed(n))
			}
			if target == "" || path.IsAbs(target) {
				return fail(escapeError(rel))
			}
			todo = append(strings.Split(target, "/"), todo...)
			continue
		}
		if last {
			return done(n)
		}
		if !fi.IsDir() {
			return fail(&fs.PathError{Op: "openat", Path: rel, Err: syscall.ENOTDIR})
		}
		sub, err := access.openDir(cur(), n)
		if err != nil {
			return fail(err)
		}
		stack = append(stack, sub)
	}
	return done(".")
}

// errEscapes has the text of os.Root's own error for a path that leads
// outside it, which fsproto.IsEscape knows.
var errEscapes = errors.New("path escapes from parent")

func escapeError(rel string) error {
	return &fs.PathError{Op: "openat", Path: rel, Err: errEscapes}
}

// lstatIn, statIn, removeIn and ReadlinkIn are os.Root's Lstat, Stat,
// Remove and Readlink of the path rel of root, done on its last element in
// the folder Walk opened.
func lstatIn(root *os.Root, rel string) (fs.FileInfo, error) {
	return onLast(root, rel, false, func(d *os.Root, n string) (fs.FileInfo, error) { return d.Lstat(n) })
}

func statIn(root *os.Root, rel string) (fs.FileInfo, error) {
	return onLast(root, rel, true, func(d *os.Root, n string) (fs.FileInfo, error) { return d.Lstat(n) })
}

func removeIn(root *os.Root, rel string) error {
	_, err := onLast(root, rel, false, func(d *os.Root, n string) (struct{}, error) { return struct{}{}, d.Remove(n) })
	return err
}

func ReadlinkIn(root *os.Root, rel string) (string, error) {
	return onLast(root, rel, false, func(d *os.Root, n string) (string, error) { return d.Readlink(n) })
}

func onLast[T any](root *os.Root, rel string, follow bool, op func(*os.Root, string) (T, error)) (T, error) {
	dir, n, err := Walk(root, rel, follow)
	if err != nil {
		var zero T
		return zero, err
	}
	defer dir.Close()
	return op(dir, n)
}

// RemoveAll removes the entry name (one path element) of dir and, when it
// is a folder, all it holds, each folder opened through OpenDir:
// os.Root.RemoveAll opens them with O_DIRECTORY, which gVisor follows when
// sandboxed code exchanges a folder for a link meanwhile, and would empty
// the link's target. A link is removed itself, never followed; an entry
// already gone is no error.
func RemoveAll(dir *os.Root, name string) error {
	return removeAll(dir, name, 0)
}

func removeAll(dir *os.Root, n string, depth int) error {
	if depth > maxDepth {
		return errorf(fsproto.CodeTooLarge, "%s: folders nested deeper than %d levels", n, maxDepth)
	}
	fi, err := dir.Lstat(n)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		sub, err := OpenDir(dir, n)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		err = removeEntries(sub, depth)
		sub.Close()
		if err != nil {
			return err
		}
	}
	if err := dir.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// removeEntries removes everything the folder dir holds.
func removeEntries(dir *os.Root, depth int) error {
	for {
		f, err := dir.Open(".")
		if err != nil {
			return err
		}
		ents, err := f.ReadDir(1024)
		f.Close()
		if err != nil && err != io.EOF {
			return err
		}
		if len(ents) == 0 {
			return nil
		}
		for _, e := range ents {
			if err := removeAll(dir, e.Name(), depth+1); err != nil {
				return err
			}
		}
	}
}
