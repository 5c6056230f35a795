package plugin

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/docker/cli/cli"
	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// fakeSandboxes is the sandbox manager as stop and rm see it: it lists
// rows, knows which targets exist, and records every call.
type fakeSandboxes struct {
	rows       []*sbexec.Sandbox
	exist      map[string]bool  // targets that are there to stop or remove
	fail       map[string]error // targets whose stop/remove fails
	netScopes  []string
	nets       map[string]bool  // scopes with an egress network
	netErr     map[string]error // scopes whose network removal fails
	calls      []string
	listed     []sbexec.ListOptions
	policyHeld map[string]bool
}

func (f *fakeSandboxes) List(ctx context.Context, o sbexec.ListOptions) ([]*sbexec.Sandbox, error) {
	f.listed = append(f.listed, o)
	f.calls = append(f.calls, fmt.Sprintf("List all=%v", o.All))
	return f.rows, nil
}

func (f *fakeSandboxes) act(verb string, t core.Target, force bool) (bool, error) {
	f.calls = append(f.calls, fmt.Sprintf("%s %s force=%v", verb, t, force))
	if err := f.fail[t.String()]; err != nil {
		return false, err
	}
	return f.exist[t.String()], nil
}

func (f *fakeSandboxes) StopSandbox(ctx context.Context, t core.Target, force bool) (bool, error) {
	return f.act("StopSandbox", t, force)
}

func (f *fakeSandboxes) StopExact(ctx context.Context, t core.Target, force bool) (bool, error) {
	return f.act("StopExact", t, force)
}

func (f *fakeSandboxes) RemoveSandbox(ctx context.Context, t core.Target, force bool) (bool, error) {
	return f.act("RemoveSandbox", t, force)
}

func (f *fakeSandboxes) ScopeNetworkScopes(ctx context.Context, labels []string) ([]string, error) {
	f.calls = append(f.calls, fmt.Sprintf("ScopeNetworkScopes %v", labels))
	return f.netScopes, nil
}

func (f *fakeSandboxes) RemoveScopeNetwork(ctx context.Context, scope string) (bool, error) {
	f.calls = append(f.calls, "RemoveScopeNetwork "+scope)
	return f.nets[scope], f.netErr[scope]
}

func (f *fakeSandboxes) StoredPolicy(ctx context.Context, scope string) (bool, bool, error) {
	f.calls = append(f.calls, "StoredPolicy "+scope)
	return f.policyHeld[scope], true, nil
}

func sbRow(target string) *sbexec.Sandbox {
	t, _ := core.ParseTarget(target)
	return &sbexec.Sandbox{Scope: t.Scope, Session: t.Session}
}

