package plugin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// egStatusPolicies returns the scopes `egress status` lists a policy for,
// with their allow lists.
func egStatusPolicies(t *testing.T) map[string][]string {
	t.Helper()
	r := sb(t, "egress", "status", "--format", "json")
	wantCode(t, r, 0)
	var st struct {
		Policies []struct {
			Scope string   `json:"scope"`
			Allow []string `json:"allow"`
		} `json:"policies"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
		t.Fatalf("egress status: %v\n%s", err, r)
	}
	out := map[string][]string{}
	for _, p := range st.Policies {
		out[p.Scope] = p.Allow
	}
	return out
}

type egClearJSON struct {
	Scope     string   `json:"scope"`
	Existed   bool     `json:"existed"`
	Removed   bool     `json:"removed"`
	Sandboxes []string `json:"sandboxes"`
}

func egClear(t *testing.T, scope string) egClearJSON {
	t.Helper()
	r := sb(t, "egress", "policy", scope, "--clear", "--format", "json")
	wantCode(t, r, 0)
	var j egClearJSON
	dec := json.NewDecoder(strings.NewReader(r.Stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		t.Fatalf("egress policy --clear --format json: %v\n%s", err, r)
	}
	return j
}

// egressGet asks for http://up.egress.test/hello from scope's sandbox and
// returns the status and the proxy's error code.
func egressGet(t *testing.T, scope string) (int, string) {
	t.Helper()
	out := egResults(t, []string{"-s", scope, "--network", "proxy"}, `R["get"] = get("http://`+egUpName+`/hello", host="`+egUpName+`")`)
	return int(out["get"]["status"].(float64)), out["get"]["code"].(string)
}

// Issue 13, items 6 and 8: `egress policy SCOPE --clear` removes a scope's
// policy (and credential) so that `egress status` no longer lists it; while
// sandboxes of the scope hold the credential it empties the policy instead
// (everything denied at once); `rm SCOPE` says whether the policy stays;
// `egress logs` reads a stopped sidecar's log without starting it, and prints
// no table header before failing.
func TestEgressPolicyClear(t *testing.T) {
	needE2E(t)
	f := egSetup(t)
	a := newScope(t)
	b := newScope(t)
	c := newScope(t)
	t.Cleanup(func() {
		for _, s := range []string{a, b, c} {
			sb(t, "egress", "policy", s, "--clear")
		}
	})

	// A proxy-mode sandbox of a that reaches the upstream.
	wantCode(t, sb(t, append(append([]string{"exec"}, egPolicyArgs(f, a)...), "-c", "true")...), 0)
	if st, code := egressGet(t, a); st != 200 {
		t.Fatalf("with the policy: status %d %s", st, code)
	}

	t.Run("clear while a sandbox holds the credential denies everything", func(t *testing.T) {
		j := egClear(t, a)
		if !j.Existed || j.Removed || len(j.Sandboxes) != 1 || j.Sandboxes[0] != "docker-sandbox-"+a {
			t.Fatalf("--clear with a sandbox: %+v", j)
		}
		if st, code := egressGet(t, a); st != 403 || code != "host_not_allowed" {
			t.Fatalf("after --clear the sandbox still got through: %d %s", st, code)
		}
		if allow, ok := egStatusPolicies(t)[a]; !ok || len(allow) != 0 {
			t.Fatalf("status: the emptied policy should stay while the sandbox exists: %v %v", allow, ok)
		}
		// The credential stays: a new policy applies to the same sandbox.
		wantCode(t, sb(t, "egress", "policy", a, "--allow", egUpName, "--allow-cidr", f.outSubnet.String()), 0)
		if st, code := egressGet(t, a); st != 200 {
			t.Fatalf("a policy set after an emptying --clear does not reach the sandbox: %d %s", st, code)
		}
	})

	t.Run("rm says the policy stays, clear removes it", func(t *testing.T) {
		r := sb(t, "rm", a)
		wantCode(t, r, 0)
		if !strings.Contains(r.Stderr, "the egress policy of scope "+a+" stays in the sidecar") || !strings.Contains(r.Stderr, "egress policy "+a+" --clear") {
			t.Fatalf("rm of a scope with a policy does not say it stays:\n%s", r)
		}
		if _, ok := egStatusPolicies(t)[a]; !ok {
			t.Fatalf("rm removed the policy")
		}
		j := egClear(t, a)
		if !j.Existed || !j.Removed || len(j.Sandboxes) != 0 {
			t.Fatalf("--clear without sandboxes: %+v", j)
		}
		if _, ok := egStatusPolicies(t)[a]; ok {
			t.Fatalf("egress status still lists %s after --clear", a)
		}
		r = sb(t, "egress", "policy", a, "--format", "json")
		wantCode(t, r, 125)
		if e := decodeErr(t, r); e.Error.Code != "not_found" {
			t.Fatalf("policy of a cleared scope: %+v", e)
		}
		// Again: nothing to remove, said so, exit 0.
		r = sb(t, "egress", "policy", a, "--clear")
		wantCode(t, r, 0)
		if !strings.Contains(r.Stdout, "has no egress policy") {
			t.Fatalf("second --clear:\n%s", r)
		}
		// The scope starts anew: a proxy-mode exec gets a new credential
		// and an empty policy.
		r = sb(t, "exec", "-s", a, "--network", "proxy", "-c", "true")
		wantCode(t, r, 0)
		if !strings.Contains(r.Stderr, "empty egress policy") {
			t.Fatalf("a cleared scope's next exec does not say its policy is empty:\n%s", r)
		}
		if st, code := egressGet(t, a); st != 403 || code != "host_not_allowed" {
			t.Fatalf("a cleared scope's new sandbox: %d %s", st, code)
		}
	})

	t.Run("a scope without a sandbox, and rm without a policy", func(t *testing.T) {
		wantCode(t, sb(t, "egress", "policy", c, "--allow", "x.test"), 0)
		if j := egClear(t, c); !j.Existed || !j.Removed {
			t.Fatalf("--clear of a scope with a policy and no sandbox: %+v", j)
		}
		if _, ok := egStatusPolicies(t)[c]; ok {
			t.Fatalf("status still lists %s", c)
		}
		// rm of a scope that never had a policy says nothing about one.
		wantCode(t, sb(t, "exec", "-s", b, "-c", "true"), 0)
		r := sb(t, "rm", b)
		wantCode(t, r, 0)
		if strings.Contains(r.Stderr, "egress") {
			t.Fatalf("rm of a scope without a policy mentions one:\n%s", r)
		}
		// --clear with other flags is a usage error, and changes nothing.
		r = sb(t, "egress", "policy", b, "--clear", "--allow", "x.test", "--format", "json")
		wantCode(t, r, 125)
		if e := decodeErr(t, r); e.Error.Code != "bad_flag" {
			t.Fatalf("--clear --allow: %+v", e)
		}
		if _, ok := egStatusPolicies(t)[b]; ok {
			t.Fatalf("a refused --clear --allow set a policy")
		}
	})

	t.Run("logs of a stopped sidecar do not start it", func(t *testing.T) {
		wantCode(t, sb(t, "egress", "stop"), 0)
		running := func() bool {
			ctr, err := engine(t).ContainerInspect(context.Background(), egSidecar)
			if err != nil {
				t.Fatal(err)
			}
			return ctr.State.Running
		}
		if running() {
			t.Fatal("egress stop did not stop the sidecar")
		}
		r := sb(t, "egress", "logs", "--scope", a, "--format", "json")
		wantCode(t, r, 0)
		if !strings.Contains(r.Stdout, `"scope":"`+a+`"`) || !strings.Contains(r.Stdout, `"decision":"deny"`) || !strings.Contains(r.Stdout, `"decision":"allow"`) {
			t.Fatalf("the stopped sidecar's log:\n%s", r)
		}
		r = sb(t, "egress", "logs", "--scope", a, "--tail", "1")
		wantCode(t, r, 0)
		if lines := strings.Split(strings.TrimSpace(r.Stdout), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "TIME") {
			t.Fatalf("--tail 1 of a stopped sidecar: want the header and one line:\n%s", r)
		}
		r = sb(t, "egress", "logs", "-f")
		wantCode(t, r, 125)
		if r.Stdout != "" || !strings.Contains(r.Stderr, "stopped") {
			t.Fatalf("logs -f of a stopped sidecar:\n%s", r)
		}
		if running() {
			t.Fatal("egress logs started the sidecar")
		}
		// No sidecar at all: the error, and no table header.
		wantCode(t, sb(t, "egress", "stop", "--rm"), 0)
		r = sb(t, "egress", "logs")
		wantCode(t, r, 125)
		if r.Stdout != "" || !strings.Contains(r.Stderr, "not running") {
			t.Fatalf("logs without a sidecar:\n%s", r)
		}
		// A plain start brings it back, with the test's settings.
		wantCode(t, sb(t, "egress", "start"), 0)
	})
}
