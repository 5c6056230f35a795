package exec

import (
	"bytes"
	"path"
	"slices"
	"strings"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// Language describes how the helper runs code of one language.
type Language struct {
	Name    string   // python, node, bash, sh, or a configured name
	Interps []string // candidates, first found on the image's PATH wins
	Ext     string   // extension of the code file inside the sandbox

	// Set for a configured language ([lang.NAME] in the config files):
	InterpArgs []string // arguments after the interpreter, before the code file
	Exts       []string // extensions that select it (the first is Ext)
	Shebang    []string // program names in a "#!" line that select it
}

var languages = map[string]Language{
	"python": {Name: "python", Interps: []string{"python3", "python"}, Ext: ".py"},
	"node":   {Name: "node", Interps: []string{"node", "nodejs"}, Ext: ".js"},
	"bash":   {Name: "bash", Interps: []string{"bash"}, Ext: ".sh"},
	"sh":     {Name: "sh", Interps: []string{"sh"}, Ext: ".sh"},
}

// LanguageNames lists the supported languages.
var LanguageNames = []string{"python", "node", "bash", "sh"}

// IsBuiltinLanguage reports whether name is a built-in language or one of
// their aliases; a configured language may not take such a name.
func IsBuiltinLanguage(name string) bool {
	_, ok := LookupLanguage(name)
	return ok
}

// LookupLanguage returns the language called name (aliases: py, python3, js,
// javascript, nodejs, shell).
func LookupLanguage(name string) (Language, bool) {
	switch strings.ToLower(name) {
	case "py", "python3":
		name = "python"
	case "js", "javascript", "nodejs":
		name = "node"
	case "shell":
		name = "sh"
	}
	l, ok := languages[strings.ToLower(name)]
	return l, ok
}

// byExt maps a file extension to a language.
var byExt = map[string]string{
	".py": "python", ".js": "node", ".mjs": "node", ".cjs": "node",
	".sh": "sh", ".bash": "bash",
}

// DetectLanguage picks the language: the explicit one, else the file's
// extension, else the code's shebang, else def, else sh. It also returns the
// extension the code file gets in the sandbox (an .mjs file stays .mjs).
// custom are the configured languages: they never shadow a built-in name
// (the configuration refuses that), and their extensions and shebang names
// are looked at after the built-in ones.
func DetectLanguage(explicit, fileName string, code []byte, def string, custom ...Language) (Language, error) {
	lookup := func(name string) (Language, bool) {
		if l, ok := LookupLanguage(name); ok {
			return l, true
		}
		for _, l := range custom {
			if l.Name == name {
				return l, true
			}
		}
		return Language{}, false
	}
	pick := func(name, ext string) (Language, error) {
		l, ok := lookup(name)
		if !ok {
			names := slices.Clone(LanguageNames)
			for _, c := range custom {
				names = append(names, c.Name)
			}
			return Language{}, core.Errorf(core.CodeBadFlag, "unknown language %q: use one of %s (more can be configured as [lang.NAME] tables)", name, strings.Join(names, ", "))
		}
		if ext != "" && (byExt[ext] == l.Name || slices.Contains(l.Exts, ext)) {
			l.Ext = ext
		}
		return l, nil
	}
	ext := strings.ToLower(path.Ext(fileName))
	if explicit != "" {
		return pick(explicit, ext)
	}
	if n, ok := byExt[ext]; ok {
		return pick(n, ext)
	}
	for _, c := range custom {
		if ext != "" && slices.ContainsFunc(c.Exts, func(e string) bool { return strings.ToLower(e) == ext }) {
			l := c
			l.Ext = ext
			return l, nil
		}
	}
	if n := shebangLanguage(code); n != "" {
		return pick(n, "")
	}
	if prog := shebangProgram(code); prog != "" {
		for _, c := range custom {
			if slices.Contains(c.Shebang, prog) {
				return c, nil
			}
		}
	}
	if def != "" {
		return pick(def, "")
	}
	return pick("sh", "")
}

// shebangLanguage reads "#!/usr/bin/env python3", "#!/bin/bash -e" and so on.
func shebangLanguage(code []byte) string {
	prog := shebangProgram(code)
	switch {
	case prog == "":
		return ""
	case strings.HasPrefix(prog, "python"):
		return "python"
	case prog == "node" || prog == "nodejs":
		return "node"
	case prog == "bash":
		return "bash"
	case prog == "sh" || prog == "dash" || prog == "ash":
		return "sh"
	}
	return ""
}

// shebangProgram returns the base name of the program a "#!" line runs
// (through env), or "".
func shebangProgram(code []byte) string {
	if !bytes.HasPrefix(code, []byte("#!")) {
		return ""
	}
	line := code[2:]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	f := strings.Fields(strings.TrimSpace(string(line)))
	if len(f) == 0 {
		return ""
	}
	prog := path.Base(f[0])
	if prog == "env" {
		f = f[1:]
		for len(f) > 0 && strings.HasPrefix(f[0], "-") {
			f = f[1:]
		}
		if len(f) == 0 {
			return ""
		}
		prog = path.Base(f[0])
	}
	return prog
}

// KernelOf names the kernel (exec --kernel) of a language: the built-in
// python and node have one, other languages none.
func KernelOf(l Language) (string, bool) {
	if b, ok := languages[l.Name]; !ok || !slices.Equal(b.Interps, l.Interps) {
		return "", false
	}
	switch l.Name {
	case "python":
		return wire.KernelPython, true
	case "node":
		return wire.KernelNode, true
	}
	return "", false
}
