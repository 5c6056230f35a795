package files

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"testing"
	"time"
)

// TestBufPipeBytes: whatever the sizes of writes and reads, the reader gets
// every byte in order, then the writer's error.
func TestBufPipeBytes(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, size := range []int{1, 7, 4096, 1 << 20} {
		n := 3 << 20
		if size < 4096 {
			n = 100 << 10
		}
		data := make([]byte, n+rng.Intn(1000))
		rng.Read(data)
		pr, pw := newBufPipe(size, min(size, 128<<10))
		boom := errors.New("boom")
		go func() {
			rest := data
			for len(rest) > 0 {
				n := min(len(rest), 1+rng.Intn(40000))
				if _, err := pw.Write(rest[:n]); err != nil {
					t.Errorf("write: %v", err)
					return
				}
				rest = rest[n:]
			}
			pw.CloseWithError(boom)
		}()
		var got bytes.Buffer
		buf := make([]byte, 70000)
		var err error
		for {
			var n int
			n, err = pr.Read(buf[:1+len(got.Bytes())%len(buf)])
			got.Write(buf[:n])
			if err != nil {
				break
			}
		}
		if !errors.Is(err, boom) {
			t.Fatalf("size %d: the read ended with %v, want the writer's error", size, err)
		}
		if !bytes.Equal(got.Bytes(), data) {
			t.Fatalf("size %d: got %d bytes, not the %d written (or not in order)", size, got.Len(), len(data))
		}
	}
}

// TestBufPipeEOF: a writer closed without error is io.EOF after the bytes;
// a reader that waits for more than the low mark gets what is there.
func TestBufPipeEOF(t *testing.T) {
	pr, pw := newBufPipe(1<<10, 512)
	if _, err := pw.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	pw.CloseWithError(nil)
	b, err := io.ReadAll(pr)
	if err != nil || string(b) != "abc" {
		t.Fatalf("got %q, %v; want \"abc\", nil", b, err)
	}
}

// TestBufPipeReaderClose: a writer blocked on a full buffer returns the
// reader's error once the reader closes; later writes too.
func TestBufPipeReaderClose(t *testing.T) {
	pr, pw := newBufPipe(16, 8)
	stop := errors.New("stopped")
	done := make(chan error, 1)
	go func() {
		_, err := pw.Write(make([]byte, 100)) // more than the buffer holds
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the write of 100 bytes into 16 returned (%v) before the reader closed", err)
	case <-time.After(50 * time.Millisecond):
	}
	pr.CloseWithError(stop)
	select {
	case err := <-done:
		if !errors.Is(err, stop) {
			t.Fatalf("the blocked write returned %v, want the reader's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked write did not return after the reader closed")
	}
	if _, err := pw.Write([]byte("x")); !errors.Is(err, stop) {
		t.Fatalf("a later write returned %v, want the reader's error", err)
	}
	if _, err := pr.Read(make([]byte, 4)); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("a read after closing returned %v, want io.ErrClosedPipe", err)
	}
}
