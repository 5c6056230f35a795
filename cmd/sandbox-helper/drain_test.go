package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// The drain protocol, in process: a drain with no run wins and a later run
// refuses to start; a drain while a run holds the lock is busy; undo, or a
// stale flag, lets runs start again.
func TestDrain(t *testing.T) {
	dir := t.TempDir()
	lock, flag := filepath.Join(dir, "run.lock"), filepath.Join(dir, "draining")
	var out, errb bytes.Buffer
	if code := drain(nil, lock, flag, &out, &errb); code != 0 || !drainFlagFresh(flag) {
		t.Fatalf("idle drain: exit %d, %q %q", code, out.String(), errb.String())
	}
	if !enterRun(lock, flag) {
		t.Fatal("a run after the drain does not see it")
	}
	heldRunLock.Close() // as if that run ended
	heldRunLock = nil
	if code := drain([]string{"--undo"}, lock, flag, &out, &errb); code != 0 {
		t.Fatalf("undo: exit %d", code)
	}
	if enterRun(lock, flag) {
		t.Fatal("after undo a run still sees the drain")
	}
	// That run holds the lock: a drain is busy and writes no flag.
	out.Reset()
	if code := drain(nil, lock, flag, &out, &errb); code != exitDrainBusy || strings.TrimSpace(out.String()) != "busy" {
		t.Fatalf("drain during a run: exit %d, %q", code, out.String())
	}
	if _, err := os.Stat(flag); err == nil {
		t.Fatal("a busy drain wrote the flag")
	}
	heldRunLock.Close()
	heldRunLock = nil
	// A flag a dead stop/rm left long ago does not stop runs.
	if code := drain(nil, lock, flag, &out, &errb); code != 0 {
		t.Fatalf("drain: exit %d", code)
	}
	old := time.Now().Add(-drainFresh - time.Minute)
	if err := os.Chtimes(flag, old, old); err != nil {
		t.Fatal(err)
	}
	if enterRun(lock, flag) {
		t.Fatal("a stale flag stops runs")
	}
	heldRunLock.Close()
	heldRunLock = nil
	if code := drain([]string{"--bogus"}, lock, flag, &out, &errb); code != 2 {
		t.Fatalf("bad argument: exit %d", code)
	}
}

// A drained sandbox: `run` reports ErrDraining before Started and runs no
// program; after undo it runs it, after a Started frame.
func TestRunRefusedWhenDraining(t *testing.T) {
	dir := t.TempDir()
	env := []string{envRunLock + "=" + filepath.Join(dir, "run.lock"), envDrainFlag + "=" + filepath.Join(dir, "draining")}
	if err := os.WriteFile(filepath.Join(dir, "draining"), []byte("1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "ran")
	args := []string{"run", "--interp", "sh", "--timeout", "10s", "--max-output", "100", "--"}
	r := runHelper(t, codeStdin("touch "+marker+"; echo ran", nil), env, args...)
	if r.status.ErrorCode != wire.ErrDraining || r.exitCode != 125 || r.started || len(r.stdout) != 0 {
		t.Fatalf("draining: status %+v, exit %d, started %v, stdout %q", r.status, r.exitCode, r.started, r.stdout)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the program ran in a draining sandbox")
	}
	if err := os.Remove(filepath.Join(dir, "draining")); err != nil {
		t.Fatal(err)
	}
	r = runHelper(t, codeStdin("touch "+marker+"; echo ran", nil), env, args...)
	if r.status.ErrorCode != "" || !r.started || string(r.stdout) != "ran\n" {
		t.Fatalf("after undo: status %+v, started %v, stdout %q", r.status, r.started, r.stdout)
	}
}
