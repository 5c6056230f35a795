package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const userLangs = `[lang.perl]
interpreter = ["perl"]
extensions = [".pl"]
shebang = ["perl"]

[lang.awk]
interpreter = ["awk", "-f"]
extensions = [".awk"]
`

func TestLangTables(t *testing.T) {
	f := newFixture(t, userLangs, "")
	c := must(t)(f.load(nil))
	want := map[string]LangConfig{
		"perl": {Interpreter: []string{"perl"}, Extensions: []string{".pl"}, Shebang: []string{"perl"},
			Source: Source{Kind: KindUser, File: f.user, Line: 1}},
		"awk": {Interpreter: []string{"awk", "-f"}, Extensions: []string{".awk"},
			Source: Source{Kind: KindUser, File: f.user, Line: 6}},
	}
	if d := cmp.Diff(want, c.Langs); d != "" {
		t.Errorf("langs (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"awk", "perl"}, c.LangNames()); d != "" {
		t.Errorf("names (-want +got):\n%s", d)
	}
	e := entryOf(c, "lang.awk")
	if d := cmp.Diff(map[string]any{"interpreter": []string{"awk", "-f"}, "extensions": []string{".awk"}, "shebang": []string{}}, e.Value); d != "" {
		t.Errorf("entry (-want +got):\n%s", d)
	}

	// kernel = false is accepted (a configured language has no kernel).
	f = newFixture(t, userLangs+"\n[lang.r]\ninterpreter = [\"Rscript\"]\nextensions = [\".R\"]\nshebang = [\"Rscript\"]\nkernel = false\n", "")
	if c := must(t)(f.load(nil)); len(c.Langs["r"].Interpreter) != 1 {
		t.Errorf("kernel = false: %+v", c.Langs["r"])
	}

	// A trusted project file may change a language.
	f = newFixture(t, userLangs, "[lang.perl]\ninterpreter = [\"perl\", \"-w\"]\n")
	c = must(t)(f.load(nil))
	if got := c.Langs["perl"]; !cmp.Equal(got.Interpreter, []string{"perl", "-w"}) || got.Source.Kind != KindProject || !cmp.Equal(got.Extensions, []string{".pl"}) {
		t.Errorf("trusted project perl = %+v", got)
	}
}

func TestUntrustedLangRefused(t *testing.T) {
	for _, p := range []string{
		"[lang.perl]\ninterpreter = [\"sh\", \"-c\", \"curl evil\"]\n",
		"[lang.evil]\ninterpreter = [\"sh\"]\nextensions = [\".txt\"]\n",
		"lang.perl.extensions = [\".py2\"]\n",
		"lang = { perl = { shebang = [\"sh\"] } }\n",
	} {
		f := newFixture(t, userLangs, p)
		c := must(t)(f.loadUntrusted(nil))
		user := must(t)(Load(LoadOptions{DockerConfigDir: f.dockerDir, WorkDir: t.TempDir(), LookupEnv: env(nil)}))
		if d := cmp.Diff(user.Langs, c.Langs); d != "" {
			t.Errorf("%q changed the languages (-user +got):\n%s", p, d)
		}
		if len(c.Refused) == 0 {
			t.Errorf("%q: nothing refused", p)
		}
		for _, r := range c.Refused {
			if !strings.HasPrefix(r.Key, "lang.") || !strings.Contains(r.Reason, "may not add or change a language") {
				t.Errorf("%q: refusal %+v", p, r)
			}
		}
	}
}

func TestLangErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"[lang.python]\ninterpreter = [\"perl\"]\n", "built-in language"},
		{"[lang.js]\ninterpreter = [\"perl\"]\n", "built-in language"},
		{"[lang.\"Bad Name\"]\ninterpreter = [\"perl\"]\n", "not a valid language name"},
		{"[lang.perl]\ninterpreter = []\n", "must name the interpreter"},
		{"[lang.perl]\nextensions = [\".pl\"]\n", "needs interpreter"},
		{"[lang.perl]\ninterpreter = [\"pe\\u0000rl\"]\n", "NUL"},
		{"[lang.perl]\ninterpreter = [\"perl\"]\nextensions = [\"pl\"]\n", `starting with "."`},
		{"[lang.perl]\ninterpreter = [\"perl\"]\nshebang = [\"/usr/bin/perl\"]\n", "base name"},
		{"[lang.perl]\ninterpreter = \"perl\"\n", "array of strings"},
		{"[lang.perl]\ninterp = [\"perl\"]\n", "unknown key"},
		{"lang = 1\n", "table of languages"},
		{"[lang.perl]\ninterpreter = [\"perl\"]\nkernel = true\n", "has no kernel: exec --kernel runs python and node only"},
		{"[lang.perl]\ninterpreter = [\"perl\"]\nkernel = \"no\"\n", "a boolean (false)"},
	} {
		f := newFixture(t, tc.text, "")
		_, err := f.load(nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.text, err, tc.want)
		}
	}
}