func TestStop(t *testing.T) {
	for _, tc := range []struct {
		name           string
		args           []string
		o              removalOptions
		f              fakeSandboxes
		calls          []string
		stdout, stderr string
		exit           int
	}{
		{name: "names, each once", args: []string{"u1", "u1/chat", "u1"}, f: fakeSandboxes{exist: map[string]bool{"u1": true, "u1/chat": true}},
			calls: []string{"StopSandbox u1 force=false", "StopSandbox u1/chat force=false"}, stdout: "u1\nu1/chat\n"},
		{name: "a missing one: not_found, the others done", args: []string{"gone", "u1"}, f: fakeSandboxes{exist: map[string]bool{"u1": true}},
			calls:  []string{"StopSandbox gone force=false", "StopSandbox u1 force=false"},
			stdout: "u1\n", stderr: "docker sandbox: no sandbox gone (no container): see `docker sandbox ls -a`\n", exit: 125},
		{name: "-f: a missing one is no error", args: []string{"gone"}, o: removalOptions{force: true},
			calls: []string{"StopSandbox gone force=true"}},
		{name: "busy", args: []string{"u1"}, f: fakeSandboxes{fail: map[string]error{"u1": core.Errorf(core.CodeScopeBusy, "busy")}},
			calls: []string{"StopSandbox u1 force=false"}, stderr: "docker sandbox: busy\n", exit: 125},
		{name: "json: every result, the first error on stderr", args: []string{"gone", "u1"}, o: removalOptions{format: "json"}, f: fakeSandboxes{exist: map[string]bool{"u1": true}},
			calls:  []string{"StopSandbox gone force=false", "StopSandbox u1 force=false"},
			stdout: `[{"target":"gone","removed":false,"error":{"code":"not_found","message":"no sandbox gone (no container): see ` + "`docker sandbox ls -a`" + `"}},{"target":"u1","removed":true,"error":null}]` + "\n",
			stderr: "docker sandbox: no sandbox gone (no container): see `docker sandbox ls -a`\n", exit: 125},
		{name: "a bad name: nothing stopped", args: []string{"u1", "../x"}, exit: 125},
		// --all: each listed container (StopExact), sessions first; gone
		// meanwhile is no error.
		{name: "--all", o: removalOptions{all: true, filters: []string{"scope=u1"}},
			f:     fakeSandboxes{rows: []*sbexec.Sandbox{sbRow("u1"), sbRow("u1/a"), sbRow("u1/b")}, exist: map[string]bool{"u1": true, "u1/b": true}},
			calls: []string{"List all=false", "StopExact u1/a force=false", "StopExact u1/b force=false", "StopExact u1 force=false"}, stdout: "u1/b\nu1\n"},
		{name: "--all, a bad filter", o: removalOptions{all: true, filters: []string{"colour=red"}}, exit: 125},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			f := tc.f
			err := fail(&out, tc.o.format, runStop(context.Background(), &f, &out, &errOut, tc.args, tc.o))
			wantExit(t, err, tc.exit)
			if d := cmp.Diff(tc.calls, f.calls); d != "" {
				t.Errorf("calls (-want +got):\n%s", d)
			}
			if tc.stdout != "" || tc.exit == 0 {
				if d := cmp.Diff(tc.stdout, out.String()); d != "" {
					t.Errorf("stdout: %s", d)
				}
			}
			if tc.stderr != "" {
				if d := cmp.Diff(tc.stderr, errOut.String()); d != "" {
					t.Errorf("stderr: %s", d)
				}
			}
			if tc.o.all && len(f.listed) > 0 && f.listed[0].Filter.Scopes[0] != "u1" {
				t.Errorf("filter not passed on: %+v", f.listed)
			}
		})
	}
}

