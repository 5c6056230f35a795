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
	want := []frame{{Stdout, 5}, {Stderr, 0}, {Stdout, MaxFrame}, {Stdout, 10}, {Status, 15}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
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
		var again bytes.Buffer
		fw := NewFrameWriter(&again)
		consumed := 0
		for i := 0; i < 1000; i++ {
			typ, p, err := fr.Next()
			if err != nil {
				break
			}
			if typ < Stdout || typ > Started || len(p) > MaxFrame {
				t.Fatalf("bad frame %d %d", typ, len(p))
			}
			if err := fw.WriteFrame(typ, p); err != nil {
				t.Fatal(err)
			}
			consumed += 8 + len(p)
		}
		if consumed > len(in) || !bytes.Equal(again.Bytes(), in[:min(consumed, len(in))]) {
			t.Fatalf("frames read from %x re-encode to %x", in[:min(consumed, len(in))], again.Bytes())
		}
	})
}
