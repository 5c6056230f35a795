// Package wire is the byte protocol between the plugin and the in-container
// helper (cmd/sandbox-helper, exec/inside). It depends on the standard library only, so the
// helper stays a small static binary.
//
// Plugin -> helper (the exec's stdin, `sandbox-helper run` only):
//
//	[8 bytes: big-endian uint64 code length][code bytes][raw program stdin ...]
//
// Helper -> plugin (the exec's stdout): a sequence of frames
//
//	[1 byte type][3 zero bytes][4 bytes: big-endian uint32 payload length][payload]
//
// A Started frame (empty) says that the run passed its checks and will read
// the program's stdin: the plugin sends stdin only after it, so that a run
// refused before it (ErrDraining) can be tried again with nothing consumed.
// Type Stdout and Stderr carry the program's output; exactly one Status frame
// (JSON, see Status) ends a run. Because the helper frames everything the
// program writes, sandboxed code cannot forge a Status frame.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Frame types.
const (
	Stdout byte = 1
	Stderr byte = 2
	Status byte = 3
	// Started precedes the program's output (see the package comment).
	Started byte = 4
)

// FSPreamble is what `sandbox-helper fs` writes on its stdout before
// anything else, once it checked that the container is the sandbox asked
// for: output without it is not the file server's (the engine writes its
// reason for not starting an exec into the exec's stream).
const FSPreamble = "\x00docker-sandbox-fs\n"

// MaxFrame is the largest payload a frame may carry.
const MaxFrame = 1 << 20

// MaxCode is the largest program the plugin sends.
const MaxCode = 64 << 20

// Error codes a Status may carry in ErrorCode.
const (
	ErrInterpreterNotFound = "interpreter_not_found"      // exit 127
	ErrInterpreterNoExec   = "interpreter_not_executable" // exit 126
	ErrSpecMismatch        = "spec_mismatch"
	ErrBadRequest          = "bad_request"
	ErrInternal            = "helper_error"
	// ErrDraining: a stop or rm is removing the sandbox, or it is ending;
	// nothing ran.
	ErrDraining = "draining"
	// ErrNotSandbox: the container is not the sandbox the request is for
	// (its PID 1 names another target, or is not the helper's init);
	// nothing ran.
	ErrNotSandbox = "not_a_sandbox"
	// ErrDiskLimit: the sandbox's data is over its disk limit: a run is
	// refused (nothing ran), or was stopped when the limit was passed.
	ErrDiskLimit = "disk_limit"
	// ErrLifetime: the sandbox reached its max lifetime while the run was
	// going; the program was killed and the sandbox removed.
	ErrLifetime = "lifetime_reached"
	// ErrStreamTampered: the code on stdin is not the code the plugin sent
	// (its SHA-256 differs): other code of the sandbox wrote into the run's
	// stdin (gVisor); nothing ran.
	ErrStreamTampered = "stream_tampered"
	// ErrKernelDied: the kernel of an `exec --kernel` call ended during
	// the call (its code exited or was killed, out of memory, a signal):
	// its state is lost, and the next call starts a fresh kernel. The
	// output up to then was sent.
	ErrKernelDied = "kernel_died"
)

