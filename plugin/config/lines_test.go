package config

import (
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
)

func TestKeyLines(t *testing.T) {
	text := `# comment
timeout = "30s" # trailing
"memory" = '1g'
text = """
not_a_key = 1
[not.a.table]
"""
lit = '''
also_not = 2
'''
arr = [
  "x", # comment ]
  ["y"],
]
inline = { a = 1, "b c" = { d = 2 } }

[scope.u1]
allow = ["pypi.org"]
  allow_ports = [443]

[ scope . "quoted" ]
allow_cidrs = []
dotted.key = 3

[[arr_of]]
x = 1
[[arr_of]]
x = 2
`
	if _, err := toml.Decode(text, new(map[string]any)); err != nil {
		t.Fatalf("test text is not TOML: %v", err)
	}
	got := map[string]int{}
	for k, l := range keyLines(text) {
		got[strings.ReplaceAll(k, "\x00", ".")] = l
	}
	want := map[string]int{
		"timeout":                  2,
		"memory":                   3,
		"text":                     4,
		"lit":                      8,
		"arr":                      11,
		"inline":                   15,
		"inline.a":                 15,
		"inline.b c":               15,
		"inline.b c.d":             15,
		"scope.u1":                 17,
		"scope.u1.allow":           18,
		"scope.u1.allow_ports":     19,
		"scope.quoted":             21,
		"scope.quoted.allow_cidrs": 22,
		"scope.quoted.dotted.key":  23,
		"arr_of":                   25,
		"arr_of.x":                 26,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("keyLines (-want +got):\n%s", d)
	}

	m := keyLines(text)
	for _, tt := range []struct {
		key  []string
		want int
	}{
		{[]string{"scope"}, 17},                     // implicit table: first key under it
		{[]string{"scope", "u1", "allow", "x"}, 18}, // deeper than scanned: nearest parent
		{[]string{"nope"}, 0},
	} {
		if got := m.lineOf(tt.key); got != tt.want {
			t.Errorf("lineOf(%q) = %d, want %d", tt.key, got, tt.want)
		}
	}
}

// FuzzKeyLines checks that every key of a document the TOML parser accepts
// gets a line, and that the scanner never hangs or panics.
func FuzzKeyLines(f *testing.F) {
	for _, s := range []string{
		"a = 1\n[b]\nc = \"x\"\n",
		"a = \"\"\"\nb = 1\n\"\"\"\nc = 2\n",
		"a = '''x''''\nb = { c = [1, {d = 2}] }\n",
		"[[t]]\nx = 1\n[[t]]\ny = 2\n",
		"\"a.b\".'c' = 1\n[ x . \"y\" ]\nz = 1\n",
		"a = [\n  1, # ]\n  2,\n]\nb = 1979-05-27 07:32:00Z\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		md, err := toml.Decode(text, new(map[string]any))
		if err != nil {
			return
		}
		lines := keyLines(text)
		for _, k := range md.Keys() {
			if lines.lineOf(k) == 0 {
				t.Errorf("no line for key %q in %q", k, text)
			}
		}
	})
}
