// Package tarsafe extracts and creates tar archives through os.Root, for
// archives that come from a hostile party: `docker sandbox cp` uses it on the
// host (extracting what a sandbox sent into the destination the user named)
// and inside the sandbox (the helper extracting what the user sent into
// /opt/workspace or /opt/user, and archiving from there). It depends on the
// standard library only, like the helper.
//
// Extraction (Extract):
//
//   - every entry is written through an os.Root, so no path, and no symbolic
//     link (one in the archive or one that was already in the destination),
//     can make it write outside the destination;
//   - names that are absolute, contain "..", a NUL byte or are longer than
//     MaxNameLen are refused (path_escape / bad_archive); so are hard links
//     to anything but a file this same archive wrote;
//   - a symbolic link whose target is absolute or leads outside the copied
//     tree (lexically, through other links, or from where it lands when the
//     merge follows a link the destination already had) is not written and
//     is reported in Result.Skipped, and the rest of the copy completes;
//     Options.Strict refuses the whole copy instead (path_escape). When the
//     copied path is itself such a link, the copy is refused either way;
//   - character and block devices, FIFOs and sockets are skipped and
//     reported; setuid, setgid and sticky bits are stripped and reported;
//   - Limits cap the total size of the files, the size of one file and the
//     number of entries (too_large);
//   - the archive is written into a fresh staging folder inside the
//     destination and moved into place only once it was read completely and
//     checked, so a refused, capped, truncated or interrupted copy leaves
//     nothing it wrote behind (a new destination appears at once, by one
//     rename); existing files it replaces are replaced by rename, never
//     written through, so a hard or symbolic link planted in their place
//     redirects nothing.
//
// Creation (Create) walks the source through os.Root, opening every folder
// relative to its parent's handle: symbolic links are archived as links and
// never followed, and a folder swapped for a symbolic link while the walk
// runs cannot make it read anything outside the root.
package tarsafe

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"unicode/utf8"

	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
)

// Defaults of Limits.
const (
	DefaultMaxBytes   int64 = 2 << 30
	DefaultMaxEntries int64 = 1_000_000
	// MaxNameLen is the longest entry name accepted.
	MaxNameLen = 4096
	// maxDepth bounds how deep a walk goes.
	maxDepth = 512
	// maxReported bounds the skipped and stripped names a Result lists.
	maxReported = 100
	// maxDeferred bounds the folders whose restrictive modes are applied at
	// the end of an extraction.
	maxDeferred = 1 << 16
	// maxTrailing bounds what may follow the end of an archive.
	maxTrailing = 1 << 20
)

// Limits cap a copy. Zero values mean the defaults.
type Limits struct {
	// MaxBytes caps the total size of the files (DefaultMaxBytes).
	MaxBytes int64
	// MaxEntryBytes caps the size of one file (MaxBytes).
	MaxEntryBytes int64
	// MaxEntries caps the number of entries (DefaultMaxEntries).
	MaxEntries int64
}

// Norm returns l with the defaults filled in.
func (l Limits) Norm() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxEntryBytes <= 0 || l.MaxEntryBytes > l.MaxBytes {
		l.MaxEntryBytes = l.MaxBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	return l
}

// Skipped is an entry that was not copied.
type Skipped struct {
	// Name is the entry's name in the archive (the source's path, from the
	// copied folder's name), as a string: bytes that are not UTF-8 are
	// replaced by U+FFFD in JSON; NameBytes then holds them exactly.
	Name   string `json:"name"`
	Type   string `json:"type"`
	Reason string `json:"reason"`
	// LinkTarget is a skipped symbolic link's target ("" for the rest);
	// LinkTargetBytes holds it exactly when it is not UTF-8.
	LinkTarget      string `json:"link_target"`
	NameBytes       []byte `json:"name_bytes,omitempty"`
	LinkTargetBytes []byte `json:"link_target_bytes,omitempty"`
}

// NewSkipped returns a Skipped entry, with the exact bytes of a name or
// link target that is not valid UTF-8.
func NewSkipped(name, typ, reason, target string) Skipped {
	s := Skipped{Name: name, Type: typ, Reason: reason, LinkTarget: target}
	if !utf8.ValidString(name) {
		s.NameBytes = []byte(name)
	}
	if !utf8.ValidString(target) {
		s.LinkTargetBytes = []byte(target)
	}
	return s
}

// Result counts what a copy wrote (or, for Create, archived).
type Result struct {
	Files     int64 `json:"files"`
	Dirs      int64 `json:"dirs"`
	Symlinks  int64 `json:"symlinks"`
	Hardlinks int64 `json:"hardlinks"`
	Bytes     int64 `json:"bytes"`
	// Skipped lists (at most 100 of) the entries not copied: devices,
	// FIFOs, sockets, unknown types, and symbolic links that lead outside
	// the copy (unless Strict). SkippedCount counts all of them.
	Skipped      []Skipped `json:"skipped"`
	SkippedCount int64     `json:"skipped_count"`
	// Stripped lists (at most 100 of) the entries whose setuid, setgid or
	// sticky bits were removed; StrippedCount counts all of them.
	Stripped      []string `json:"stripped"`
	StrippedCount int64    `json:"stripped_count"`
}

func newResult() *Result { return &Result{Skipped: []Skipped{}, Stripped: []string{}} }

func (r *Result) skip(name, typ, reason string) { r.skipLink(name, typ, reason, "") }

func (r *Result) skipLink(name, typ, reason, target string) {
	r.SkippedCount++
	if len(r.Skipped) < maxReported {
		r.Skipped = append(r.Skipped, NewSkipped(name, typ, reason, target))
	}
}

