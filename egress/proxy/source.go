package proxy

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/docker-sandbox/docker-sandbox/egress/policy"
)

// Snapshot is one version of the policy, compiled.
type Snapshot struct {
	File  *policy.File
	rules map[string]*policy.Compiled
}

// NewSnapshot compiles f.
func NewSnapshot(f *policy.File) (*Snapshot, error) {
	s := &Snapshot{File: f, rules: map[string]*policy.Compiled{}}
	for name, sc := range f.Scopes {
		c, err := sc.Rules.Compile()
		if err != nil {
			return nil, fmt.Errorf("scope %s: %w", name, err)
		}
		s.rules[name] = c
	}
	return s, nil
}

// Rules returns the compiled rules of a scope.
func (s *Snapshot) Rules(scope string) *policy.Compiled { return s.rules[scope] }

// Source gives the proxy the current policy.
type Source interface {
	Current() (*Snapshot, error)
}

// Static is a fixed policy (tests).
type Static struct{ S *Snapshot }

// Current implements Source.
func (s Static) Current() (*Snapshot, error) { return s.S, nil }

// FileSource reads the policy file and re-reads it whenever it changes
// (checked with a stat at most every Every: a change takes effect within
// that time, without restarting the proxy). A file that no longer parses
// leaves the previous policy in force and is reported through OnError.
type FileSource struct {
	Path    string
	OnError func(error)
	// Every is how long a checked policy is trusted before the file is
	// looked at again (0: on every request).
	Every time.Duration

	mu   sync.Mutex
	cur  *Snapshot
	key  fileKey
	fi   os.FileInfo
	seen bool
	at   time.Time
}

type fileKey struct {
	exists bool
	size   int64
	mtime  time.Time
}

// Current implements Source.
func (fs *FileSource) Current() (*Snapshot, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.cur != nil && fs.Every > 0 && time.Since(fs.at) < fs.Every {
		return fs.cur, nil
	}
	fs.at = time.Now()
	var k fileKey
	fi, err := os.Stat(fs.Path)
	switch {
	case err == nil:
		k = fileKey{exists: true, size: fi.Size(), mtime: fi.ModTime()}
	case os.IsNotExist(err):
		k = fileKey{}
	default:
		if fs.cur != nil {
			return fs.cur, nil
		}
		return nil, err
	}
	// A rename replaces the file: compare identities too, so that two
	// writes within the clock's resolution are still seen.
	same := fs.fi == nil && fi == nil || fs.fi != nil && fi != nil && os.SameFile(fs.fi, fi)
	if fs.seen && k == fs.key && same && fs.cur != nil {
		return fs.cur, nil
	}
	fs.fi = fi
	f, err := policy.Load(fs.Path)
	if err == nil {
		var s *Snapshot
		if s, err = NewSnapshot(f); err == nil {
			fs.cur, fs.key, fs.seen = s, k, true
			return s, nil
		}
	}
	if fs.OnError != nil {
		fs.OnError(fmt.Errorf("policy %s: %w (keeping the previous policy)", fs.Path, err))
	}
	fs.key, fs.seen = k, true // do not re-read a bad file on every request
	if fs.cur != nil {
		return fs.cur, nil
	}
	return nil, err
}
