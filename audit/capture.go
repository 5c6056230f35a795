package audit

import (
	"io"
	"sync"
)

// Capture is a capped tee: what is written goes to the wrapped writer
// unchanged, and its first max bytes are kept for the record. It never
// holds more than max bytes, whatever passes through.
type Capture struct {
	w     io.Writer // nil: only capture
	max   int
	mu    sync.Mutex
	buf   []byte
	total int64
}

// NewCapture returns a Capture on w keeping at most max bytes (max < 0: 0).
func NewCapture(w io.Writer, max int) *Capture {
	if max < 0 {
		max = 0
	}
	return &Capture{w: w, max: max}
}

// Write writes p to the wrapped writer and keeps what fits under the cap.
// Its result is the wrapped writer's: capturing never fails a write.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	if room := c.max - len(c.buf); room > 0 {
		keep := p
		if len(keep) > room {
			keep = keep[:room]
		}
		c.buf = append(c.buf, keep...)
	}
	c.total += int64(len(p))
	c.mu.Unlock()
	if c.w == nil {
		return len(p), nil
	}
	return c.w.Write(p)
}

// Text returns what was kept, cut back to a UTF-8 boundary, and whether
// more was written than kept.
func (c *Capture) Text() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buf
	cut := c.total > int64(len(b))
	if cut {
		b = trimPartialRune(b)
	}
	return string(b), cut
}

// Total is how many bytes were written through.
func (c *Capture) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// CountingReader counts what is read through it (standard input sent to a
// program: the record's BytesIn).
type CountingReader struct {
	R io.Reader
	N int64
}

func (r *CountingReader) Read(p []byte) (int, error) {
	n, err := r.R.Read(p)
	r.N += int64(n)
	return n, err
}
