package plugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSplitExecArgs parses exec's command lines with the real command's
// flags (SetInterspersed(false): flags end at FILE) and checks where the
// code comes from and what the program gets: the first "--" after the
// plugin's flags, before or directly after FILE or "-", is never passed on;
// a second one, and arguments that look like flags, are the program's.
func TestSplitExecArgs(t *testing.T) {
	cases := []struct {
		argv []string
		src  string
		file string
		prog []string
	}{
		{[]string{"script.py", "--", "--verbose", "input.txt"}, codeFromFile, "script.py", []string{"--verbose", "input.txt"}},
		{[]string{"script.py", "--verbose", "-x"}, codeFromFile, "script.py", []string{"--verbose", "-x"}},
		{[]string{"script.py"}, codeFromFile, "script.py", []string{}},
		{[]string{"script.py", "--"}, codeFromFile, "script.py", []string{}},
		{[]string{"script.py", "--", "--", "a"}, codeFromFile, "script.py", []string{"--", "a"}},
		{[]string{"script.py", "a", "--", "b"}, codeFromFile, "script.py", []string{"a", "--", "b"}},
		{[]string{"-s", "u1", "script.py", "-s", "x"}, codeFromFile, "script.py", []string{"-s", "x"}},
		{[]string{"-", "--", "a", "b"}, codeFromStdin, "", []string{"a", "b"}},
		{[]string{"-", "a", "-b"}, codeFromStdin, "", []string{"a", "-b"}},
		{[]string{"-", "--", "--", "-c"}, codeFromStdin, "", []string{"--", "-c"}},
		{[]string{"--lang", "python"}, codeFromStdin, "", []string{}},
		{[]string{"--lang", "python", "--", "a", "--b"}, codeFromStdin, "", []string{"a", "--b"}},
		{[]string{"-c", "print(1)", "--", "a", "b"}, codeFromFlag, "", []string{"a", "b"}},
		{[]string{"-c", "print(1)", "a", "b"}, codeFromFlag, "", []string{"a", "b"}},
		{[]string{"-c", "print(1)", "--", "--", "-x"}, codeFromFlag, "", []string{"--", "-x"}},
		{[]string{"-c", "print(1)", "a", "--", "b"}, codeFromFlag, "", []string{"a", "--", "b"}},
	}
	for _, c := range cases {
		cmd := newExecCommand(nil)
		if err := cmd.ParseFlags(c.argv); err != nil {
			t.Fatalf("%q: %v", c.argv, err)
		}
		src, file, prog := splitExecArgs(cmd.ArgsLenAtDash(), cmd.Flags().Args(), cmd.Flags().Changed("code"))
		if prog == nil {
			prog = []string{}
		}
		if src != c.src || file != c.file || !cmp.Equal(prog, c.prog) {
			t.Errorf("%q: source %s, file %q, program args %q; want %s, %q, %q", c.argv, src, file, prog, c.src, c.file, c.prog)
		}
	}
}