// RunStatus ends every `sandbox-helper run`.
type RunStatus struct {
	ExitCode        int    `json:"exit_code"`
	Signal          int    `json:"signal,omitempty"` // signal number that killed the program, 0 if none
	TimedOut        bool   `json:"timed_out"`
	OOMKilled       bool   `json:"oom_killed"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	DurationMS      int64  `json:"duration_ms"`
	ErrorCode       string `json:"error_code,omitempty"`
	Error           string `json:"error,omitempty"`
	// Kernel calls (RunArgs.Kernel) only:
	// Result is the value of the cell's last expression (repr in python,
	// util.inspect in node); nil when it has none (or it is None/undefined).
	Result *string `json:"result,omitempty"`
	// KernelRestarted: this call started a fresh kernel where one had run
	// (it died, was killed at a timeout, or was reset), or, at a timeout,
	// killed it; StateLost: the kernel's state (variables, imports) is gone.
	KernelRestarted bool `json:"kernel_restarted,omitempty"`
	StateLost       bool `json:"state_lost,omitempty"`
}

// FrameWriter writes frames; it is safe for concurrent use.
type FrameWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// NewFrameWriter returns a FrameWriter on w.
func NewFrameWriter(w io.Writer) *FrameWriter { return &FrameWriter{w: w} }

// PipeAtomic is PIPE_BUF on Linux: a write of at most this many bytes to a
// pipe lands whole, never interleaved with other writers' writes.
const PipeAtomic = 4096

// writeChunk is the largest output payload one frame carries, so that a
// frame is one write of at most PipeAtomic bytes.
const writeChunk = PipeAtomic - 8

// WriteFrame writes p as frames of type typ, each with one write. Output
// (Stdout, Stderr) is cut into frames of at most PipeAtomic bytes, header
// included: under a runtime that lets other code of the sandbox open the
// wrapper's stdout (gVisor, see statusCheck in package exec), that code's
// writes of whole frames then land between the wrapper's frames, never
// inside one, and the reader can judge them as frames. A Status or Started
// is always one frame.
func (fw *FrameWriter) WriteFrame(typ byte, p []byte) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	chunk := MaxFrame
	if typ == Stdout || typ == Stderr {
		chunk = writeChunk
	}
	for {
		n := min(len(p), chunk)
		fw.buf = appendFrame(fw.buf[:0], typ, p[:n])
		if _, err := fw.w.Write(fw.buf); err != nil {
			return err
		}
		p = p[n:]
		if len(p) == 0 {
			return nil
		}
	}
}

// appendFrame appends the frame of typ carrying p to dst.
func appendFrame(dst []byte, typ byte, p []byte) []byte {
	dst = append(dst, typ, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(p)))
	return append(dst, p...)
}

// ErrBadFrame reports a malformed frame.
var ErrBadFrame = errors.New("wire: malformed frame")

// FrameReader reads frames.
type FrameReader struct {
	r   io.Reader
	buf []byte
}

// NewFrameReader returns a FrameReader on r.
func NewFrameReader(r io.Reader) *FrameReader { return &FrameReader{r: r} }

// Next returns the next frame. The payload is valid until the next call.
// At a clean end of stream it returns io.EOF.
func (fr *FrameReader) Next() (byte, []byte, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(fr.r, hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return 0, nil, fmt.Errorf("%w: short header", ErrBadFrame)
		}
		return 0, nil, err
	}
	typ := hdr[0]
	n := binary.BigEndian.Uint32(hdr[4:])
	if typ < Stdout || typ > Started || hdr[1] != 0 || hdr[2] != 0 || hdr[3] != 0 || n > MaxFrame {
		return 0, nil, fmt.Errorf("%w: header %x", ErrBadFrame, hdr)
	}
	if cap(fr.buf) < int(n) {
		fr.buf = make([]byte, n)
	}
	fr.buf = fr.buf[:n]
	if _, err := io.ReadFull(fr.r, fr.buf); err != nil {
		return 0, nil, fmt.Errorf("%w: short payload: %v", ErrBadFrame, err)
	}
	return typ, fr.buf, nil
}

// WriteCodeHeader writes the stdin prefix announcing n bytes of code.
func WriteCodeHeader(w io.Writer, n int64) error {
	var hdr [8]byte
	binary.BigEndian.PutUint64(hdr[:], uint64(n))
	_, err := w.Write(hdr[:])
	return err
}

// ReadCodeHeader reads the stdin prefix and returns the code length.
func ReadCodeHeader(r io.Reader) (int64, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, fmt.Errorf("wire: reading code header: %w", err)
	}
	n := binary.BigEndian.Uint64(hdr[:])
	if n > MaxCode {
		return 0, fmt.Errorf("wire: code of %d bytes is over the %d byte limit", n, MaxCode)
	}
	return int64(n), nil
}
