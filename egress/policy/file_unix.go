//go:build unix

package policy

import (
	"os"
	"syscall"
)

// Update changes the policy file at path under an exclusive lock (a
// sibling ".lock" file), so that concurrent changes of different scopes do
// not lose each other's updates, then writes it atomically.
func Update(path string, change func(*File) error) (*File, error) {
	lf, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return nil, err
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	f, err := Load(path)
	if err != nil {
		return nil, err
	}
	if err := change(f); err != nil {
		return nil, err
	}
	b := f.Marshal()
	if _, err := Parse(b); err != nil {
		return nil, err
	}
	if err := WriteAtomic(path, b, 0o600); err != nil {
		return nil, err
	}
	return f, nil
}

// Lock takes an exclusive lock on path (through a sibling ".lock" file)
// and returns its release.
func Lock(path string) (func(), error) {
	lf, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		lf.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
		lf.Close()
	}, nil
}
