package core

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// TermText makes a string that came from a sandbox (a path, a link target, a
// host name, a message) safe to show on a terminal: returned as is when every
// rune is printable (spaces included), else Go-quoted ("\x1b]0;...\a"), so
// that escape sequences, control characters, bidi overrides and invalid
// UTF-8 are shown, never interpreted. JSON output needs none of this.
func TermText(s string) string {
	if !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
