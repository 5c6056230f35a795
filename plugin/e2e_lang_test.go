package plugin_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// langConfig defines perl and awk (both in the Debian base: perl-base and
// mawk) and a language whose interpreter no image has.
const langConfig = `[lang.perl]
interpreter = ["perl"]
extensions = [".pl"]
shebang = ["perl"]

[lang.awk]
interpreter = ["awk", "-f"]
extensions = [".awk"]

[lang.nolang]
interpreter = ["no-such-interpreter-here", "-x"]
extensions = [".nolang"]
`

func langEnv(t *testing.T) []string {
	t.Helper()
	cfg := privateConfig(t)
	writeUserConfig(t, cfg, langConfig)
	return []string{"DOCKER_CONFIG=" + cfg}
}

// TestLangConfiguredRuns: configured languages run by --lang, extension and
// shebang, with args, stdin, -c, exit codes, a timeout and the JSON lang.
func TestLangConfiguredRuns(t *testing.T) {
	needE2E(t)
	env := langEnv(t)
	scope := newScope(t)
	dir := t.TempDir()
	pl := filepath.Join(dir, "prog.pl")
	writeText(t, pl, "my $in = <STDIN>; chomp $in; print join(\",\", @ARGV), \"|\", $in, \"\\n\"; exit 3;\n")
	awk := filepath.Join(dir, "sum.awk")
	writeText(t, awk, "{ s += $1 } END { print s, ARGV[1] == \"\" ? \"none\" : \"args\"; exit 4 }\n")
	shebang := filepath.Join(dir, "noext")
	writeText(t, shebang, "#!/usr/bin/env perl\nprint \"shebang \", scalar(@ARGV), \"\\n\";\n")

	exec := func(stdin string, args ...string) result {
		t.Helper()
		return sbRun(t, run{env: env, dir: dir, stdin: strings.NewReader(stdin), args: append([]string{"exec", "-s", scope}, args...)})
	}

	// FILE with args and stdin; the program's exit code is the exit code.
	r := exec("hello\n", pl, "a", "-b", "--", "c")
	wantCode(t, r, 3)
	if r.Stdout != "a,-b,--,c|hello\n" {
		t.Errorf("perl FILE: stdout %q\n%s", r.Stdout, r)
	}
	// awk -f: the interpreter's own argument comes before the code file;
	// stdin is the program's input.
	r = exec("1\n2\n39\n", awk)
	wantCode(t, r, 4)
	if r.Stdout != "42 none\n" {
		t.Errorf("awk FILE: stdout %q\n%s", r.Stdout, r)
	}
	// Shebang detection.
	r = exec("", shebang, "x", "y")
	wantCode(t, r, 0)
	if r.Stdout != "shebang 2\n" {
		t.Errorf("perl shebang: stdout %q\n%s", r.Stdout, r)
	}
	// --lang with -c.
	r = exec("", "--lang", "perl", "-c", `print "c:", $ARGV[0], "\n"; exit 7`, "--", "z")
	wantCode(t, r, 7)
	if r.Stdout != "c:z\n" {
		t.Errorf("perl -c: stdout %q\n%s", r.Stdout, r)
	}
	r = exec("5\n", "--lang", "awk", "-c", `{ print $1 * 2 }`)
	wantCode(t, r, 0)
	if r.Stdout != "10\n" {
		t.Errorf("awk -c: stdout %q\n%s", r.Stdout, r)
	}
	// JSON names the language.
	r = exec("", "--format", "json", "--lang", "perl", "-c", `print "j"; exit 2`)
	wantCode(t, r, 2)
	if j := decodeExec(t, r); j.Lang != "perl" || j.Stdout != "j" || j.ExitCode != 2 {
		t.Errorf("JSON: lang %q stdout %q exit %d\n%s", j.Lang, j.Stdout, j.ExitCode, r)
	}
	r = exec("", "--format", "json", awk)
	if j := decodeExec(t, r); j.Lang != "awk" {
		t.Errorf("JSON of an .awk file: lang %q\n%s", j.Lang, r)
	}
	// default_lang may name a configured language (here from the
	// environment, the table from the user file); one no layer configures
	// is refused before anything runs.
	r = sbRun(t, run{env: append(env, "DOCKER_SANDBOX_DEFAULT_LANG=perl"), args: []string{"exec", "-s", scope, "-c", `print "default perl\n"`}})
	wantCode(t, r, 0)
	if r.Stdout != "default perl\n" {
		t.Errorf("default_lang = perl: stdout %q\n%s", r.Stdout, r)
	}
	r = sbRun(t, run{env: append(env, "DOCKER_SANDBOX_DEFAULT_LANG=ruby"), args: []string{"exec", "-s", scope, "--format", "json", "-c", "puts 1"}})
	wantCode(t, r, 125)
	if e := decodeErr(t, r); e.Error.Code != "bad_config" || !strings.Contains(e.Error.Message, "DOCKER_SANDBOX_DEFAULT_LANG") {
		t.Errorf("default_lang = ruby: %+v", e)
	}
	// A timeout ends the program: 124.
	r = exec("", "--timeout", "2s", "--lang", "perl", "-c", "sleep 60")
	wantCode(t, r, 124)
	r = exec("", "--format", "json", "--timeout", "2s", "--lang", "awk", "-c", "BEGIN { while (1) {} }")
	wantCode(t, r, 124)
	if j := decodeExec(t, r); !j.TimedOut || j.Lang != "awk" {
		t.Errorf("awk timeout JSON: timed_out %v lang %q\n%s", j.TimedOut, j.Lang, r)
	}
}

