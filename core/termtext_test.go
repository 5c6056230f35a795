package core

import "testing"

func TestTermText(t *testing.T) {
	for in, want := range map[string]string{
		"plain/name.txt":         "plain/name.txt",
		"with space":             "with space",
		"ünïcödé":                "ünïcödé",
		"\x1b]0;PWNED-TITLE\a":   `"\x1b]0;PWNED-TITLE\a"`,
		"a\nb":                   `"a\nb"`,
		"tab\there":              `"tab\there"`,
		"\r":                     `"\r"`,
		"bidi\u202egnp.exe":      `"bidi\u202egnp.exe"`,
		"bad\xffutf8":            `"bad\xffutf8"`,
		"del\x7f":                `"del\x7f"`,
		"c1\u009b31m":            `"c1\u009b31m"`,
		"zero-width\u200bjoiner": `"zero-width\u200bjoiner"`,
		"":                       "",
	} {
		if got := TermText(in); got != want {
			t.Errorf("TermText(%q) = %s, want %s", in, got, want)
		}
	}
}
