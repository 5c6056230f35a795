package plugin_test

// The local route of a copy out (copy_local; README, Files: cp and files):
// on an engine on this machine whose volume folders the plugin can open
// (root here), a copy to the host reads the sandbox's volume in the
// plugin's process, with no exec in the sandbox. What must hold: the same
// archive, result and refusals as the helper's stream, no engine exec in
// the sandbox (none under gVisor's runtime: it streams), and a stopped
// sandbox stays stopped.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func cpStream(t *testing.T, args ...string) result {
	t.Helper()
	return sbRun(t, run{args: args, env: []string{"DOCKER_SANDBOX_COPY_LOCAL=false"}})
}

func TestCpLocalRoute(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	cpSh(t, s, `mkdir -p d/e && echo deep > d/e/f && ln d/e/f d/hard && ln -s /etc d/etc && ln -s e/f d/rel && chmod 700 d/e &&
		head -c 4194304 /dev/urandom > big && echo u > /opt/user/u && ln -s /etc out && ln -s d/etc chain &&
		ln -s ../../../../../../../../../../etc hostetc && ln -s ../../../../../../../../../../etc/hostname hostname`)
	settleChannel(t, s) // the setup's channel exec is not the copy's
	id := cpSandboxID(t, s)
	hostName, _ := os.Hostname()
	local := !underRunsc()
	ev := cpWatch(t, id)
	host := t.TempDir()
	wantExecs := func(what string, got map[string]int, none bool) {
		t.Helper()
		if none && got["exec_create"] != 0 {
			t.Errorf("%s: %d execs in the sandbox, want none (the local route)", what, got["exec_create"])
		}
		if !none && got["exec_create"] == 0 {
			t.Errorf("%s: no exec in the sandbox: the helper's stream was not used", what)
		}
	}
	// The same copies both ways: the same result (but the destination)
	// and the same tree on the host.
	for i, src := range []string{"d", "big", "/opt/user/u", "/opt/workspace", "d/.", "d/e/f"} {
		a, b := filepath.Join(host, fmt.Sprintf("local%d", i)), filepath.Join(host, fmt.Sprintf("stream%d", i))
		ra := sb(t, "cp", "--format", "json", s+":"+src, a)
		wantCode(t, ra, 0)
		wantExecs("cp "+src, ev.take(), local)
		rb := cpStream(t, "cp", "--format", "json", s+":"+src, b)
		wantCode(t, rb, 0)
		wantExecs("cp "+src+" with copy_local off", ev.take(), false)
		var ja, jb map[string]any
		if err := json.Unmarshal([]byte(ra.Stdout), &ja); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(rb.Stdout), &jb); err != nil {
			t.Fatal(err)
		}
		delete(ja, "destination")
		delete(jb, "destination")
		if diff := cmp.Diff(jb, ja); diff != "" {
			t.Errorf("cp %s: the local route's result differs from the stream's (-stream +local):\n%s", src, diff)
		}
		if diff := cmp.Diff(cpHostTree(t, b), cpHostTree(t, a)); diff != "" {
			t.Errorf("cp %s: the local route's copy differs from the stream's (-stream +local):\n%s", src, diff)
		}
	}
	// Files the sandbox's user made unreadable to itself (after the copy
	// of the whole workspace, which is the user space without a session).
	// Not folders: the helper's disk measurement gives their owner read
	// and search back after a run (exec/inside/disk.go); TestReadLocal
	// covers them.
	cpSh(t, s, `P=/opt/user/p && mkdir -p $P && echo s > $P/private && echo s > $P/group && chmod 000 $P/private && chmod 070 $P/group`)
	ev.take()
	// Refusals: the same error and message, with no exec on the local route.
	for _, tc := range []struct{ src, code string }{{"out", "path_escape"}, {"out/passwd", "path_escape"}, {"d/etc/passwd", "path_escape"}, {"chain/passwd", "path_escape"},
		{"/opt/workspace/../../etc/passwd", "path_escape"},
		// Relative links far up: on the local route, out of the volume is
		// the host's own filesystem.
		{"hostetc/hostname", "path_escape"}, {"hostname", "path_escape"}, {"hostetc/", "path_escape"}, {"nope", "file_not_found"}, {"big/", "not_directory"},
		// A link as the copied path: not written into a folder of the host.
		{"d/rel", "path_escape"},
		// What the sandbox's user cannot read itself: root, who reads the
		// volume on the local route, refuses it too.
		{"/opt/user/p/private", "permission_denied"}, {"/opt/user/p/group", "permission_denied"}, {"/opt/user/p", "permission_denied"}} {
		dst := filepath.Join(host, "refused")
		ra := sb(t, "cp", "--format", "json", s+":"+tc.src, dst)
		cpWantErr(t, ra, tc.code)
		cpMissing(t, dst)
		ga := ev.take()
		rb := cpStream(t, "cp", "--format", "json", s+":"+tc.src, dst)
		cpWantErr(t, rb, tc.code)
		if tc.code != "path_escape" || tc.src[0] != '/' {
			wantExecs("cp "+tc.src, ga, local)
		}
		ev.take()
		if hostName != "" && (strings.Contains(ra.Stdout+ra.Stderr, hostName) || strings.Contains(rb.Stdout+rb.Stderr, hostName)) {
			t.Errorf("cp %s answered with the host's hostname", tc.src)
		}
		if decodeErr(t, ra).Error.Message != decodeErr(t, rb).Error.Message {
			t.Errorf("cp %s: the local route says %q, the stream %q", tc.src, decodeErr(t, ra).Error.Message, decodeErr(t, rb).Error.Message)
		}
	}
}