// TestLangConfiguredMissingInterpreter: a configured interpreter the image
// lacks gives 127 and interpreter_not_found, and a first call leaves nothing.
func TestLangConfiguredMissingInterpreter(t *testing.T) {
	needE2E(t)
	env := langEnv(t)
	for _, mode := range []string{"plain", "json"} {
		scope := newScope(t)
		args := []string{"exec", "-s", scope, "--lang", "nolang", "-c", "x"}
		if mode == "json" {
			args = append([]string{"exec", "--format", "json"}, args[1:]...)
		}
		r := sbRun(t, run{env: env, args: args})
		wantCode(t, r, 127)
		if mode == "json" {
			if j := decodeErr(t, r); j.Error.Code != "interpreter_not_found" || !strings.Contains(j.Error.Message, "no-such-interpreter-here") {
				t.Errorf("JSON error %+v", j.Error)
			}
		} else if !strings.Contains(r.Stderr, "no-such-interpreter-here") {
			t.Errorf("stderr does not name the interpreter:\n%s", r)
		}
		if c, v := scopeObjects(t, scope); c != 0 || v != 0 {
			t.Errorf("%s: left %d containers, %d volumes", mode, c, v)
		}
	}
}

// TestLangConfiguredConfig: `config` lists the languages; an unknown --lang
// names them; an untrusted project file cannot add or change one.
func TestLangConfiguredConfig(t *testing.T) {
	needE2E(t)
	env := langEnv(t)
	proj := t.TempDir()
	r := sbRun(t, run{env: env, dir: proj, args: []string{"config"}})
	wantCode(t, r, 0)
	for _, w := range []string{"lang.awk", "lang.perl", "interpreter=[awk,-f] extensions=[.awk]"} {
		if !strings.Contains(r.Stdout, w) {
			t.Errorf("config output lacks %s:\n%s", w, r)
		}
	}
	r = sbRun(t, run{env: env, dir: proj, args: []string{"exec", "--lang", "ruby", "-c", "x"}})
	wantCode(t, r, 125)
	if !strings.Contains(r.Stderr, "awk, nolang, perl") {
		t.Errorf("unknown language error does not list the configured ones:\n%s", r)
	}
	// An untrusted project file: its [lang.*] is refused, perl stays perl,
	// and a language it defines does not exist.
	if err := os.WriteFile(filepath.Join(proj, ".docker-sandbox.toml"),
		[]byte("[lang.perl]\ninterpreter = [\"sh\"]\n\n[lang.evil]\ninterpreter = [\"sh\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	scope := newScope(t)
	r = sbRun(t, run{env: env, dir: proj, args: []string{"exec", "-s", scope, "--lang", "perl", "-c", `print "still perl\n"`}})
	wantCode(t, r, 0)
	if r.Stdout != "still perl\n" || !strings.Contains(r.Stderr, "lang.perl") {
		t.Errorf("untrusted project file changed perl, or no warning:\n%s", r)
	}
	r = sbRun(t, run{env: env, dir: proj, args: []string{"exec", "-s", scope, "--lang", "evil", "-c", "echo hi"}})
	wantCode(t, r, 125)
}
