package exec

import "testing"

func TestResolveWorkdir(t *testing.T) {
	good := map[string]string{"": "/opt/workspace", "sub": "/opt/workspace/sub", "a/../b": "/opt/workspace/b",
		"/opt/workspace/x": "/opt/workspace/x", "/opt/user": "/opt/user", "./": "/opt/workspace"}
	for in, want := range good {
		if got, err := ResolveWorkdir(in); err != nil || got != want {
			t.Errorf("ResolveWorkdir(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"..", "../etc", "/etc", "/opt/workspace/../../etc", "/opt/workspacex", "/opt"} {
		if _, err := ResolveWorkdir(bad); err == nil {
			t.Errorf("ResolveWorkdir(%q) accepted", bad)
		}
	}
}
