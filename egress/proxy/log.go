package proxy

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"sync"
	"time"
)

// Record is one decision: one JSON line in the decision log.
type Record struct {
	Time   time.Time `json:"time"`
	Scope  string    `json:"scope"`
	Method string    `json:"method"`
	Host   string    `json:"host"`
	Port   int       `json:"port"`
	// IP is the address dialled (allowed) or the one that caused the
	// denial; "" when no address was involved.
	IP string `json:"ip"`
	// PrivateIPs are, for an allowed request, the private addresses among
	// those the host resolved to (or its private literal): each had to be
	// in an allow_cidrs prefix, and a policy learnt from the log lists them.
	PrivateIPs []string `json:"private_ips,omitempty"`
	Decision   string   `json:"decision"` // "allow" or "deny"
	Code       string   `json:"code"`     // policy.Code*
	Reason     string   `json:"reason"`
	Status     int      `json:"status"` // the status the client got (200 for an open tunnel)
	// BytesOut went from the client to the upstream, BytesIn back.
	BytesOut   int64   `json:"bytes_out"`
	BytesIn    int64   `json:"bytes_in"`
	DurationMS float64 `json:"duration_ms"`
	Client     string  `json:"client"`
}

// BacklogMark is the line the sidecar's `logs -f` writes after the lines
// that were already there, before the ones that follow.
const BacklogMark = `{"mark":"backlog_end"}`

// Decisions.
const (
	Allow = "allow"
	Deny  = "deny"
)

// Logger writes records, one JSON line each, to W.
type Logger struct {
	mu    sync.Mutex
	w     io.Writer
	buf   *bufio.Writer // nil: unbuffered
	dirty bool
	stop  chan struct{}
	once  sync.Once
}

// NewLogger returns a Logger writing each record at once to w (nil:
// discard).
func NewLogger(w io.Writer) *Logger {
	if w == nil {
		w = io.Discard
	}
	return &Logger{w: w}
}

// NewBufferedLogger returns a Logger that writes to w at most every
// interval (and on Close): one write per batch instead of one per request.
func NewBufferedLogger(w io.Writer, interval time.Duration) *Logger {
	l := &Logger{w: w, buf: bufio.NewWriterSize(w, 64<<10), stop: make(chan struct{})}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
				l.Flush()
			}
		}
	}()
	return l
}

// Log writes r.
func (l *Logger) Log(r *Record) {
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf != nil {
		_, _ = l.buf.Write(b)
		l.dirty = true
		return
	}
	_, _ = l.w.Write(b)
}

// Flush writes what is buffered.
func (l *Logger) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf != nil && l.dirty {
		_ = l.buf.Flush()
		l.dirty = false
	}
}

// Close flushes and stops the flusher.
func (l *Logger) Close() {
	if l.stop != nil {
		l.once.Do(func() { close(l.stop) })
	}
	l.Flush()
}

// RotatingFile is an append-only file that is renamed to PATH.1 once it
// reaches Max bytes, so the log stays bounded at about twice Max.
type RotatingFile struct {
	Path string
	Max  int64

	mu     sync.Mutex
	f      *os.File
	size   int64
	closed bool
}

// Write appends p (one whole line) and rotates when the file is full.
func (r *RotatingFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, os.ErrClosed
	}
	if r.f == nil {
		if err := r.open(); err != nil {
			return 0, err
		}
	}
	if r.Max > 0 && r.size+int64(len(p)) > r.Max && r.size > 0 {
		r.f.Close()
		r.f = nil
		_ = os.Rename(r.Path, r.Path+".1")
		if err := r.open(); err != nil {
			return 0, err
		}
	}
	n, err := r.f.Write(p)
	r.size += int64(n)
	return n, err
}

func (r *RotatingFile) open() error {
	f, err := os.OpenFile(r.Path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	r.f, r.size = f, fi.Size()
	return nil
}

// Close closes the file.
func (r *RotatingFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}
