package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// Filter selects records.
type Filter struct {
	Scope string    // "" for every scope; else a valid name
	Since time.Time // zero for all
}

// Reader reads the records under Dir, in time order within each pass;
// with Follow it keeps reading lines appended since.
type Reader struct {
	Dir    string
	Filter Filter
	// Poll is how often Follow looks for new lines (0: 250ms).
	Poll time.Duration

	offsets map[string]int64 // bytes of each file already read
}

// Read calls each on every record that passes the filter, in time order.
func (r *Reader) Read(each func(Record) error) error {
	return r.pass(each)
}

// Follow reads as Read, then the records appended since, until ctx ends
// (which is not an error).
func (r *Reader) Follow(ctx context.Context, each func(Record) error) error {
	poll := r.Poll
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if err := r.pass(each); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// pass reads what is new in every file of the filter's days, in time order.
func (r *Reader) pass(each func(Record) error) error {
	if r.offsets == nil {
		r.offsets = map[string]int64{}
	}
	if r.Filter.Scope != "" && !core.ValidName(r.Filter.Scope) {
		return core.ValidateName("scope", r.Filter.Scope)
	}
	days, err := r.days()
	if err != nil {
		return err
	}
	for _, day := range days {
		var recs []Record
		files, err := r.files(day)
		if err != nil {
			return err
		}
		for _, f := range files {
			if recs, err = r.readNew(f, recs); err != nil {
				return err
			}
		}
		slices.SortStableFunc(recs, func(a, b Record) int { return a.Time.Compare(b.Time) })
		for _, rec := range recs {
			if err := each(rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// days lists the day folders on or after the filter's day, oldest first.
func (r *Reader) days() ([]string, error) {
	entries, err := os.ReadDir(r.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	since := ""
	if !r.Filter.Since.IsZero() {
		since = r.Filter.Since.UTC().Format(dayLayout)
	}
	var out []string
	for _, e := range entries {
		if _, ok := isDay(e.Name()); ok && e.IsDir() && e.Name() >= since {
			out = append(out, filepath.Join(r.Dir, e.Name()))
		}
	}
	slices.Sort(out)
	return out, nil
}

// files lists a day's audit files of the filter's scope (all: every
// SCOPE.jsonl whose SCOPE is a valid name).
func (r *Reader) files(day string) ([]string, error) {
	if r.Filter.Scope != "" {
		p := filepath.Join(day, r.Filter.Scope+FileExt)
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			return []string{p}, nil
		}
		return nil, nil
	}
	entries, err := os.ReadDir(day)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		scope, ok := strings.CutSuffix(e.Name(), FileExt)
		if ok && core.ValidName(scope) && e.Type().IsRegular() {
			out = append(out, filepath.Join(day, e.Name()))
		}
	}
	return out, nil
}

// readNew appends to recs the records of the complete lines of path after
// what was read before. A line that does not parse is skipped.
func (r *Reader) readNew(path string, recs []Record) ([]Record, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return recs, nil
	}
	if err != nil {
		return recs, err
	}
	defer f.Close()
	off := r.offsets[path]
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return recs, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return recs, err
	}
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		return recs, nil // no complete line yet
	}
	r.offsets[path] = off + int64(end) + 1
	for line := range bytes.Lines(data[:end+1]) {
		var rec Record
		if json.Unmarshal(line, &rec) != nil {
			continue
		}
		if r.Filter.Scope != "" && rec.Scope != r.Filter.Scope {
			continue
		}
		if !r.Filter.Since.IsZero() && rec.Time.Before(r.Filter.Since) {
			continue
		}
		recs = append(recs, rec)
	}
	return recs, nil
}