// Reasons a symbolic link is skipped (or, with Strict, refused).
const (
	ReasonLinkAbsolute = "an absolute symbolic link: it leads outside the copy"
	ReasonLinkOut      = "a symbolic link that leads outside the copy"
	ReasonLinkChain    = "a symbolic link that leads outside the copy through other links"
	ReasonLinkLanded   = "a symbolic link that leads outside the destination from where it landed (through a link the destination already had)"
	// ReasonLinkExisting: a link of a copy out that would land in a
	// folder the host had before the copy (Options.Host).
	ReasonLinkExisting = "a symbolic link is not written into a folder of this machine that was there before the copy (a later copy could write through it)"
)

// linkReason says why a link whose target LinkInside refused leads out.
func linkReason(target string) string {
	if strings.HasPrefix(target, "/") || (runtime.GOOS == "windows" && filepath.IsAbs(target)) {
		return ReasonLinkAbsolute
	}
	return ReasonLinkOut
}

func (r *Result) strip(name string) {
	r.StrippedCount++
	if len(r.Stripped) < maxReported {
		r.Stripped = append(r.Stripped, name)
	}
}

func errorf(code, format string, args ...any) *fsproto.Error {
	return fsproto.Errorf(code, format, args...)
}

// CleanName checks an archive entry's name and returns it cleaned and
// slash-separated, "" for the archive's root itself ("." or "./"). Absolute
// names, ".." components and NUL bytes are path_escape errors; empty and
// over-long names are bad_archive errors.
func CleanName(name string) (string, error) {
	if name == "" {
		return "", errorf(fsproto.CodeBadArchive, "an entry of the archive has an empty name")
	}
	if len(name) > MaxNameLen {
		return "", errorf(fsproto.CodeBadArchive, "an entry's name is %d bytes long, over the %d byte limit", len(name), MaxNameLen)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", errorf(fsproto.CodePathEscape, "entry %q: the name contains a NUL byte: refused", name)
	}
	if name[0] == '/' {
		return "", errorf(fsproto.CodePathEscape, "entry %q has an absolute name: refused", name)
	}
	if runtime.GOOS == "windows" && (strings.ContainsAny(name, `\:`) || filepath.IsAbs(name)) {
		return "", errorf(fsproto.CodePathEscape, "entry %q: backslashes and colons are refused in names on Windows", name)
	}
	parts := strings.Split(name, "/")
	out := parts[:0]
	for _, p := range parts {
		switch p {
		case "", ".":
			continue
		case "..":
			return "", errorf(fsproto.CodePathEscape, "entry %q: the name contains \"..\": refused", name)
		}
		out = append(out, p)
	}
	c := strings.Join(out, "/")
	if c != "" && !filepath.IsLocal(filepath.FromSlash(c)) {
		return "", errorf(fsproto.CodePathEscape, "entry %q: not a local name: refused", name)
	}
	return c, nil
}

// LinkInside reports whether a symbolic link named name (a cleaned name
// relative to the destination's root) with the given target stays inside
// the destination. The target must be relative, and may go up with ".."
// only at its start: "../lib/x" is fine from "a/b", "x/../../y" is not (x
// could itself be a link, and the kernel would resolve ".." from where x
// leads, not lexically).
func LinkInside(name, target string) bool {
	if target == "" || strings.IndexByte(target, 0) >= 0 || target[0] == '/' {
		return false
	}
	if runtime.GOOS == "windows" && (strings.ContainsAny(target, `\:`) || filepath.IsAbs(target)) {
		return false
	}
	ups, seenName := 0, false
	for _, p := range strings.Split(target, "/") {
		switch p {
		case "", ".":
		case "..":
			if seenName {
				return false
			}
			ups++
		default:
			seenName = true
		}
	}
	depth := strings.Count(name, "/") // folders above the link, inside the root
	return ups <= depth
}

// randomName is a name nobody can guess, for staging folders and temporary
// files.
func randomName(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// StagingPrefix starts the names of the staging folders and temporary files
// of a copy in progress.
const StagingPrefix = ".sandbox-cp-"

func typeName(flag byte) string {
	switch flag {
	case '3':
		return fsproto.TypeCharDevice
	case '4':
		return fsproto.TypeBlockDevice
	case '6':
		return fsproto.TypeFIFO
	}
	return fmt.Sprintf("type %q", flag)
}

func permOf(mode int64, keep bool, umask fs.FileMode) fs.FileMode {
	p := fs.FileMode(mode) & fs.ModePerm
	if !keep {
		p &^= umask
	}
	return p
}

func split(p string) (dir, base string) {
	d, b := path.Split(p)
	d = strings.TrimSuffix(d, "/")
	if d == "" {
		d = "."
	}
	return d, b
}

func join(a, b string) string {
	switch {
	case a == "" || a == ".":
		return b
	case b == "" || b == ".":
		return a
	}
	return a + "/" + b
}

// tooLarge is the error of a file over a size cap.
func tooLarge(name string, size, limit int64, what, flag string) error {
	return errorf(fsproto.CodeTooLarge, "%s (%s) would take %s over its %s limit (%s): the copy stopped and what it wrote was removed",
		name, HumanSize(size), what, HumanSize(limit), flag)
}

// HumanSize prints n bytes with a binary unit: "2 GiB", "1.5 MiB", "12 B".
func HumanSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	s := fmt.Sprintf("%.1f", f)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + units[i]
}
