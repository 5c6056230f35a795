package exec

import (
	"strings"
	"testing"

	"github.com/docker-sandbox/docker-sandbox/core"
)

func TestDetectLanguage(t *testing.T) {
	cases := []struct {
		explicit, file, code, def string
		want, ext                 string
		err                       bool
	}{
		{"python", "", "", "", "python", ".py", false},
		{"py", "", "", "", "python", ".py", false},
		{"JS", "", "", "", "node", ".js", false},
		{"cobol", "", "", "", "", "", true},
		{"", "a.py", "", "", "python", ".py", false},
		{"", "A.PY", "", "", "python", ".py", false},
		{"", "a.mjs", "", "", "node", ".mjs", false},
		{"", "a.cjs", "", "", "node", ".cjs", false},
		{"", "a.js", "", "", "node", ".js", false},
		{"", "a.sh", "", "", "sh", ".sh", false},
		{"", "a.bash", "", "", "bash", ".bash", false},
		{"", "noext", "#!/usr/bin/env python3\nprint(1)", "", "python", ".py", false},
		{"", "noext", "#!/usr/bin/env -S node --harmony\n", "", "node", ".js", false},
		{"", "", "#!/bin/bash -e\necho", "", "bash", ".sh", false},
		{"", "", "#!/bin/dash\n", "", "sh", ".sh", false},
		{"", "", "#!/usr/bin/perl\n", "python", "python", ".py", false},
		{"", "", "echo hi", "node", "node", ".js", false},
		{"", "", "echo hi", "", "sh", ".sh", false},
		{"", "x.txt", "echo hi", "", "sh", ".sh", false},
		{"sh", "x.py", "", "", "sh", ".sh", false},
		{"", "", "", "cobol", "", "", true},
	}
	for _, c := range cases {
		l, err := DetectLanguage(c.explicit, c.file, []byte(c.code), c.def)
		if (err != nil) != c.err {
			t.Errorf("%+v: err %v", c, err)
			continue
		}
		if err == nil && (l.Name != c.want || l.Ext != c.ext) {
			t.Errorf("%+v: got %s %s", c, l.Name, l.Ext)
		}
		if err != nil && core.AsError(err).Exit != 125 {
			t.Errorf("%+v: exit %d", c, core.AsError(err).Exit)
		}
	}
}

func TestDetectConfiguredLanguage(t *testing.T) {
	perl := Language{Name: "perl", Interps: []string{"perl"}, Ext: ".pl", Exts: []string{".pl", ".pm"}, Shebang: []string{"perl"}}
	awk := Language{Name: "awk", Interps: []string{"awk"}, InterpArgs: []string{"-f"}, Ext: ".awk", Exts: []string{".awk"}}
	custom := []Language{awk, perl}
	for _, tc := range []struct {
		explicit, file, code, def string
		name, ext                 string
	}{
		{"perl", "", "print 1", "", "perl", ".pl"},
		{"awk", "x.awk", "", "", "awk", ".awk"},
		{"", "lib/x.PM", "", "", "perl", ".pm"},
		{"", "x.awk", "", "", "awk", ".awk"},
		{"", "", "#!/usr/bin/env perl -w\nprint 1", "", "perl", ".pl"},
		{"", "", "#!/usr/bin/perl\n", "", "perl", ".pl"},
		{"", "", "print 1", "perl", "perl", ".pl"},
		{"", "x.py", "", "", "python", ".py"},                       // built-ins first
		{"", "", "#!/bin/bash\n", "", "bash", ".sh"},                // built-in shebang
		{"", "x.txt", "#!/usr/bin/awk -f\n", "", "sh", ".sh"},       // awk has no shebang names
		{"python", "x.pl", "", "", "python", ".py"},                 // explicit wins
		{"", "x.pl", "#!/usr/bin/env python3\n", "", "perl", ".pl"}, // extension before shebang
	} {
		l, err := DetectLanguage(tc.explicit, tc.file, []byte(tc.code), tc.def, custom...)
		if err != nil {
			t.Errorf("%+v: %v", tc, err)
			continue
		}
		if l.Name != tc.name || l.Ext != tc.ext {
			t.Errorf("%+v: got %s %s, want %s %s", tc, l.Name, l.Ext, tc.name, tc.ext)
		}
	}
	if l, _ := DetectLanguage("awk", "", nil, "", custom...); len(l.InterpArgs) != 1 || l.InterpArgs[0] != "-f" {
		t.Errorf("awk lost its interpreter args: %+v", l)
	}
	_, err := DetectLanguage("ruby", "", nil, "", custom...)
	if err == nil || !strings.Contains(err.Error(), "python, node, bash, sh, awk, perl") {
		t.Errorf("unknown language error: %v", err)
	}
	// Without configuration, a configured name is unknown.
	if _, err := DetectLanguage("perl", "", nil, ""); err == nil {
		t.Error("perl without configuration was accepted")
	}
}
