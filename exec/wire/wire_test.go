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

// The reader never panics and never returns a payload over MaxFrame.
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 2, 'h', 'i', 3, 0, 0, 0, 0, 0, 0, 2, '{', '}'})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		fr := NewFrameReader(bytes.NewReader(in))
		for i := 0; i < 1000; i++ {
			typ, p, err := fr.Next()
			if err != nil {
				return
			}
			if typ < Stdout || typ > Status || len(p) > MaxFrame {
				t.Fatalf("bad frame %d %d", typ, len(p))
			}
		}
	})
}
