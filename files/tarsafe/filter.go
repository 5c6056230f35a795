package tarsafe

import (
	"archive/tar"
	"bufio"
	"io"
	"strings"

	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
)

// FilterOptions tune Filter.
type FilterOptions struct {
	Limits
	// Contents renames the archive's top folder to ".": the stream then
	// holds what the folder holds (a source ending in "/.").
	Contents bool
	// Strict refuses the archive (path_escape) when a symbolic link in the
	// copied folder leads outside it; by default such a link is left out
	// of the stream and reported in Result.Skipped, as Extract does.
	Strict bool
}

// Filter copies an archive made by Create (from a hostile sender) from r to
// w for a receiver that extracts it without tarsafe's care (`cp SRC -`,
// piped into tar): it refuses what Extract refuses (absolute names, "..",
// entries through a symbolic link of the archive, hard links, which Create
// never makes), leaves out (or, Strict, refuses) symbolic links that lead
// outside the copied folder, drops devices, FIFOs and sockets, strips
// setuid, setgid and sticky bits, and applies the limits. The result
// counts what passed. When it fails, w has received part of the archive and
// no end-of-archive marker.
func Filter(w io.Writer, r io.Reader, o FilterOptions) (*Result, error) {
	lim := o.Limits.Norm()
	res := newResult()
	br := bufio.NewReaderSize(r, 64<<10)
	tr := tar.NewReader(br)
	bw := bufio.NewWriterSize(w, 256<<10)
	tw := tar.NewWriter(bw)
	buf := make([]byte, 256<<10)
	var entries, total int64
	top := ""
	links := map[string]bool{} // symbolic links of the archive
	rename := func(n string) string {
		if !o.Contents {
			return n
		}
		if n == top {
			return "."
		}
		return "." + n[len(top):]
	}
	throughLink := func(n string) bool {
		for i := 0; i < len(n); i++ {
			if n[i] == '/' && links[n[:i]] {
				return true
			}
		}
		return false
	}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, classify(err)
		}
		entries++
		if entries > lim.MaxEntries {
			return nil, errorf(fsproto.CodeTooLarge, "the copy has more than %d entries (the limit: --max-entries or copy_max_entries)", lim.MaxEntries)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, err := CleanName(h.Name)
		if err != nil {
			return nil, err
		}
		if name == "" {
			return nil, errorf(fsproto.CodeBadArchive, "entry %q names the archive's root", h.Name)
		}
		if top == "" {
			top = name
			if containsSlash(top) {
				return nil, errorf(fsproto.CodeBadArchive, "the archive must start with the copied file or folder, not %q", h.Name)
			}
			if o.Contents && h.Typeflag != tar.TypeDir {
				return nil, errorf(fsproto.CodeNotDirectory, "the source is not a folder: \"/.\" copies a folder's contents")
			}
		} else if name != top && !strings.HasPrefix(name, top+"/") {
			return nil, errorf(fsproto.CodePathEscape, "entry %q lies outside the copied folder %q: refused", name, top)
		}
		if throughLink(name) {
			return nil, errorf(fsproto.CodePathEscape, "entry %q lies under a symbolic link of the archive: refused", name)
		}
		out := &tar.Header{Name: rename(name), Mode: h.Mode &^ 0o7000, ModTime: h.ModTime, Uid: h.Uid, Gid: h.Gid, Typeflag: h.Typeflag}
		if h.Mode&0o7000 != 0 {
			res.strip(name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			out.Name += "/"
			res.Dirs++
		case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
			out.Typeflag = tar.TypeReg
			if h.Size < 0 {
				return nil, errorf(fsproto.CodeBadArchive, "entry %q has a negative size", h.Name)
			}
			if total+h.Size > lim.MaxBytes {
				return nil, tooLarge(name, h.Size, lim.MaxBytes, "the copy", "--max-size or copy_max_size")
			}
			if h.Size > lim.MaxEntryBytes {
				return nil, tooLarge(name, h.Size, lim.MaxEntryBytes, "one file", "--max-file-size or copy_max_file_size")
			}
			total += h.Size
			out.Size = h.Size
			res.Files++
			res.Bytes += h.Size
		case tar.TypeSymlink:
			if len(links) >= maxDeferred {
				return nil, errorf(fsproto.CodeTooLarge, "the copy has more than %d symbolic links", maxDeferred)
			}
			// Entries under a link are refused, written or not.
			links[name] = true
			// A link must stay inside the copied folder. The copied path
			// itself, a link, is checked from the receiver's folder and
			// refused when it leads out (there is nothing else to copy).
			if name == top {
				if !LinkInside(name, h.Linkname) {
					return nil, errorf(fsproto.CodePathEscape, "%s is a symbolic link to %q, which leads outside the copy: refused", name, h.Linkname)
				}
			} else if !LinkInside(name[len(top)+1:], h.Linkname) {
				if o.Strict {
					return nil, errorf(fsproto.CodePathEscape, "%s is a symbolic link to %q, which leads outside the copy: refused (--strict)", name, h.Linkname)
				}
				res.skipLink(name, fsproto.TypeSymlink, linkReason(h.Linkname), h.Linkname)
				continue
			}
			out.Linkname = h.Linkname
			res.Symlinks++
		case tar.TypeLink:
			// Create never makes hard links.
			return nil, errorf(fsproto.CodePathEscape, "%s is a hard link to %q: refused", name, h.Linkname)
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			res.skip(name, skippedType(h), "devices, FIFOs and sockets are not copied")
			continue
		default:
			res.skip(name, typeName(h.Typeflag), "unsupported entry type")
			continue
		}
		if err := tw.WriteHeader(out); err != nil {
			return nil, err
		}
		if out.Size > 0 {
			n, err := io.CopyBuffer(tw, io.LimitReader(tr, out.Size), buf)
			if err == nil && n < out.Size {
				err = io.ErrUnexpectedEOF
			}
			if err != nil {
				return nil, classify(err)
			}
		}
	}
	if _, err := io.CopyN(io.Discard, br, maxTrailing+1); err != io.EOF {
		if err == nil {
			return nil, errorf(fsproto.CodeBadArchive, "more than %d bytes follow the end of the archive", maxTrailing)
		}
		return nil, classify(err)
	}
	if top == "" {
		return nil, errorf(fsproto.CodeBadArchive, "the archive is empty")
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	return res, nil
}
