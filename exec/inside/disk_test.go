package inside

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func blocks(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// TestMeasureDisk: allocated blocks of everything under the roots, links
// not followed (a link to a big tree outside counts as the link), each
// inode once (hard links, a root given twice), sparse files by their
// blocks, and a folder chmodded away is made readable and counted.
func TestMeasureDisk(t *testing.T) {
	outside := t.TempDir()
	big := make([]byte, 1<<20)
	if err := os.WriteFile(filepath.Join(outside, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	mk := func(rel string, n int) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("a/f1", 100000)
	mk("a/b/f2", 300000)
	if err := os.Link(filepath.Join(root, "a/f1"), filepath.Join(root, "a/hard")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(root, "a/rootlink")); err != nil {
		t.Fatal(err)
	}
	sparse, err := os.Create(filepath.Join(root, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sparse.Truncate(10 << 30); err != nil {
		t.Fatal(err)
	}
	sparse.Close()
	mk("locked/inside/f3", 200000)
	var want int64
	for _, p := range []string{"", "a", "a/f1", "a/b", "a/b/f2", "out", "a/rootlink", "sparse", "locked", "locked/inside", "locked/inside/f3"} {
		want += blocks(t, filepath.Join(root, p))
	}
	if err := os.Chmod(filepath.Join(root, "locked"), 0); err != nil {
		t.Fatal(err)
	}
	r := measureDisk([]string{root, root})
	if !r.complete || r.used != want {
		t.Fatalf("measureDisk = %d bytes (complete %v, %s), want %d", r.used, r.complete, r.problem, want)
	}
	if r.used >= 1<<30 {
		t.Fatalf("the sparse file counted by its size: %d", r.used)
	}
	// (As root the folder is readable whatever its mode: the e2e disk test
	// runs this as the sandbox's user.)
	if fi, err := os.Stat(filepath.Join(root, "locked")); err != nil || (os.Geteuid() != 0 && fi.Mode().Perm()&0o700 != 0o700) {
		t.Fatalf("the chmodded-away folder was not made readable to its owner: %v %v", fi.Mode(), err)
	}
	if r := measureDisk([]string{filepath.Join(root, "missing")}); !r.complete || r.used != 0 {
		t.Fatalf("a missing root: %+v", r)
	}
	// A root that is a link is not followed.
	if r := measureDisk([]string{filepath.Join(root, "out")}); r.complete {
		t.Fatalf("a root that is a link was measured: %+v", r)
	}
}

// TestMeasureDiskSwapRace: code swaps a folder for a link to / while the
// walk runs: the walk never leaves the root (it would count / and fail on
// unreadable folders there) and never changes anything outside it.
func TestMeasureDiskSwapRace(t *testing.T) {
	root := t.TempDir()
	for i := 0; i < 50; i++ {
		d := filepath.Join(root, "d", string(rune('a'+i%26))+string(rune('a'+i/26)))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f"), make([]byte, 4096), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		l := filepath.Join(root, "l")
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.RemoveAll(l)
			_ = os.MkdirAll(filepath.Join(l, "sub"), 0o755)
			_ = os.RemoveAll(l)
			_ = os.Symlink("/", l)
		}
	}()
	deadline := time.Now().Add(2 * time.Second)
	n := 0
	for time.Now().Before(deadline) {
		r := measureDisk([]string{root})
		if !r.complete {
			t.Fatalf("a swap made the walk incomplete: %s", r.problem)
		}
		if r.used > 64<<20 {
			t.Fatalf("the walk left the root: %d bytes", r.used)
		}
		n++
	}
	close(stop)
	<-done
	t.Logf("%d walks", n)
}
