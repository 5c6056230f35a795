package plugin

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
	"github.com/docker-sandbox/docker-sandbox/egress/proxy"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

func TestExecEgress(t *testing.T) {
	tests := []struct {
		name                      string
		network                   string // config's network (flag or file)
		networkFlag               bool
		allow, ports, cidrs, deny []string
		mode                      string
		rules                     *policy.Rules
		err                       string
	}{
		{name: "default", network: "none", mode: "none"},
		{name: "proxy", network: "proxy", mode: "proxy"},
		{name: "allow implies proxy", network: "none", allow: []string{"PyPI.org", "*.pythonhosted.org"}, mode: "proxy",
			rules: &policy.Rules{Allow: []string{"*.pythonhosted.org", "pypi.org"}, AllowPorts: []int{}, AllowCIDRs: []string{}, Deny: []string{}}},
		{name: "ports and cidrs", network: "proxy", networkFlag: true, ports: []string{"8443,443"}, cidrs: []string{"10.1.2.3/16"}, mode: "proxy",
			rules: &policy.Rules{Allow: []string{}, AllowPorts: []int{443, 8443}, AllowCIDRs: []string{"10.1.0.0/16"}, Deny: []string{}}},
		{name: "deny beside allow", network: "none", allow: []string{"*"}, deny: []string{"*.Internal.Example"}, mode: "proxy",
			rules: &policy.Rules{Allow: []string{"*"}, AllowPorts: []int{}, AllowCIDRs: []string{}, Deny: []string{"*.internal.example"}}},
		{name: "deny alone implies proxy", network: "none", deny: []string{"x.test"}, mode: "proxy",
			rules: &policy.Rules{Allow: []string{}, AllowPorts: []int{}, AllowCIDRs: []string{}, Deny: []string{"x.test"}}},
		{name: "bad deny pattern", network: "none", allow: []string{"*"}, deny: []string{"a.*.b"}, err: "deny: bad host pattern"},
		{name: "deny with network none", network: "none", networkFlag: true, deny: []string{"x.test"}, err: "need --network proxy"},
		{name: "allow with network none", network: "none", networkFlag: true, allow: []string{"x.test"}, err: "need --network proxy"},
		{name: "bad pattern", network: "none", allow: []string{"a.*.b"}, err: "bad host pattern"},
		{name: "bad port", network: "none", ports: []string{"0"}, err: "--allow-port"},
		{name: "bad cidr", network: "none", cidrs: []string{"10.0.0.0/40"}, err: "bad CIDR"},
		{name: "named network", network: "my-net", mode: "my-net"},
		{name: "host", network: "host", err: "refused"},
		{name: "container", network: "container:abc", err: "refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := &cobra.Command{}
			cmd.Flags().String("network", "", "")
			if tt.networkFlag {
				_ = cmd.Flags().Set("network", tt.network)
			}
			c := &config.Config{Settings: core.Settings{Network: tt.network}}
			rules, err := execEgress(cmd, c, egressRuleFlags{allow: tt.allow, ports: tt.ports, cidrs: tt.cidrs, deny: tt.deny})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Network != tt.mode {
				t.Fatalf("mode %q, want %q", c.Network, tt.mode)
			}
			if d := cmp.Diff(tt.rules, rules); d != "" {
				t.Fatal(d)
			}
		})
	}
}

func TestEgFilterTail(t *testing.T) {
	in := strings.Join([]string{
		`{"scope":"a","n":1}`, `{"scope":"b","n":2}`, `{"scope":"a","n":3}`, `{"scope":"a","n":4}`,
		proxy.BacklogMark,
		`{"scope":"a","n":5}`, `{"scope":"b","n":6}`,
	}, "\n") + "\n"
	read := func(scope string, n int) string {
		b, _ := io.ReadAll(egFilterTail(strings.NewReader(in), scope, n))
		return string(b)
	}
	if got := read("a", 2); got != `{"scope":"a","n":3}`+"\n"+`{"scope":"a","n":4}`+"\n"+`{"scope":"a","n":5}`+"\n" {
		t.Fatalf("scope a, tail 2: %q", got)
	}
	if got := read("", 0); got != `{"scope":"a","n":5}`+"\n"+`{"scope":"b","n":6}`+"\n" {
		t.Fatalf("tail 0: %q", got)
	}
	if got := read("b", -1); got != `{"scope":"b","n":2}`+"\n"+`{"scope":"b","n":6}`+"\n" {
		t.Fatalf("scope b: %q", got)
	}
}

// The summary shows hosts, codes and scopes from sandbox requests quoted.
func TestEgPrintSummaryQuotes(t *testing.T) {
	var b strings.Builder
	s := egress.Summary{
		Denied:    []egress.SummaryEntry{{Scope: "s\u202e", Host: "\x1b]0;PWNED\a\u009b31m.test", Port: 443, Count: 1, Codes: []string{"bad_request"}}},
		Suggested: map[string]string{"s": "docker sandbox egress policy s --allow x\u009b.test"},
	}
	if err := egPrintSummary(&b, s); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\a\u009b\u202e") {
		t.Fatalf("raw control characters printed: %q", out)
	}
	for _, w := range []string{`\x1b]0;PWNED\a\u009b31m.test:443`, `\u202e`, `x\u009b.test`} {
		if !strings.Contains(out, w) {
			t.Errorf("%q not shown quoted in:\n%s", w, out)
		}
	}
}
