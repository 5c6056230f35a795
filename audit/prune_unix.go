//go:build unix

package audit

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// removeDay removes the regular *.jsonl files of the day folder path, then
// the folder. The folder is opened without following a link (a link put in
// its place since it was listed is refused), and each file is removed
// relative to that open folder. It reports whether the folder is gone.
func removeDay(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_DIRECTORY, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), FileExt) {
			if err := syscall.Unlinkat(int(f.Fd()), e.Name()); err != nil {
				return false, &os.PathError{Op: "remove", Path: filepath.Join(path, e.Name()), Err: err}
			}
		}
	}
	// rmdir: refuses a link, and a folder that holds anything else (which
	// stays, as it is: not ours to remove).
	switch err := syscall.Rmdir(path); err {
	case nil:
		return true, nil
	case syscall.ENOTEMPTY, syscall.EEXIST:
		return false, nil
	default:
		return false, &os.PathError{Op: "rmdir", Path: path, Err: err}
	}
}
