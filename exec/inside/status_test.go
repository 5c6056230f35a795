package inside

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// statLine is a /proc/PID/stat line with the given state and starttime.
func statLine(pid, comm string, state byte, start int) string {
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
	// cmajflt utime stime cutime cstime priority nice threads itreal starttime ...
	return pid + " (" + comm + ") " + string(state) + " 0 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 " +
		strconv.Itoa(start) + " 1000 100 18446744073709551615\n"
}

func writeProcFile(t *testing.T, root, pid, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, pid, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestStatStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		state byte
		start uint64
		bad   bool
	}{
		{name: "plain", in: statLine("7", "sh", 'S', 4242), state: 'S', start: 4242},
		{name: "comm with spaces and parens", in: statLine("8", "a) (b c", 'R', 99), state: 'R', start: 99},
		{name: "short", in: "9 (x) S 1 1\n", bad: true},
		{name: "no comm", in: "9 x S", bad: true},
		{name: "bad number", in: "9 (x) S 0 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 zz 1\n", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, start, err := statStart([]byte(tc.in))
			if tc.bad {
				if err == nil {
					t.Fatalf("want an error, got state %c start %d", st, start)
				}
				return
			}
			if err != nil || st != tc.state || start != tc.start {
				t.Fatalf("got %c %d %v, want %c %d", st, start, err, tc.state, tc.start)
			}
		})
	}
}

