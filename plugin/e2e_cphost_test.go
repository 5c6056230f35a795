package plugin_test

import (
	"os"
	"path/filepath"
	"testing"
)

// A copy out never writes through a link on the host, wherever the link
// came from. The reported attack: the sandbox makes `results -> .ssh`, a
// first `cp S:results ~/` writes that link next to the user's .ssh, the
// sandbox turns results into a folder holding authorized_keys, and a second,
// identical copy merged it into ~/.ssh (also .git/hooks/pre-commit through
// `out -> .git/hooks`, and .bashrc through a copy named report.txt). Every
// step here runs on the route the pass selects (local, stream, frozen).
func TestCpOutPlantedLinks(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	home := t.TempDir()
	cpWriteHost(t, filepath.Join(home, ".ssh", "authorized_keys"), "mine\n", 0o600)
	cpWriteHost(t, filepath.Join(home, ".bashrc"), "rc\n", 0o644)
	cpWriteHost(t, filepath.Join(home, ".git", "hooks", "keep"), "K\n", 0o644)
	intact := func() {
		t.Helper()
		for p, want := range map[string]string{".ssh/authorized_keys": "mine\n", ".bashrc": "rc\n", ".git/hooks/keep": "K\n"} {
			if b, err := os.ReadFile(filepath.Join(home, p)); err != nil || string(b) != want {
				t.Fatalf("%s on the host: %q %v", p, b, err)
			}
		}
		for _, p := range []string{".ssh/k2", ".git/hooks/pre-commit", ".ssh/x"} {
			if _, err := os.Lstat(filepath.Join(home, p)); err == nil {
				t.Fatalf("%s was written on the host", p)
			}
		}
	}

	// 1. The copied path is a link: it is not written next to the user's
	// files (the first step of the attack).
	cpSh(t, s, "ln -s .ssh results && ln -s .bashrc report.txt")
	cpWantErr(t, sb(t, "cp", "--format", "json", s+":results", home+"/"), "path_escape")
	cpWantErr(t, sb(t, "cp", "--format", "json", s+":report.txt", home+"/report.txt"), "path_escape")
	if _, err := os.Lstat(filepath.Join(home, "results")); err == nil {
		t.Fatal("the link results was written on the host")
	}
	intact()

	// 2. Links an earlier copy (or anything else) left on the host are not
	// written through: a folder onto `results -> .ssh`, a file named as
	// `report.txt -> .bashrc`, a folder into `out/hooks -> ../.git/hooks`.
	for name, target := range map[string]string{"results": ".ssh", "report.txt": ".bashrc"} {
		if err := os.Symlink(target, filepath.Join(home, name)); err != nil {
			t.Fatal(err)
		}
	}
	cpWriteHost(t, filepath.Join(home, "out", "a"), "A\n", 0o644)
	if err := os.Symlink("../.git/hooks", filepath.Join(home, "out", "hooks")); err != nil {
		t.Fatal(err)
	}
	cpSh(t, s, `rm results report.txt && mkdir -p results out/hooks && echo evil > results/authorized_keys && echo evil > results/k2 &&
		echo evil > report.txt && printf '#!/bin/sh\necho evil\n' > out/hooks/pre-commit && chmod 755 out/hooks/pre-commit`)
	cpWantErr(t, sb(t, "cp", "--format", "json", s+":results", home+"/"), "path_escape")
	cpWantErr(t, sb(t, "cp", "--format", "json", s+":results", home), "path_escape")
	cpWantErr(t, sb(t, "cp", "--format", "json", s+":report.txt", filepath.Join(home, "report.txt")), "path_escape")
	cpWantErr(t, sb(t, "cp", "--format", "json", s+":out", home), "path_escape")
	intact()
	// Named as the folder, a file replaces the link itself.
	execMustPass(t, "cp", s+":report.txt", home+"/")
	if fi, err := os.Lstat(filepath.Join(home, "report.txt")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("report.txt on the host: %v %v", fi, err)
	}
	intact()

	// 3. A folder's contents into an existing folder: its links are left
	// out (reported); its new folders keep theirs.
	cpSh(t, s, "mkdir -p c/new && echo F > c/f && ln -s .ssh c/x && ln -s ../f c/new/l")
	j := cpDecode(t, sb(t, "cp", "--format", "json", s+":c/.", home))
	if j.SkippedCount != 1 || len(j.Skipped) != 1 || j.Skipped[0].Name != "c/x" || j.Skipped[0].LinkTarget != ".ssh" || j.Symlinks != 1 {
		t.Fatalf("contents into the home folder: %+v", j)
	}
	if l, err := os.Readlink(filepath.Join(home, "new", "l")); err != nil || l != "../f" {
		t.Fatalf("the new folder's link: %q %v", l, err)
	}
	if _, err := os.Lstat(filepath.Join(home, "x")); err == nil {
		t.Fatal("the link x was written into the home folder")
	}
	intact()

	// 4. A destination that is the user's link to a folder is followed (as
	// docker cp follows it: /tmp on macOS); one to a file is refused.
	real := filepath.Join(home, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(home, "to-real")); err != nil {
		t.Fatal(err)
	}
	execMustPass(t, "cp", s+":c/f", filepath.Join(home, "to-real"))
	if b, err := os.ReadFile(filepath.Join(real, "f")); err != nil || string(b) != "F\n" {
		t.Fatalf("through the user's link to a folder: %q %v", b, err)
	}
	if err := os.Symlink(".bashrc", filepath.Join(home, "rc-link")); err != nil {
		t.Fatal(err)
	}
	cpWantErr(t, sb(t, "cp", "--format", "json", s+":c/f", filepath.Join(home, "rc-link")), "path_escape")
	intact()
}
