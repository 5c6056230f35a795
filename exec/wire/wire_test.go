package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFramesRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	fw := NewFrameWriter(&buf)
	big := bytes.Repeat([]byte("x"), MaxFrame+10)
	_ = fw.WriteFrame(Stdout, []byte("hello"))
	_ = fw.WriteFrame(Stderr, nil)
	_ = fw.WriteFrame(Stdout, big)
	_ = fw.WriteFrame(Status, []byte(`{"exit_code":3}`))
	fr := NewFrameReader(&buf)
	type frame struct {
		Typ byte
		N   int
	}
	var got []frame
	for {
		typ, p, err := fr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, frame{typ, len(p)})
	}
	want := []frame{{Stdout, 5}, {Stderr, 0}}
	for n := MaxFrame + 10; n > 0; n -= writeChunk {
		want = append(want, frame{Stdout, min(n, writeChunk)})
	}
	want = append(want, frame{Status, 15})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

// Every frame is one write, and output frames are writes of at most
// PipeAtomic bytes (a pipe never interleaves other writers' writes into
// them).
func TestFrameWritesAtomic(t *testing.T) {
	var w writeLog
	fw := NewFrameWriter(&w)
	_ = fw.WriteFrame(Stdout, bytes.Repeat([]byte("o"), 3*PipeAtomic+1))
	_ = fw.WriteFrame(Stderr, bytes.Repeat([]byte("e"), PipeAtomic-8))
	_ = fw.WriteFrame(Started, nil)
	_ = fw.WriteFrame(Status, bytes.Repeat([]byte("s"), 2*PipeAtomic))
	var sizes []int
	for _, b := range w {
		sizes = append(sizes, len(b))
	}
	want := []int{PipeAtomic, PipeAtomic, PipeAtomic, 8 + 3*PipeAtomic + 1 - 3*writeChunk, PipeAtomic, 8, 8 + 2*PipeAtomic}
	if diff := cmp.Diff(want, sizes); diff != "" {
		t.Fatalf("write sizes (-want +got):\n%s", diff)
	}
	fr := NewFrameReader(bytes.NewReader(bytes.Join(w, nil)))
	for _, b := range w {
		typ, p, err := fr.Next()
		if err != nil || typ != b[0] || !bytes.Equal(p, b[8:]) {
			t.Fatalf("frame %d %q: %v", typ, p, err)
		}
	}
}

// writeLog keeps each write as it came.
type writeLog [][]byte

func (w *writeLog) Write(p []byte) (int, error) {
	*w = append(*w, bytes.Clone(p))
	return len(p), nil
}

func TestFrameReaderRejectsGarbage(t *testing.T) {
	for name, in := range map[string][]byte{
		"bad type":      {9, 0, 0, 0, 0, 0, 0, 1, 'x'},
		"nonzero pad":   {1, 1, 0, 0, 0, 0, 0, 1, 'x'},
		"too long":      {1, 0, 0, 0, 0x7f, 0, 0, 0},
		"short header":  {1, 0, 0},
		"short payload": {1, 0, 0, 0, 0, 0, 0, 5, 'a'},
	} {
		_, _, err := NewFrameReader(bytes.NewReader(in)).Next()
		if !errors.Is(err, ErrBadFrame) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

func TestCodeHeader(t *testing.T) {
	var buf bytes.Buffer
	_ = WriteCodeHeader(&buf, 42)
	n, err := ReadCodeHeader(&buf)
	if err != nil || n != 42 {
		t.Fatal(n, err)
	}
	buf.Reset()
	_ = WriteCodeHeader(&buf, MaxCode+1)
	if _, err := ReadCodeHeader(&buf); err == nil {
		t.Fatal("over-limit code accepted")
	}
}

// The reader never panics, returns only known frame types with payloads of
// at most MaxFrame, and what it reads is exactly what the writer would
// write for those frames (so the framing cannot be desynchronised: bytes
// it accepted re-encode to themselves).
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 2, 'h', 'i', 3, 0, 0, 0, 0, 0, 0, 2, '{', '}'})
	f.Add([]byte{4, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1, 'x'})
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		fr := NewFrameReader(bytes.NewReader(in))
		var again []byte
		consumed := 0
		for i := 0; i < 1000; i++ {
			typ, p, err := fr.Next()
			if err != nil {
				break
			}
			if typ < Stdout || typ > Started || len(p) > MaxFrame {
				t.Fatalf("bad frame %d %d", typ, len(p))
			}
			again = appendFrame(again, typ, p)
			consumed += 8 + len(p)
		}
		if consumed > len(in) || !bytes.Equal(again, in[:min(consumed, len(in))]) {
			t.Fatalf("frames read from %x re-encode to %x", in[:min(consumed, len(in))], again)
		}
	})
}