func TestReadStatus(t *testing.T) {
	boot := time.Unix(1_700_000_000, 0)
	at := func(ticks int) *time.Time {
		v := boot.Add(time.Duration(ticks) * time.Second / clockTicks).UTC()
		return &v
	}
	newRoot := func(t *testing.T, procs map[string]string) string {
		root := fakeProc(t, procs)
		if err := os.WriteFile(filepath.Join(root, "stat"), []byte("cpu 1 2 3\nbtime 1700000000\nprocesses 5\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return root
	}
	t.Run("idle: idle_since is the later of PID 1's start and /tmp's change", func(t *testing.T) {
		root := newRoot(t, map[string]string{
			"1":  statLine("1", "sandbox-helper", 'S', 1000),
			"40": statLine("40", "sandbox-helper", 'R', 5000), // the status call itself
			"41": statLine("41", "sh", 'Z', 4000),             // a zombie does not count
		})
		tmp := t.TempDir()
		mt := boot.Add(30 * time.Second).UTC()
		if err := os.Chtimes(tmp, mt, mt); err != nil {
			t.Fatal(err)
		}
		got, err := readStatus(root, tmp, 40)
		if err != nil {
			t.Fatal(err)
		}
		want := statusReport{PID1Started: at(1000), Busy: false, Processes: []statusProcess{}, IdleSince: &mt}
		sameJSON(t, want, got)
	})
	t.Run("idle: a /tmp older than PID 1 leaves PID 1's start", func(t *testing.T) {
		root := newRoot(t, map[string]string{"1": statLine("1", "sandbox-helper", 'S', 1000)})
		tmp := t.TempDir()
		old := boot.Add(-time.Hour)
		if err := os.Chtimes(tmp, old, old); err != nil {
			t.Fatal(err)
		}
		got, err := readStatus(root, tmp, 99)
		if err != nil || got.IdleSince == nil || !got.IdleSince.Equal(*at(1000)) {
			t.Fatalf("idle_since %v (err %v), want PID 1's start %v", got.IdleSince, err, at(1000))
		}
	})
	t.Run("busy: wrappers by kind, no idle_since", func(t *testing.T) {
		root := newRoot(t, map[string]string{
			"1":  statLine("1", "sandbox-helper", 'S', 1000),
			"50": statLine("50", "sandbox-helper", 'S', 2000),
			"51": statLine("51", "python3", 'S', 2001),
			"60": statLine("60", "sandbox-helper", 'S', 3000),
			"70": statLine("70", "bash", 'S', 3500),
		})
		writeProcFile(t, root, "50", "cmdline", "/opt/sandbox/sandbox-helper\x00run\x00--token\x00abc\x00")
		writeProcFile(t, root, "51", "cmdline", "python3\x00/tmp/x/code.py\x00")
		writeProcFile(t, root, "60", "cmdline", "/opt/sandbox/sandbox-helper\x00fs\x00ls\x00")
		writeProcFile(t, root, "70", "cmdline", "bash\x00-i\x00")
		got, err := readStatus(root, t.TempDir(), 99)
		if err != nil {
			t.Fatal(err)
		}
		want := statusReport{PID1Started: at(1000), Busy: true, Processes: []statusProcess{
			{PID: 50, Kind: "run", Started: at(2000)},
			{PID: 51, Kind: "other", Started: at(2001)},
			{PID: 60, Kind: "fs", Started: at(3000)},
			{PID: 70, Kind: "other", Started: at(3500)},
		}}
		sameJSON(t, want, got)
	})
	t.Run("no proc listing", func(t *testing.T) {
		if _, err := readStatus(filepath.Join(t.TempDir(), "none"), t.TempDir(), 1); err == nil {
			t.Fatal("want an error without a proc filesystem")
		}
	})
}

func TestNewestUnder(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	mk := func(t *testing.T) string {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"a/old", "a/b/new"} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		times := map[string]time.Time{
			".": now.Add(-10 * time.Hour), "a": now.Add(-9 * time.Hour), "a/b": now.Add(-8 * time.Hour),
			"a/old": now.Add(-7 * time.Hour), "a/b/new": now.Add(-2 * time.Hour),
		}
		for _, f := range []string{"a/old", "a/b/new", "a/b", "a", "."} {
			if err := os.Chtimes(filepath.Join(dir, f), times[f], times[f]); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	t.Run("finds the newest file deep down", func(t *testing.T) {
		dir := mk(t)
		rep := newestUnder([]string{dir}, 100, now)
		p := rep.Paths[0]
		if !p.Complete || p.Entries != 5 || p.Bytes != 2 || p.Newest == nil || !p.Newest.Equal(now.Add(-2*time.Hour)) {
			t.Fatalf("got %+v, newest %v", p, p.Newest)
		}
	})
	t.Run("a link to something newer is not followed", func(t *testing.T) {
		dir := mk(t)
		target := t.TempDir()
		for _, f := range []string{"x", "y", "z"} {
			if err := os.WriteFile(filepath.Join(target, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(target, filepath.Join(dir, "a", "link")); err != nil {
			t.Fatal(err)
		}
		// The link itself is one entry; what it points to is not walked.
		if p := newestUnder([]string{dir}, 100, now).Paths[0]; p.Entries != 6 {
			t.Fatalf("walk followed the link: %+v", p)
		}
	})
	t.Run("a future time is ignored", func(t *testing.T) {
		dir := mk(t)
		for i, f := range []string{"a/b/new", "a/b", "."} {
			fut := now.Add(time.Duration(i+1) * time.Second)
			if i == 0 {
				fut = now.Add(1000 * time.Hour)
			}
			if err := os.Chtimes(filepath.Join(dir, f), fut, fut); err != nil {
				t.Fatal(err)
			}
		}
		// The newest honest time is a/old's; the three planted ones are counted.
		p := newestUnder([]string{dir}, 100, now).Paths[0]
		if p.Newest == nil || !p.Newest.Equal(now.Add(-7*time.Hour)) || p.Future != 3 || !p.Complete || p.Entries != 5 {
			t.Fatalf("got %+v, newest %v; want a/old's %v and 3 future", p, p.Newest, now.Add(-7*time.Hour))
		}
	})
	t.Run("every time in the future: no newest", func(t *testing.T) {
		dir := mk(t)
		fut := now.Add(time.Hour)
		for _, f := range []string{"a/old", "a/b/new", "a/b", "a", "."} {
			if err := os.Chtimes(filepath.Join(dir, f), fut, fut); err != nil {
				t.Fatal(err)
			}
		}
		p := newestUnder([]string{dir}, 100, now).Paths[0]
		if p.Newest != nil || p.Future != 5 || !p.Complete {
			t.Fatalf("got %+v, newest %v; want none and 5 future", p, p.Newest)
		}
	})
	t.Run("now itself is not the future", func(t *testing.T) {
		dir := mk(t)
		if err := os.Chtimes(filepath.Join(dir, "a", "old"), now, now); err != nil {
			t.Fatal(err)
		}
		p := newestUnder([]string{dir}, 100, now).Paths[0]
		if p.Newest == nil || !p.Newest.Equal(now) || p.Future != 0 {
			t.Fatalf("got %+v, newest %v", p, p.Newest)
		}
	})
	t.Run("too many entries: incomplete", func(t *testing.T) {
		p := newestUnder([]string{mk(t)}, 3, now).Paths[0]
		if p.Complete || p.Entries != 3 {
			t.Fatalf("got %+v, want incomplete after 3 entries", p)
		}
	})
	t.Run("missing directory", func(t *testing.T) {
		p := newestUnder([]string{filepath.Join(t.TempDir(), "none")}, 10, now).Paths[0]
		if p.Complete || p.Error == "" || p.Newest != nil {
			t.Fatalf("got %+v, want an error", p)
		}
	})
}

// sameJSON fails unless want and got encode to the same JSON (the schema the
// plugin reads).
func sameJSON(t *testing.T, want, got any) {
	t.Helper()
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(got)
	if string(w) != string(g) {
		t.Fatalf("report:\nwant %s\ngot  %s", w, g)
	}
}
