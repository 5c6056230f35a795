package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/docker/cli/cli"
	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// fakeInspector is the sandbox manager as inspect sees it: the details of
// the targets it knows, not_found for the others.
type fakeInspector struct {
	known map[core.Target]*sbexec.Details
	asked []core.Target
	sizes []bool
}

func (f *fakeInspector) Inspect(ctx context.Context, t core.Target, size bool) (*sbexec.Details, error) {
	f.asked = append(f.asked, t)
	f.sizes = append(f.sizes, size)
	if d, ok := f.known[t]; ok {
		return d, nil
	}
	return nil, core.Errorf(core.CodeNotFound, "no sandbox %s\x1b[31m", t)
}

func inspectFake() *fakeInspector {
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	u1 := core.Target{Scope: "u1"}
	chat := core.Target{Scope: "u1", Session: "chat"}
	return &fakeInspector{known: map[core.Target]*sbexec.Details{
		u1: {Sandbox: sbexec.Sandbox{Scope: "u1", State: "idle", Created: created, Volumes: []string{"v<1>"}}, Name: "docker-sandbox-u1",
			Limits: &sbexec.Limits{Memory: 1 << 30, Pids: 256}, Egress: sbexec.EgressInfo{Mode: "none"}},
		chat: {Sandbox: sbexec.Sandbox{Scope: "u1", Session: "chat", State: "running", Created: created}, Name: "docker-sandbox-u1.chat"},
	}}
}

func TestInspectFormats(t *testing.T) {
	u1, chat, gone := core.Target{Scope: "u1"}, core.Target{Scope: "u1", Session: "chat"}, core.Target{Scope: "gone"}
	for _, tc := range []struct {
		name    string
		format  string
		targets []core.Target
		check   func(t *testing.T, out string)
		exit    int
		stderr  string
	}{
		{name: "default: an indented array, as docker inspect", targets: []core.Target{u1, chat}, check: func(t *testing.T, out string) {
			var ds []map[string]any
			if err := json.Unmarshal([]byte(out), &ds); err != nil || len(ds) != 2 || ds[0]["scope"] != "u1" || ds[1]["session"] != "chat" {
				t.Fatalf("%v: %s", err, out)
			}
			if !strings.HasPrefix(out, "[\n    {\n        \"scope\": \"u1\",") || !strings.HasSuffix(out, "]\n") {
				t.Errorf("not indented with 4 spaces: %q", out)
			}
			if !strings.Contains(out, `"v\u003c1\u003e"`) {
				t.Errorf("the JSON is not encoding/json's (HTML escaped): %s", out)
			}
		}},
		{name: "json: the array on one line", format: "json", targets: []core.Target{u1, chat}, check: func(t *testing.T, out string) {
			var ds []map[string]any
			if err := json.Unmarshal([]byte(out), &ds); err != nil || len(ds) != 2 || strings.Count(out, "\n") != 1 {
				t.Fatalf("%v: %q", err, out)
			}
		}},
		{name: "template per sandbox, over the JSON names", format: "{{.state}} {{.egress.mode}} {{.name}} {{.nope}}", targets: []core.Target{u1, chat},
			check: func(t *testing.T, out string) {
				if d := cmp.Diff("idle none docker-sandbox-u1 <no value>\nrunning  docker-sandbox-u1.chat <no value>\n", out); d != "" {
					t.Error(d)
				}
			}},
		{name: "numbers as written", format: "{{.limits.memory}} {{.limits.pids}}", targets: []core.Target{u1},
			check: func(t *testing.T, out string) {
				if d := cmp.Diff("1073741824 256\n", out); d != "" {
					t.Error(d)
				}
			}},
		{name: "a missing one: left out, its error on stderr quoted, exit 125", targets: []core.Target{gone, u1}, exit: 125, stderr: `docker sandbox: "no sandbox gone\x1b[31m"` + "\n",
			check: func(t *testing.T, out string) {
				var ds []map[string]any
				if err := json.Unmarshal([]byte(out), &ds); err != nil || len(ds) != 1 || ds[0]["scope"] != "u1" {
					t.Fatalf("%v: %s", err, out)
				}
			}},
		{name: "none found: an empty array", targets: []core.Target{gone}, exit: 125, stderr: `docker sandbox: "no sandbox gone\x1b[31m"` + "\n",
			check: func(t *testing.T, out string) {
				if out != "[]\n" {
					t.Errorf("%q", out)
				}
			}},
		{name: "none found, a template: nothing", format: "{{.state}}", targets: []core.Target{gone}, exit: 125, stderr: `docker sandbox: "no sandbox gone\x1b[31m"` + "\n",
			check: func(t *testing.T, out string) {
				if out != "" {
					t.Errorf("%q", out)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := inspectFake()
			var out, errOut bytes.Buffer
			err := runInspect(context.Background(), f, &out, &errOut, tc.targets, inspectOptions{format: tc.format, size: true})
			tc.check(t, out.String())
			if tc.exit == 0 && err != nil {
				t.Fatal(err)
			}
			if tc.exit != 0 {
				if st, ok := err.(cli.StatusError); !ok || st.StatusCode != tc.exit {
					t.Errorf("error %#v, want exit %d", err, tc.exit)
				}
			}
			if d := cmp.Diff(tc.stderr, errOut.String()); d != "" {
				t.Errorf("stderr: %s", d)
			}
			if d := cmp.Diff(tc.targets, f.asked); d != "" {
				t.Errorf("inspected: %s", d)
			}
			for _, s := range f.sizes {
				if !s {
					t.Errorf("--size not passed on")
				}
			}
		})
	}
	// A bad template: bad_flag, before anything is inspected.
	for _, bad := range []string{"{{.state", "{{template \"x\"}}", "{{.limits.memory.x}}"} {
		f := inspectFake()
		var out, errOut bytes.Buffer
		err := runInspect(context.Background(), f, &out, &errOut, []core.Target{u1}, inspectOptions{format: bad})
		st, ok := err.(cli.StatusError)
		if !ok || st.StatusCode != 125 || !strings.Contains(st.Status, "invalid --format template") || out.Len() != 0 {
			t.Errorf("template %q: %#v, printed %q", bad, err, out.String())
		}
		if strings.HasPrefix(bad, "{{.state") && len(f.asked) != 0 {
			t.Errorf("template %q: inspected %v before parsing it", bad, f.asked)
		}
	}
}
