package audit

import (
	"errors"
	"os"
	"path/filepath"
	"time"
)

// Prune removes the day folders of dir older than days days before now's
// UTC date (days <= 0: none), by their names alone: an entry is a day only
// when its name is exactly an 8-digit date and it is a folder itself (a
// symbolic link is never followed nor removed). In a day, only regular
// files named *.jsonl are removed, then the folder if that left it empty
// (else it stays); nothing is walked below it. It returns the days it
// removed.
func Prune(dir string, days int, now time.Time) ([]string, error) {
	if days <= 0 {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	y, m, d := now.UTC().Date()
	cutoff := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).AddDate(0, 0, -days)
	var removed []string
	var errs []error
	for _, e := range entries {
		t, ok := isDay(e.Name())
		if !ok || !t.Before(cutoff) || e.Type() != os.ModeDir {
			continue
		}
		gone, err := removeDay(filepath.Join(dir, e.Name()))
		if err != nil {
			errs = append(errs, err)
		}
		if gone {
			removed = append(removed, e.Name())
		}
	}
	return removed, errors.Join(errs...)
}
