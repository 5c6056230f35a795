package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
	"github.com/docker-sandbox/docker-sandbox/egress/proxy"
)

// fakeEgress is the sidecar manager as the egress verbs see it.
type fakeEgress struct {
	status   egress.Status
	policies map[string]egress.ScopePolicy
	cleared  egress.Cleared
	logs     string // the helper's log lines
	logsErr  error
	calls    []string
	started  []egress.Settings
	set      []policy.Rules
}

func (f *fakeEgress) Status(ctx context.Context) (egress.Status, error) {
	f.calls = append(f.calls, "Status")
	return f.status, nil
}

func (f *fakeEgress) Start(ctx context.Context, s egress.Settings, given, replace bool) (*container.InspectResponse, bool, error) {
	f.calls = append(f.calls, fmt.Sprintf("Start given=%v replace=%v", given, replace))
	f.started = append(f.started, s)
	return nil, true, nil
}

func (f *fakeEgress) Stop(ctx context.Context, remove bool) (bool, []string, error) {
	f.calls = append(f.calls, fmt.Sprintf("Stop %v", remove))
	if !remove {
		return true, nil, nil
	}
	return true, []string{"docker-sandbox.net.a"}, nil
}

func (f *fakeEgress) Policy(ctx context.Context, scope string) (egress.ScopePolicy, bool, error) {
	f.calls = append(f.calls, "Policy "+scope)
	p, ok := f.policies[scope]
	return p, ok, nil
}

func (f *fakeEgress) SetPolicy(ctx context.Context, scope string, r policy.Rules) (policy.Rules, error) {
	f.calls = append(f.calls, "SetPolicy "+scope)
	f.set = append(f.set, r)
	if f.policies == nil {
		f.policies = map[string]egress.ScopePolicy{}
	}
	f.policies[scope] = egress.ScopePolicy{Scope: scope, Rules: r}
	return r, nil
}

func (f *fakeEgress) ClearPolicy(ctx context.Context, scope string) (egress.Cleared, error) {
	f.calls = append(f.calls, "ClearPolicy "+scope)
	return f.cleared, nil
}

func (f *fakeEgress) Logs(ctx context.Context, follow bool, tail int, out io.Writer) error {
	f.calls = append(f.calls, fmt.Sprintf("Logs follow=%v tail=%d", follow, tail))
	if _, err := io.WriteString(out, f.logs); err != nil {
		return err
	}
	return f.logsErr
}

func egressStatusFixture() egress.Status {
	return egress.Status{Running: true, State: "running", Container: "0123456789ab", Image: "docker-sandbox-helper:1", Version: "0.1.0",
		OutboundNetwork: "bridge", OutboundAddress: "172.17.0.2", SubnetPool: "10.213.0.0/16", SubnetBits: 24, Hosts: []string{"pypi.org=10.0.0.1"},
		Networks: []egress.NetworkStatus{{Scope: "a", Name: "docker-sandbox.net.a", Subnet: "10.213.0.0/24", Proxy: "10.213.0.2:3128", Sandboxes: 2, Connected: true}},
		Policies: []egress.ScopePolicy{
			{Scope: "a", Rules: policy.Rules{Allow: []string{"pypi.org", "*.pythonhosted.org"}, AllowPorts: []int{}, AllowCIDRs: []string{}, Deny: []string{"*.internal.example"}}},
			{Scope: "b\x1b[31m", Rules: policy.Rules{Allow: []string{}, AllowPorts: []int{8443}, AllowCIDRs: []string{"10.1.0.0/16"}}},
		},
		Counters: json.RawMessage(`{"allowed":3,"denied":1000000,"active_tunnels":1}`)}
}

