package exec

import (
	"bytes"
	"path"
	"strings"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// Language describes how the helper runs code of one language.
type Language struct {
	Name    string   // python, node, bash, sh
	Interps []string // candidates, first found on the image's PATH wins
	Ext     string   // extension of the code file inside the sandbox
}

var languages = map[string]Language{
	"python": {Name: "python", Interps: []string{"python3", "python"}, Ext: ".py"},
	"node":   {Name: "node", Interps: []string{"node", "nodejs"}, Ext: ".js"},
	"bash":   {Name: "bash", Interps: []string{"bash"}, Ext: ".sh"},
	"sh":     {Name: "sh", Interps: []string{"sh"}, Ext: ".sh"},
}

// LanguageNames lists the supported languages.
var LanguageNames = []string{"python", "node", "bash", "sh"}

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
func DetectLanguage(explicit, fileName string, code []byte, def string) (Language, error) {
	pick := func(name, ext string) (Language, error) {
		l, ok := LookupLanguage(name)
		if !ok {
			return Language{}, core.Errorf(core.CodeBadFlag, "unknown language %q: use one of %s", name, strings.Join(LanguageNames, ", "))
		}
		if ext != "" && byExt[ext] == l.Name {
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
	if n := shebangLanguage(code); n != "" {
		return pick(n, "")
	}
	if def != "" {
		return pick(def, "")
	}
	return pick("sh", "")
}

// shebangLanguage reads "#!/usr/bin/env python3", "#!/bin/bash -e" and so on.
func shebangLanguage(code []byte) string {
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
	switch {
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
