package files

import (
	"io"
	"sync"
)

// bufPipe is io.Pipe with a buffer between its ends, for the stream out of
// a sandbox: the engine's stream arrives in frames of at most 32 KiB, and
// with io.Pipe every frame handed the consumer (tar extraction) its own
// goroutine switch and wake-up. Here the writer blocks only when size bytes
// wait unread, and the reader is woken once low bytes (or the end) are
// there and takes all it can in one read.
type bufPipe struct {
	mu      sync.Mutex
	cond    sync.Cond
	buf     []byte // ring
	off, n  int    // where the unread bytes start, how many
	low     int
	werr    error // the writer closed: reads return it once the buffer is empty
	wclosed bool
	rerr    error // the reader closed: writes return it
	waitR   bool  // the reader waits for bytes
	waitW   bool  // the writer waits for room
}

func newBufPipe(size, low int) (*bufPipeReader, *bufPipeWriter) {
	p := &bufPipe{buf: make([]byte, size), low: low}
	p.cond.L = &p.mu
	return &bufPipeReader{p}, &bufPipeWriter{p}
}

func (p *bufPipe) read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.n == 0 || (p.n < p.low && p.n < len(b) && !p.wclosed && p.rerr == nil) {
		if p.rerr != nil {
			return 0, io.ErrClosedPipe
		}
		if p.n == 0 && p.wclosed {
			return 0, p.werr
		}
		p.waitR = true
		p.cond.Wait()
		p.waitR = false
	}
	if p.rerr != nil {
		return 0, io.ErrClosedPipe
	}
	total := 0
	for total < len(b) && p.n > 0 {
		end := min(p.off+p.n, len(p.buf))
		c := copy(b[total:], p.buf[p.off:end])
		total += c
		p.off = (p.off + c) % len(p.buf)
		p.n -= c
	}
	if p.n == 0 {
		p.off = 0
	}
	if p.waitW {
		p.cond.Broadcast()
	}
	return total, nil
}

func (p *bufPipe) write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	written := 0
	for len(b) > 0 {
		for p.n == len(p.buf) && p.rerr == nil {
			if p.waitR {
				p.cond.Broadcast()
			}
			p.waitW = true
			p.cond.Wait()
			p.waitW = false
		}
		if p.rerr != nil {
			return written, p.rerr
		}
		if p.wclosed {
			return written, io.ErrClosedPipe
		}
		start := (p.off + p.n) % len(p.buf)
		end := len(p.buf)
		if start < p.off {
			end = p.off
		}
		c := copy(p.buf[start:end], b)
		p.n += c
		written += c
		b = b[c:]
		if p.waitR && p.n >= p.low {
			p.cond.Broadcast()
		}
	}
	return written, nil
}

func (p *bufPipe) closeWrite(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wclosed {
		return
	}
	if err == nil {
		err = io.EOF
	}
	p.werr, p.wclosed = err, true
	p.cond.Broadcast()
}

func (p *bufPipe) closeRead(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rerr != nil {
		return
	}
	if err == nil {
		err = io.ErrClosedPipe
	}
	p.rerr = err
	p.cond.Broadcast()
}

// bufPipeReader is the read end of a bufPipe.
type bufPipeReader struct{ p *bufPipe }

func (r *bufPipeReader) Read(b []byte) (int, error) { return r.p.read(b) }

// CloseWithError closes the read end: writes return err (io.ErrClosedPipe
// for nil).
func (r *bufPipeReader) CloseWithError(err error) { r.p.closeRead(err) }

// bufPipeWriter is the write end of a bufPipe.
type bufPipeWriter struct{ p *bufPipe }

func (w *bufPipeWriter) Write(b []byte) (int, error) { return w.p.write(b) }

// CloseWithError closes the write end: reads return err (io.EOF for nil)
// once the bytes written before are read.
func (w *bufPipeWriter) CloseWithError(err error) { w.p.closeWrite(err) }
