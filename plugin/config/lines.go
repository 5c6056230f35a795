package config

import (
	"strconv"
	"strings"
)

// BurntSushi/toml keeps the position of each key to itself, so the line of a
// key is found by scanning the text again. The scanner runs only on text the
// TOML parser accepted; it knows tables ([a.b], [[a]]), dotted and quoted
// keys, inline tables, arrays, comments and all four kinds of strings, so
// that a "key = value" inside a multi-line string is not taken for a key.

// lineMap maps a key path, joined by "\x00", to the line of its first
// definition (a key, a table header or an inline-table key).
type lineMap map[string]int

// lineOf returns the line of key k: its own definition, else the first line
// of a key under it (an implicit table), else the line of the nearest parent
// (a key inside a value the scanner did not descend into); 0 if none.
func (m lineMap) lineOf(k []string) int {
	id := strings.Join(k, "\x00")
	if l, ok := m[id]; ok {
		return l
	}
	best := 0
	for p, l := range m {
		if strings.HasPrefix(p, id+"\x00") && (best == 0 || l < best) {
			best = l
		}
	}
	if best > 0 {
		return best
	}
	for n := len(k) - 1; n > 0; n-- {
		if l, ok := m[strings.Join(k[:n], "\x00")]; ok {
			return l
		}
	}
	return 0
}

func keyLines(text string) lineMap {
	sc := &lineScanner{s: text, line: 1, lines: lineMap{}}
	sc.document()
	return sc.lines
}

type lineScanner struct {
	s     string
	i     int
	line  int
	lines lineMap
}

func (sc *lineScanner) eof() bool { return sc.i >= len(sc.s) }

func (sc *lineScanner) peek() byte {
	if sc.eof() {
		return 0
	}
	return sc.s[sc.i]
}

func (sc *lineScanner) next() {
	if sc.eof() {
		return
	}
	if sc.s[sc.i] == '\n' {
		sc.line++
	}
	sc.i++
}

func (sc *lineScanner) has(prefix string) bool { return strings.HasPrefix(sc.s[sc.i:], prefix) }

func (sc *lineScanner) record(path []string, line int) {
	id := strings.Join(path, "\x00")
	if _, ok := sc.lines[id]; !ok {
		sc.lines[id] = line
	}
}

func (sc *lineScanner) skipSpace() {
	for c := sc.peek(); c == ' ' || c == '\t'; c = sc.peek() {
		sc.next()
	}
}

// skipBlank skips blanks, newlines and comments.
func (sc *lineScanner) skipBlank() {
	for !sc.eof() {
		switch sc.peek() {
		case ' ', '\t', '\r', '\n':
			sc.next()
		case '#':
			sc.skipToEOL()
		default:
			return
		}
	}
}

func (sc *lineScanner) skipToEOL() {
	for !sc.eof() && sc.peek() != '\n' {
		sc.next()
	}
}

func (sc *lineScanner) document() {
	var table []string
	for {
		sc.skipBlank()
		if sc.eof() {
			return
		}
		start, line := sc.i, sc.line
		if sc.peek() == '[' {
			sc.next()
			if sc.peek() == '[' {
				sc.next()
			}
			table = sc.key()
			sc.record(table, line)
			sc.skipToEOL()
		} else {
			full := join(table, sc.key())
			sc.record(full, line)
			sc.assignment(full)
			sc.skipToEOL()
		}
		if sc.i == start {
			sc.next()
		}
	}
}

func join(a, b []string) []string {
	return append(append(make([]string, 0, len(a)+len(b)), a...), b...)
}

// assignment skips "= value" after a key.
func (sc *lineScanner) assignment(path []string) {
	sc.skipSpace()
	if sc.peek() == '=' {
		sc.next()
	}
	sc.skipSpace()
	sc.value(path)
}

// key reads a possibly dotted key of bare and quoted parts.
func (sc *lineScanner) key() []string {
	var parts []string
	for {
		sc.skipSpace()
		switch sc.peek() {
		case '"':
			start := sc.i
			sc.basicString()
			raw := sc.s[start:sc.i]
			if u, err := strconv.Unquote(raw); err == nil {
				parts = append(parts, u)
			} else {
				parts = append(parts, strings.Trim(raw, `"`))
			}
		case '\'':
			start := sc.i
			sc.literalString()
			parts = append(parts, strings.Trim(sc.s[start:sc.i], "'"))
		default:
			start := sc.i
			for isBare(sc.peek()) {
				sc.next()
			}
			parts = append(parts, sc.s[start:sc.i])
		}
		sc.skipSpace()
		if sc.peek() != '.' {
			return parts
		}
		sc.next()
	}
}

func isBare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func (sc *lineScanner) value(path []string) {
	switch {
	case sc.has(`"""`):
		sc.multiline(`"""`, true)
	case sc.has(`'''`):
		sc.multiline(`'''`, false)
	case sc.peek() == '"':
		sc.basicString()
	case sc.peek() == '\'':
		sc.literalString()
	case sc.peek() == '[':
		sc.next()
		for {
			sc.skipBlank()
			switch sc.peek() {
			case 0:
				return
			case ']':
				sc.next()
				return
			case ',':
				sc.next()
				continue
			}
			start := sc.i
			sc.value(path)
			if sc.i == start {
				sc.next()
			}
		}
	case sc.peek() == '{':
		sc.next()
		for {
			sc.skipBlank()
			switch sc.peek() {
			case 0:
				return
			case '}':
				sc.next()
				return
			case ',':
				sc.next()
				continue
			}
			start, line := sc.i, sc.line
			full := join(path, sc.key())
			sc.record(full, line)
			sc.assignment(full)
			if sc.i == start {
				sc.next()
			}
		}
	default:
		for !sc.eof() && !strings.ContainsRune(",]}\n#", rune(sc.peek())) {
			sc.next()
		}
	}
}

// basicString skips a one-line "..." string.
func (sc *lineScanner) basicString() {
	sc.next()
	for !sc.eof() {
		switch sc.peek() {
		case '\\':
			sc.next()
			if sc.peek() != '\n' {
				sc.next()
			}
		case '"':
			sc.next()
			return
		case '\n':
			return
		default:
			sc.next()
		}
	}
}

// literalString skips a one-line '...' string.
func (sc *lineScanner) literalString() {
	sc.next()
	for !sc.eof() {
		switch sc.peek() {
		case '\'':
			sc.next()
			return
		case '\n':
			return
		default:
			sc.next()
		}
	}
}

// multiline skips a multi-line string (three quotes, of either kind); up to
// two more quotes may close it, as the content may end in one or two quotes.
func (sc *lineScanner) multiline(delim string, escapes bool) {
	for range 3 {
		sc.next()
	}
	for !sc.eof() {
		if escapes && sc.peek() == '\\' {
			sc.next()
			sc.next()
			continue
		}
		if sc.has(delim) {
			for range 3 {
				sc.next()
			}
			for n := 0; n < 2 && sc.peek() == delim[0]; n++ {
				sc.next()
			}
			return
		}
		sc.next()
	}
}
