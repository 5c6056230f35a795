package tarsafe

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// makeSmallTree makes dirs folders of per files of 1 KiB under dir/small.
func makeSmallTree(b *testing.B, dir string, dirs, per int) {
	b.Helper()
	data := bytes.Repeat([]byte{'x'}, 1024)
	for d := 0; d < dirs; d++ {
		sub := filepath.Join(dir, "small", fmt.Sprintf("d%d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := 0; f < per; f++ {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%02d", f)), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkCreateSmall archives 10,000 files of 1 KiB (the bench-cp.sh
// tree): the sending side's per-entry cost.
func BenchmarkCreateSmall(b *testing.B) {
	dir := b.TempDir()
	makeSmallTree(b, dir, 100, 100)
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	var buf bytes.Buffer
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf.Reset()
		if _, err := Create(&buf, root, "small", CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExtractSmall extracts the archive of 10,000 files of 1 KiB into
// a new folder: the receiving side's per-entry cost.
func BenchmarkExtractSmall(b *testing.B) {
	dir := b.TempDir()
	makeSmallTree(b, dir, 100, 100)
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	var buf bytes.Buffer
	if _, err := Create(&buf, root, "small", CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	out := b.TempDir()
	dst, err := os.OpenRoot(out)
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Extract(dst, Dest{Path: fmt.Sprintf("x%d", i)}, bytes.NewReader(buf.Bytes()), Options{Umask: 0o022}); err != nil {
			b.Fatal(err)
		}
	}
}