func TestEgressStatus(t *testing.T) {
	f := &fakeEgress{status: egressStatusFixture()}
	var out bytes.Buffer
	if err := runEgressStatus(context.Background(), f, &out, egressStatusOptions{}); err != nil {
		t.Fatal(err)
	}
	want := `egress sidecar: running (0123456789ab, docker-sandbox-helper:1, version 0.1.0)
outbound:       bridge 172.17.0.2
scope subnets:  /24 from 10.213.0.0/16
static hosts:   pypi.org=10.0.0.1
decisions:      3 allowed, 1000000 denied, 1 open connections

SCOPE         NETWORK                SUBNET          PROXY             SANDBOXES   ALLOW                         PORTS     CIDRS         DENY
a             docker-sandbox.net.a   10.213.0.0/24   10.213.0.2:3128   2           pypi.org,*.pythonhosted.org   80,443    -             *.internal.example
"b\x1b[31m"   -                      -               -                 0           -                             8443      10.1.0.0/16   -
`
	if d := cmp.Diff(want, out.String()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	// Templates see the JSON names; numbers as written.
	out.Reset()
	if err := runEgressStatus(context.Background(), f, &out, egressStatusOptions{format: "{{.counters.allowed}} {{.counters.denied}} {{(index .networks 0).sandboxes}}"}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff("3 1000000 2\n", out.String()); d != "" {
		t.Error(d)
	}
	// No sidecar, no scopes: one line.
	out.Reset()
	if err := runEgressStatus(context.Background(), &fakeEgress{status: egress.Status{State: "absent"}}, &out, egressStatusOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "egress sidecar: not running") || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("%q", out.String())
	}
}

func TestEgressStartStop(t *testing.T) {
	f := &fakeEgress{status: egress.Status{State: "running"}}
	var out bytes.Buffer
	o := egressStartOptions{pool: "10.9.0.0/16", subnetBits: 26, hosts: []string{"a.test:10.0.0.1", "b.test=10.0.0.2"}, noDNS: true, given: true, format: "{{.state}}"}
	if err := runEgressStart(context.Background(), f, &out, o); err != nil {
		t.Fatal(err)
	}
	want := egress.Settings{Pool: netip.MustParsePrefix("10.9.0.0/16"), Bits: 26, Hosts: []string{"a.test=10.0.0.1", "b.test=10.0.0.2"}, NoDNS: true}
	if d := cmp.Diff([]egress.Settings{want}, f.started, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Error(d)
	}
	if d := cmp.Diff([]string{"Start given=true replace=false", "Status"}, f.calls); d != "" || out.String() != "running\n" {
		t.Errorf("%s %q", d, out.String())
	}
	// A bad pool: bad_flag, nothing started.
	f = &fakeEgress{}
	if err := runEgressStart(context.Background(), f, &out, egressStartOptions{pool: "10.9.0.0"}); core.AsError(err).Code != core.CodeBadFlag || len(f.calls) != 0 {
		t.Errorf("bad pool: %v, calls %v", err, f.calls)
	}

	for _, tc := range []struct {
		o              egressStopOptions
		stdout, stderr string
	}{
		{o: egressStopOptions{}, stdout: "stopped the egress sidecar docker-sandbox.egress\n"},
		{o: egressStopOptions{rm: true}, stdout: "removed the egress sidecar docker-sandbox.egress\nremoved network docker-sandbox.net.a\n"},
		{o: egressStopOptions{format: "json"}, stdout: `{"stopped":true,"removed":false,"networks_removed":[]}` + "\n"},
	} {
		var out, errOut bytes.Buffer
		if err := runEgressStop(context.Background(), &fakeEgress{}, &out, &errOut, tc.o); err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.stdout || errOut.String() != tc.stderr {
			t.Errorf("%+v: %q %q", tc.o, out.String(), errOut.String())
		}
	}
}

func TestEgressPolicy(t *testing.T) {
	f := &fakeEgress{policies: map[string]egress.ScopePolicy{"a": {Scope: "a", Rules: policy.Rules{Allow: []string{"pypi.org", "x\u202e.test"}, AllowPorts: []int{}, AllowCIDRs: []string{}}}}}
	var out, errOut bytes.Buffer
	if err := runEgressPolicy(context.Background(), f, &out, &errOut, "a", false, egressPolicyOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff("scope:  a\nallow:  pypi.org,\"x\\u202e.test\"\nports:  80,443\ncidrs:  (none)\ndeny:   (none)\n", out.String()); d != "" {
		t.Error(d)
	}
	// A scope without a policy: not_found.
	if err := runEgressPolicy(context.Background(), f, &out, &errOut, "b", false, egressPolicyOptions{}); core.AsError(err).Code != core.CodeNotFound {
		t.Errorf("no policy: %v", err)
	}
	// Set: normalized rules, then the stored policy is shown.
	out.Reset()
	f.calls = nil
	o := egressPolicyOptions{rules: egressRuleFlags{allow: []string{"PyPI.org"}, ports: []string{"443,8443"}, deny: []string{"X.Internal.Example"}}, format: "json"}
	if err := runEgressPolicy(context.Background(), f, &out, &errOut, "b", true, o); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"SetPolicy b", "Policy b"}, f.calls); d != "" {
		t.Error(d)
	}
	if d := cmp.Diff([]policy.Rules{{Allow: []string{"pypi.org"}, AllowPorts: []int{443, 8443}, AllowCIDRs: []string{}, Deny: []string{"x.internal.example"}}}, f.set); d != "" {
		t.Error(d)
	}
	if !strings.HasPrefix(out.String(), `{"scope":"b","allow":["pypi.org"],"allow_ports":[443,8443],"allow_cidrs":[],"deny":["x.internal.example"]`) {
		t.Errorf("%s", out.String())
	}
	// Bad values and --clear with rules: bad_flag, nothing changed.
	for _, o := range []egressPolicyOptions{{rules: egressRuleFlags{ports: []string{"0"}}}, {rules: egressRuleFlags{allow: []string{"a.*.b"}}}, {clear: true, rules: egressRuleFlags{allow: []string{"x.test"}}},
		{rules: egressRuleFlags{deny: []string{"a.*.b"}}}, {clear: true, rules: egressRuleFlags{deny: []string{"x.test"}}}} {
		f.calls = nil
		if err := runEgressPolicy(context.Background(), f, &out, &errOut, "b", true, o); core.AsError(err).Code != core.CodeBadFlag || len(f.calls) != 0 {
			t.Errorf("%+v: %v, calls %v", o, err, f.calls)
		}
	}
	// --clear while sandboxes hold the credential: emptied, a hint on stderr.
	out.Reset()
	errOut.Reset()
	f.cleared = egress.Cleared{Existed: true, Sandboxes: []string{"docker-sandbox-b"}}
	if err := runEgressPolicy(context.Background(), f, &out, &errOut, "b", true, egressPolicyOptions{clear: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "everything denied") || !strings.Contains(errOut.String(), "docker sandbox rm b") {
		t.Errorf("%q %q", out.String(), errOut.String())
	}
	out.Reset()
	f.cleared = egress.Cleared{}
	if err := runEgressPolicy(context.Background(), f, &out, &errOut, "b", true, egressPolicyOptions{clear: true, format: "json"}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(`{"scope":"b","existed":false,"removed":false,"sandboxes":[]}`+"\n", out.String()); d != "" {
		t.Error(d)
	}
}

func egressLogLines(recs ...string) string {
	return strings.Join(recs, "\n") + "\n"
}

func TestEgressLogs(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Format(time.RFC3339Nano)
	rec := func(scope, decision, host string, port, status int, reason string) string {
		q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
		return fmt.Sprintf(`{"time":%s,"scope":%s,"method":"CONNECT","host":%s,"port":%d,"ip":"","decision":%s,"code":"","reason":%s,"status":%d,"bytes_out":2048,"bytes_in":1048576,"duration_ms":12.34,"client":""}`,
			q(at), q(scope), q(host), port, q(decision), q(reason), status)
	}
	lines := egressLogLines(rec("a", "allow", "pypi.org", 443, 200, ""), rec("b", "deny", "evil\x1b]0;x\a.test", 443, 403, "not allowed"), rec("a", "deny", "x.test", 80, 403, "no"))
	for _, tc := range []struct {
		name string
		o    egressLogsOptions
		want string
		tail int // what the helper is asked for
	}{
		{name: "table", o: egressLogsOptions{tail: -1}, tail: -1, want: `
TIME                   SCOPE     DECISION   METHOD    TARGET                      IP        STATUS    BYTES OUT/IN      DURATION   REASON
2026-03-01T12:00:00Z   a         allow      CONNECT   pypi.org:443                -         200       2.048kB/1.049MB   12.3ms     
2026-03-01T12:00:00Z   b         deny       CONNECT   "evil\x1b]0;x\a.test:443"   -         403       2.048kB/1.049MB   12.3ms     not allowed
2026-03-01T12:00:00Z   a         deny       CONNECT   x.test:80                   -         403       2.048kB/1.049MB   12.3ms     no
`},
		{name: "scope and tail: filtered here", o: egressLogsOptions{scope: "a", tail: 1, format: "{{.host}} {{.status}} {{.bytes_in}}"}, tail: -1, want: "x.test 403 1048576\n"},
		{name: "tail: at the helper", o: egressLogsOptions{tail: 2, format: "{{.Target}}"}, tail: 2,
			want: "\"evil\\x1b]0;x\\a.test:443\"\nx.test:80\n"},
		{name: "json: the lines as they are", o: egressLogsOptions{tail: -1, format: "json"}, tail: -1, want: "\n" + lines},
		{name: "table template", o: egressLogsOptions{tail: -1, format: `table {{.Scope}}\t{{.decision}}\t{{.Status}}`}, tail: -1, want: `
SCOPE     DECISION   STATUS
a         allow      200
b         deny       403
a         deny       403
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeEgress{logs: lines}
			var out bytes.Buffer
			if err := runEgressLogs(context.Background(), f, &out, tc.o); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(strings.TrimPrefix(tc.want, "\n"), out.String()); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if d := cmp.Diff([]string{fmt.Sprintf("Logs follow=false tail=%d", tc.tail)}, f.calls); d != "" {
				t.Error(d)
			}
		})
	}
	// No sidecar: only the error, no header.
	var out bytes.Buffer
	e := core.Errorf("egress_not_running", "no sidecar")
	if err := runEgressLogs(context.Background(), &fakeEgress{logsErr: e}, &out, egressLogsOptions{tail: -1}); err != e || out.Len() != 0 {
		t.Errorf("%v %q", err, out.String())
	}
	// No decisions yet: the header.
	out.Reset()
	if err := runEgressLogs(context.Background(), &fakeEgress{}, &out, egressLogsOptions{tail: -1}); err != nil || !strings.HasPrefix(out.String(), "TIME ") || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("%v %q", err, out.String())
	}
	// A bad template: bad_flag before the logs are read.
	f := &fakeEgress{logs: lines}
	if err := runEgressLogs(context.Background(), f, &out, egressLogsOptions{format: "{{.host"}); core.AsError(err).Code != core.CodeBadFlag || len(f.calls) != 0 {
		t.Errorf("%v %v", err, f.calls)
	}
	// --summary: one object.
	out.Reset()
	if err := runEgressLogs(context.Background(), &fakeEgress{logs: lines}, &out, egressLogsOptions{summary: true, tail: -1, format: "{{len .allowed}} {{len .denied}}"}); err != nil || out.String() != "1 2\n" {
		t.Errorf("%v %q", err, out.String())
	}
	// Flag checks.
	for _, o := range []egressLogsOptions{{scope: "../x"}, {summary: true, follow: true}} {
		if err := o.validate(); err == nil || core.AsError(err).Exit != 125 {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// With -f, each decision is printed as it comes, not at the end.
func TestEgressLogsFollow(t *testing.T) {
	pr, pw := io.Pipe()
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runEgressLogs(ctx, followLogs{pr}, out, egressLogsOptions{follow: true, tail: -1})
	}()
	fmt.Fprintf(pw, "%s\n%s\n", proxy.BacklogMark, `{"time":"2026-03-01T12:00:00Z","scope":"a","method":"GET","host":"x.test","port":80,"decision":"deny","status":403}`)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "x.test:80") {
		if time.Now().After(deadline) {
			t.Fatalf("the decision was not printed while following: %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.HasPrefix(out.String(), "TIME ") {
		t.Errorf("no header first: %q", out.String())
	}
	cancel()
	pw.Close()
	if err := <-done; err != nil {
		t.Errorf("Ctrl-C ends -f without an error: %v", err)
	}
}

// followLogs copies r until ctx ends, as the helper's logs -f.
type followLogs struct{ r io.Reader }

func (f followLogs) Logs(ctx context.Context, follow bool, tail int, out io.Writer) error {
	_, err := io.Copy(out, f.r)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
