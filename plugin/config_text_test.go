package plugin

import "testing"

// The text form of `config` says what an empty or zero value means, and
// shows a [scope.NAME] table as its three lists (not Go's map[...]).
func TestConfigText(t *testing.T) {
	for _, tc := range []struct {
		key  string
		v    any
		want string
	}{
		{"default_lang", "", "(sh)"},
		{"default_lang", "python", "python"},
		{"image", "", "(the runtime image)"},
		{"image", "python:3.13-slim", "python:3.13-slim"},
		{"runtime", "", "(engine default)"},
		{"default_scope", "", ""},
		{"max_lifetime", "0s", "0 (none)"},
		{"max_lifetime", "2h0m0s", "2h0m0s"},
		{"idle_ttl", "0s", "0 (never)"},
		{"disk", int64(0), "0 (no limit)"},
		{"copy_max_file_size", int64(0), "0 (= copy_max_size)"},
		{"memory", int64(1073741824), "1073741824"},
		{"cpus", 1.5, "1.5"},
		{"scope.ci-job", map[string]any{"allow": []string{"pypi.org", "*.pythonhosted.org"}, "allow_ports": []int{443}, "allow_cidrs": []string{}},
			"allow=[pypi.org,*.pythonhosted.org] allow_ports=[443] allow_cidrs=[]"},
		{"scope.x", map[string]any{"allow": []string{}, "allow_ports": []int{}, "allow_cidrs": []string{"10.0.0.0/8"}},
			"allow=[] allow_ports=[] allow_cidrs=[10.0.0.0/8]"},
	} {
		if got := configText(tc.key, tc.v); got != tc.want {
			t.Errorf("configText(%q, %#v) = %q, want %q", tc.key, tc.v, got, tc.want)
		}
	}
}
