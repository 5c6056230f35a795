package policy

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// FileVersion is the version of the policy file format.
const FileVersion = 1

// File is the sidecar's policy file: every proxy-mode scope's credential
// and rules. The proxy reads it (and re-reads it when it changes); the
// plugin changes it through `sandbox-helper proxy policy` in the sidecar.
type File struct {
	Version int              `json:"version"`
	Scopes  map[string]Scope `json:"scopes"`
}

// Scope is one scope's entry.
type Scope struct {
	// Token is the scope's secret: the password of the proxy URL its
	// sandboxes get (the user is the scope's name).
	Token string `json:"token"`
	Rules
	Updated time.Time `json:"updated"`
}

// ValidScope reports whether name is a valid scope name (core's rule).
func ValidScope(name string) bool { return core.ValidName(name) }

// NewToken returns a fresh random token (128 bits, hex).
func NewToken() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b)
}

// Parse reads and validates a policy file.
func Parse(b []byte) (*File, error) {
	f := &File{}
	if len(bytes.TrimSpace(b)) == 0 {
		return &File{Version: FileVersion, Scopes: map[string]Scope{}}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(f); err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	if f.Version != FileVersion {
		return nil, fmt.Errorf("policy file: version %d, want %d", f.Version, FileVersion)
	}
	if f.Scopes == nil {
		f.Scopes = map[string]Scope{}
	}
	for name, s := range f.Scopes {
		if !ValidScope(name) {
			return nil, fmt.Errorf("policy file: bad scope name %q", name)
		}
		if len(s.Token) < 16 {
			return nil, fmt.Errorf("policy file: scope %s has no usable token", name)
		}
		if _, err := s.Rules.Compile(); err != nil {
			return nil, fmt.Errorf("policy file: scope %s: %w", name, err)
		}
	}
	return f, nil
}

// Marshal returns the file's JSON, scopes sorted (encoding/json sorts map
// keys).
func (f *File) Marshal() []byte {
	b, _ := json.MarshalIndent(f, "", "  ")
	return append(b, '\n')
}

// Names returns the scope names, sorted.
func (f *File) Names() []string {
	out := make([]string, 0, len(f.Scopes))
	for n := range f.Scopes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Redacted returns a copy without tokens.
func (f *File) Redacted() *File {
	c := &File{Version: f.Version, Scopes: map[string]Scope{}}
	for n, s := range f.Scopes {
		s.Token = ""
		c.Scopes[n] = s
	}
	return c
}

// Authenticate returns the scope whose name and token match, comparing
// tokens in constant time.
func (f *File) Authenticate(scope, token string) (Scope, bool) {
	s, ok := f.Scopes[scope]
	if !ok {
		// Compare anyway, so that timing does not tell which scopes exist.
		subtle.ConstantTimeCompare([]byte(token), []byte("0000000000000000000000000000000000"))
		return Scope{}, false
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.Token)) != 1 {
		return Scope{}, false
	}
	return s, true
}

// Load reads the policy file at path; a missing file is an empty policy.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Parse(nil)
	}
	if err != nil {
		return nil, err
	}
	return Parse(b)
}

// WriteAtomic writes b to path through a temporary file and a rename, so
// that a reader sees the old or the new content, never a mix.
func WriteAtomic(path string, b []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name)
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(name, path)
}