func TestRm(t *testing.T) {
	for _, tc := range []struct {
		name           string
		args           []string
		o              removalOptions
		f              fakeSandboxes
		calls          []string
		stdout, stderr string
		exit           int
	}{
		// A scope: its sandbox and data, then its egress network; the
		// policy that stays is said.
		{name: "a scope and a session", args: []string{"u1/chat", "u1"},
			f:      fakeSandboxes{exist: map[string]bool{"u1/chat": true, "u1": true}, policyHeld: map[string]bool{"u1": true}},
			calls:  []string{"RemoveSandbox u1/chat force=false", "RemoveSandbox u1 force=false", "RemoveScopeNetwork u1", "StoredPolicy u1"},
			stdout: "u1/chat\nu1\n",
			stderr: "docker sandbox: the egress policy of scope u1 stays in the sidecar (`docker sandbox egress policy u1 --clear` removes it)\n"},
		// A scope with only its network left is found.
		{name: "only a network", args: []string{"n1"}, f: fakeSandboxes{nets: map[string]bool{"n1": true}},
			calls: []string{"RemoveSandbox n1 force=false", "RemoveScopeNetwork n1", "StoredPolicy n1"}, stdout: "n1\n"},
		{name: "nothing", args: []string{"gone"}, calls: []string{"RemoveSandbox gone force=false", "RemoveScopeNetwork gone"},
			stderr: "docker sandbox: no sandbox gone (no container or data): see `docker sandbox ls -a`\n", exit: 125},
		// --all: the listed ones (with data too) and the scopes with only
		// a network, as --filter scope= allows; sessions first.
		{name: "--all", o: removalOptions{all: true, filters: []string{"scope=u1", "scope=n1", "label=a=b"}},
			f: fakeSandboxes{rows: []*sbexec.Sandbox{sbRow("u1"), sbRow("u1/a")}, netScopes: []string{"u1", "n1", "other"},
				exist: map[string]bool{"u1": true, "u1/a": true}, nets: map[string]bool{"n1": true}},
			calls: []string{"List all=true", "ScopeNetworkScopes [a=b]", "RemoveSandbox u1/a force=false", "RemoveSandbox u1 force=false", "RemoveScopeNetwork u1", "StoredPolicy u1",
				"RemoveSandbox n1 force=false", "RemoveScopeNetwork n1", "StoredPolicy n1"},
			stdout: "u1/a\nu1\nn1\n"},
		// A session or state filter: no network-only scopes.
		{name: "--all, a state filter", o: removalOptions{all: true, filters: []string{"state=idle"}},
			f:     fakeSandboxes{rows: []*sbexec.Sandbox{sbRow("u1/a")}, exist: map[string]bool{"u1/a": true}},
			calls: []string{"List all=true", "RemoveSandbox u1/a force=false"}, stdout: "u1/a\n"},
		// The scope's data went, its network would not: an error.
		{name: "a network that will not go", args: []string{"u1"},
			f:     fakeSandboxes{exist: map[string]bool{"u1": true}, netErr: map[string]error{"u1": core.Errorf(core.CodeEngineError, "network in use")}},
			calls: []string{"RemoveSandbox u1 force=false", "RemoveScopeNetwork u1", "StoredPolicy u1"}, stderr: "docker sandbox: network in use\n", exit: 125},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			f := tc.f
			err := fail(&out, tc.o.format, runRm(context.Background(), &f, &f, &out, &errOut, tc.args, tc.o))
			wantExit(t, err, tc.exit)
			if d := cmp.Diff(tc.calls, f.calls); d != "" {
				t.Errorf("calls (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.stdout, out.String()); d != "" {
				t.Errorf("stdout: %s", d)
			}
			if d := cmp.Diff(tc.stderr, errOut.String()); d != "" {
				t.Errorf("stderr: %s", d)
			}
		})
	}
	// A template over the results.
	var out bytes.Buffer
	f := &fakeSandboxes{exist: map[string]bool{"u1/a": true}}
	if err := runRm(context.Background(), f, f, &out, &bytes.Buffer{}, []string{"u1/a"}, removalOptions{format: "{{range .}}{{.target}}={{.removed}}{{end}}"}); err != nil || out.String() != "u1/a=true\n" {
		t.Errorf("%v %q", err, out.String())
	}
}

// stop and rm take names or --all (--filter only with --all): a usage
// error, exit 125, before anything is asked of the engine.
func TestRemovalArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		o    removalOptions
		want string
	}{
		{args: []string{"u1"}, o: removalOptions{all: true}, want: "give names or --all, not both"},
		{want: "requires at least 1 argument, or --all"},
		{args: []string{"u1"}, o: removalOptions{filters: []string{"scope=u1"}}, want: "--filter needs --all"},
		{args: []string{"u1"}},
		{o: removalOptions{all: true, filters: []string{"scope=u1"}}},
	} {
		cmd := &cobra.Command{Use: "stop"}
		cmd.Flags().String("format", "", "")
		err := checkRemovalArgs(cmd, tc.args, tc.o)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v %+v: %v", tc.args, tc.o, err)
			}
			continue
		}
		if st, ok := err.(cli.StatusError); !ok || st.StatusCode != 125 || !strings.Contains(st.Status, tc.want) {
			t.Errorf("%v %+v: %#v", tc.args, tc.o, err)
		}
	}
}

// wantExit checks a verb's error: nil for exit 0, else a status error
// with that exit code.
func wantExit(t *testing.T, err error, exit int) {
	t.Helper()
	if exit == 0 {
		if err != nil {
			t.Fatalf("error: %v", err)
		}
		return
	}
	st, ok := err.(cli.StatusError)
	if !ok || st.StatusCode != exit {
		t.Fatalf("error %#v, want exit %d", err, exit)
	}
}
