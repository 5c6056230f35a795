package exec

import (
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
