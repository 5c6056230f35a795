//go:build !linux

package tarsafe

import (
	"errors"
	"os"
	"time"
)

// fastCreate: files are created through os.Root's calls (see
// extract_linux.go).
const fastCreate = false

var errNoFastCreate = errors.New("not on this system")

func createIn(*os.File, string) (*os.File, error) { return nil, errNoFastCreate }

func setTimes(*os.File, time.Time) error { return errNoFastCreate }

// renameIn and linkIn: os.Root's own (see extract_linux.go).
func renameIn(root *os.Root, from, to string) error { return root.Rename(from, to) }

func linkIn(root *os.Root, from, to string) error { return root.Link(from, to) }
