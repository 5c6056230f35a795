package fsproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Uploads (`fs put --framed`, `fs tar-in --framed`) are framed so that the
// helper can tell a finished upload from an interrupted one: a plugin that is
// killed, or a source that fails, closes the stream without the final empty
// chunk, and the helper then keeps the old file (or removes what the copy
// wrote) instead of committing a truncated one.
//
//	chunk = [4 bytes: big-endian uint32 length][length bytes]
//	stream = chunk* [0 0 0 0]
//
// Nothing may follow the empty chunk.

// MaxChunk is the largest chunk.
const MaxChunk = 1 << 20

// ErrNotCommitted is returned by a CommitReader whose stream ended before
// the final empty chunk.
var ErrNotCommitted = errors.New("the upload ended before it was complete (interrupted?)")

// CommitReader reads a framed stream and returns io.EOF only after the final
// empty chunk.
type CommitReader struct {
	r    io.Reader
	left uint32
	done bool
	err  error
}

// NewCommitReader returns a CommitReader on r.
func NewCommitReader(r io.Reader) *CommitReader { return &CommitReader{r: r} }

func (c *CommitReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.done {
		return 0, io.EOF
	}
	for c.left == 0 {
		var hdr [4]byte
		if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				err = ErrNotCommitted
			}
			c.err = err
			return 0, err
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n == 0 {
			c.done = true
			return 0, io.EOF
		}
		if n > MaxChunk {
			c.err = fmt.Errorf("bad upload framing: a chunk of %d bytes", n)
			return 0, c.err
		}
		c.left = n
	}
	if uint32(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= uint32(n)
	if err == io.EOF {
		if c.left > 0 {
			err = ErrNotCommitted
			c.err = err
		} else {
			err = nil
		}
	} else if err != nil {
		c.err = err
	}
	return n, err
}

// Framer is an io.Reader that frames what it reads from its source: chunks,
// then the final empty chunk once the source reaches io.EOF. When the source
// fails, Framer returns the source's error and never the final chunk, so the
// helper sees an uncommitted upload. Err reports the source's error.
type Framer struct {
	src  io.Reader
	buf  []byte
	out  []byte // pending bytes of the current chunk (header included)
	eof  bool
	done bool
	err  error

	mu     sync.Mutex
	srcErr error // err, for Err from another goroutine
}

// NewFramer returns a Framer reading src.
func NewFramer(src io.Reader) *Framer {
	return &Framer{src: src, buf: make([]byte, 4+256<<10)}
}

// Err is the error the source failed with, if it did. It may be called
// while another goroutine reads.
func (f *Framer) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.srcErr
}

func (f *Framer) fail(err error) {
	f.err = err
	f.mu.Lock()
	f.srcErr = err
	f.mu.Unlock()
}

func (f *Framer) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		if f.done {
			return 0, io.EOF
		}
		if f.eof {
			binary.BigEndian.PutUint32(f.buf[:4], 0)
			f.out = f.buf[:4]
			f.done = true
			break
		}
		n, err := f.src.Read(f.buf[4:])
		if n > 0 {
			binary.BigEndian.PutUint32(f.buf[:4], uint32(n))
			f.out = f.buf[:4+n]
		}
		if err == io.EOF {
			f.eof = true
		} else if err != nil {
			f.fail(err)
			if n > 0 {
				// Never send data the source could not vouch for.
				f.out = nil
			}
		}
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

// WriteTo writes the framed stream to w in whole chunks (one write per
// chunk, header included), for io.Copy.
func (f *Framer) WriteTo(w io.Writer) (int64, error) {
	var total int64
	if len(f.out) > 0 {
		n, err := w.Write(f.out)
		total += int64(n)
		f.out = nil
		if err != nil {
			return total, err
		}
	}
	for !f.done {
		if f.err != nil {
			return total, f.err
		}
		var chunk []byte
		if f.eof {
			binary.BigEndian.PutUint32(f.buf[:4], 0)
			chunk = f.buf[:4]
			f.done = true
		} else {
			n, err := io.ReadAtLeast(f.src, f.buf[4:], 1)
			if err == io.EOF {
				f.eof = true
				continue
			}
			if err != nil && err != io.ErrUnexpectedEOF {
				f.fail(err)
				return total, err
			}
			binary.BigEndian.PutUint32(f.buf[:4], uint32(n))
			chunk = f.buf[:4+n]
		}
		n, err := w.Write(chunk)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// CommitWriter writes a framed stream; Commit writes the final empty chunk.
type CommitWriter struct {
	w io.Writer
}

// NewCommitWriter returns a CommitWriter on w.
func NewCommitWriter(w io.Writer) *CommitWriter { return &CommitWriter{w: w} }

func (c *CommitWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		n := min(len(p), MaxChunk)
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(n))
		if _, err := c.w.Write(hdr[:]); err != nil {
			return written, err
		}
		m, err := c.w.Write(p[:n])
		written += m
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// Commit ends the stream: the upload is complete.
func (c *CommitWriter) Commit() error {
	_, err := c.w.Write([]byte{0, 0, 0, 0})
	return err
}
