package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// DirMode and FileMode are the modes of what Append creates: the records
// are the user's alone.
const (
	DirMode  = 0o700
	FileMode = 0o600
)

// FileExt ends every audit file's name: SCOPE.jsonl.
const FileExt = ".jsonl"

// dayLayout names a day's folder: the UTC date of its records.
const dayLayout = "20060102"

// lockWait bounds how long Append waits for another writer's lock on the
// same file before it writes without it (its write is one O_APPEND
// write(2), which the kernel does not interleave with others on a local
// file system): a stuck holder never slows a command for longer.
const lockWait = 500 * time.Millisecond

// Writer appends records under Dir.
type Writer struct {
	Dir string
	// MaxCode and MaxOutput cap Code and each of Stdout and Stderr (a
	// record longer than that is cut and marked truncated).
	MaxCode, MaxOutput int
	// RetentionDays: after its first Append, the Writer removes the day
	// folders older than this (0: keep everything). See Prune.
	RetentionDays int
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	pruneOnce sync.Once
}

func (w *Writer) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// Path is the file of a scope's records of a day: Dir/YYYYMMDD/SCOPE.jsonl.
// scope must be a valid name (core.ValidName): no path is ever built from
// anything else.
func Path(dir, scope string, t time.Time) (string, error) {
	if !core.ValidName(scope) {
		return "", fmt.Errorf("audit: invalid scope name %q", scope)
	}
	return filepath.Join(dir, t.UTC().Format(dayLayout), scope+FileExt), nil
}

// Append writes rec as one line of its scope's file of the day of
// rec.Time (now when zero), creating the folders (0700) and the file
// (0600) as needed. The line is one write(2) on a file opened with
// O_APPEND, under an exclusive flock of the file: concurrent writers never
// interleave. The caps are applied first.
func (w *Writer) Append(rec Record) error {
	if rec.Time.IsZero() {
		rec.Time = w.now()
	}
	rec.Time = rec.Time.UTC()
	if w.Dir == "" {
		return errors.New("audit: no audit folder")
	}
	path, err := Path(w.Dir, rec.Scope, rec.Time)
	if err != nil {
		return err
	}
	w.capRecord(&rec)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rec); err != nil { // one line, ending in \n
		return fmt.Errorf("audit: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), DirMode); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	// The audit folder and the day's folder: this user's, writable by no
	// one else, and not links (checked from the top, so nothing below a
	// checked folder can be swapped by another user).
	for _, d := range []string{w.Dir, filepath.Dir(path)} {
		fi, err := os.Lstat(d)
		if err == nil && !fi.IsDir() {
			err = fmt.Errorf("%s is not a folder", d)
		}
		if err == nil {
			err = private(d, fi, false)
		}
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}
	if err := appendLine(path, buf.Bytes()); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if w.RetentionDays > 0 {
		w.pruneOnce.Do(func() { _, err = Prune(w.Dir, w.RetentionDays, w.now()) })
	}
	return err
}

func (w *Writer) capRecord(r *Record) {
	var cut bool
	if r.Code, cut = capText([]byte(r.Code), w.MaxCode); cut {
		r.CodeTruncated = true
	}
	if r.Stdout, cut = capText([]byte(r.Stdout), w.MaxOutput); cut {
		r.StdoutTruncated = true
	}
	if r.Stderr, cut = capText([]byte(r.Stderr), w.MaxOutput); cut {
		r.StderrTruncated = true
	}
}

// appendLine writes line to path with one write(2), O_APPEND, under the
// file's lock (see lockWait).
func appendLine(path string, line []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|openNoFollow, FileMode)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return err
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	} else if err := private(path, fi, true); err != nil {
		return err
	}
	unlock := lockFile(f, lockWait)
	n, err := f.Write(line)
	unlock()
	if err == nil && n != len(line) {
		err = fmt.Errorf("short write to %s", path)
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// isDay reports whether name is exactly an 8-digit date (YYYYMMDD) and
// returns it.
func isDay(name string) (time.Time, bool) {
	if len(name) != len(dayLayout) || strings.Trim(name, "0123456789") != "" {
		return time.Time{}, false
	}
	t, err := time.Parse(dayLayout, name)
	return t, err == nil
}
