package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// Configured languages: a [lang.NAME] table adds a language without a
// rebuild.
//
//	[lang.perl]
//	interpreter = ["perl"]      # argv prefix; the code file and the args follow
//	extensions  = [".pl"]       # file extensions that select it
//	shebang     = ["perl"]      # program names in a "#!" line that select it
//
// Trust: a language chooses what runs, so only the user file may define
// one. A [lang.*] key in a project file that is not trusted is refused (it
// is listed in Refused and ignored), as the trust model refuses other
// settings that widen what a sandbox does. A name may not shadow a built-in
// language or alias (python, node, bash, sh, py, python3, js, javascript,
// nodejs, shell): overriding a built-in is not allowed, so `--lang python`
// always means the built-in.

// langTable is the table of configured languages.
const langTable = "lang"

// langKeys are the keys of a [lang.NAME] table.
var langKeys = []string{"interpreter", "extensions", "shebang"}

// LangKeys are the keys of a [lang.NAME] table.
func LangKeys() []string { return slices.Clone(langKeys) }

// builtinLangNames are the built-in languages and their aliases.
var builtinLangNames = []string{"python", "node", "bash", "sh", "py", "python3", "js", "javascript", "nodejs", "shell"}

// LangConfig is one [lang.NAME] table.
type LangConfig struct {
	Interpreter []string // argv prefix: program, then fixed arguments
	Extensions  []string // ".pl"
	Shebang     []string // "perl"
	Source      Source   // the file and line of the table
}

func checkLangName(s string) *problem {
	if !core.ValidName(s) {
		return &problem{pred: "is not a valid language name (" + core.NameRule + ")"}
	}
	if slices.Contains(builtinLangNames, strings.ToLower(s)) {
		return &problem{pred: "is a built-in language: a [lang.NAME] table may not override it; pick another name"}
	}
	return nil
}

func noNUL(s string) *problem {
	if s == "" {
		return &problem{pred: "must not be empty"}
	}
	if strings.ContainsRune(s, 0) {
		return &problem{pred: "must not contain a NUL byte"}
	}
	return nil
}

func checkExtension(s string) *problem {
	if p := noNUL(s); p != nil {
		return p
	}
	if len(s) < 2 || s[0] != '.' || strings.ContainsAny(s[1:], "./\\ ") {
		return &problem{pred: `must be an extension starting with "." (".pl")`}
	}
	return nil
}

func checkShebangName(s string) *problem {
	if p := noNUL(s); p != nil {
		return p
	}
	if strings.ContainsAny(s, "/ \t") {
		return &problem{pred: `must be a program's base name ("perl"), without a slash or a space`}
	}
	return nil
}

// applyLang applies the key k (lang, lang.NAME or lang.NAME.KEY).
func (f *fileApply) applyLang(k []string) error {
	if _, ok := f.value(k[:1]).(map[string]any); !ok {
		return f.fail(k[:1], "", wrongType("a table of languages ([lang.NAME])", f.value(k[:1])))
	}
	if len(k) == 1 {
		return nil
	}
	name := k[1]
	if p := checkLangName(name); p != nil {
		return f.fail(k[:2], fmt.Sprintf("%q", name), p)
	}
	if _, ok := f.value(k[:2]).(map[string]any); !ok {
		return f.fail(k[:2], "", wrongType("a table", f.value(k[:2])))
	}
	if len(k) == 2 {
		return nil
	}
	l := f.c.Langs[name]
	v := f.value(k)
	var p *problem
	switch k[2] {
	case "interpreter":
		l.Interpreter, p = stringList(v, noNUL)
		if p == nil && len(l.Interpreter) == 0 {
			p = &problem{pred: `must name the interpreter (["perl"])`}
		}
	case "extensions":
		l.Extensions, p = stringList(v, checkExtension)
	case "shebang":
		l.Shebang, p = stringList(v, checkShebangName)
	case "kernel":
		// A configured language runs as a plain exec: kernels (exec
		// --kernel) are built in for python and node. false says so;
		// true is an error rather than a setting that does nothing.
		switch b, ok := v.(bool); {
		case !ok:
			p = wrongType("a boolean (false)", v)
		case b:
			p = &problem{pred: "a configured language has no kernel: exec --kernel runs python and node only; drop the key or set it to false", bare: true}
		}
	default:
		return f.unknown(k, append(slices.Clone(langKeys), "kernel"), k[2])
	}
	if p != nil {
		return f.fail(k, "", p)
	}
	if f.base != nil {
		f.refuse(k, &problem{pred: "is ignored: an untrusted project file may not add or change a language (it chooses what runs); trust the file or define it in the user file"})
		return nil
	}
	l.Source = f.src(k[:2])
	if f.c.Langs == nil {
		f.c.Langs = map[string]LangConfig{}
	}
	f.c.Langs[name] = l
	return nil
}

// validateLangs checks that each configured language has an interpreter,
// and that default_lang names a built-in or configured language.
func (c *Config) validateLangs() error {
	for _, n := range slices.Sorted(maps.Keys(c.Langs)) {
		l := c.Langs[n]
		if len(l.Interpreter) == 0 {
			return valueError(langTable+"."+n, l.Source, "", &problem{pred: `needs interpreter = ["PROGRAM", ...]`, bare: true})
		}
	}
	if d := c.DefaultLang; d != "" && !slices.Contains(Languages, d) {
		if _, ok := c.Langs[d]; !ok {
			return valueError("default_lang", c.Source("default_lang"), strconvQuote(d), &problem{pred: notALanguage})
		}
	}
	return nil
}

// LangNames returns the configured languages' names, sorted.
func (c *Config) LangNames() []string { return slices.Sorted(maps.Keys(c.Langs)) }

// entry is the language as Entries shows it.
func (l LangConfig) entry() map[string]any {
	return map[string]any{"interpreter": nonNil(l.Interpreter), "extensions": nonNil(l.Extensions), "shebang": nonNil(l.Shebang)}
}
