package plugin_test

// End-to-end tests against a rootless engine on cgroup v1 (issue 12, item
// 5): scripts/test.sh starts one (scripts/rootless-fixture.sh: Debian's
// dockerd-rootless.sh under rootlesskit, a throwaway user) and sets
// DOCKER_SANDBOX_TEST_ROOTLESS=unix://.../docker.sock. Its cgroups enforce
// no limit (docker info: MemoryLimit, SwapLimit, PidsLimit, CPUCfsQuota
// false): a sandbox there would run without the bounds every sandbox has,
// so the plugin refuses to create one, and leaves nothing on that engine.

import (
	"context"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
)

// needRootless returns the rootless engine's host. Outside scripts/test.sh
// the test skips; under CI a missing fixture fails it.
func needRootless(t *testing.T) string {
	t.Helper()
	return needFixture(t, "rootless test", "rootless engine", "TestRootless", "DOCKER_SANDBOX_TEST_ROOTLESS")[0]
}

// TestRootlessRefused: exec, shell and egress start against the rootless
// engine are refused with engine_unsupported (exit 125) naming the limits,
// and the engine is left with no container, volume or network of the
// plugin's; the engine itself says it enforces none of them.
func TestRootlessRefused(t *testing.T) {
	host := needRootless(t)
	cli, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	info, err := cli.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.MemoryLimit || info.PidsLimit || info.CgroupVersion != "1" {
		t.Fatalf("the fixture's engine enforces limits (memory %v, pids %v, cgroup %s): this test needs one that does not", info.MemoryLimit, info.PidsLimit, info.CgroupVersion)
	}
	env := []string{"DOCKER_HOST=" + host, "DOCKER_CONTEXT="}
	scope := newScope(t)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"exec", []string{"exec", "-s", scope, "--format", "json", "-c", "echo ran"}, "sandbox's memory (--memory), swap"},
		{"exec in a session, code on stdin", []string{"exec", "-s", scope, "--session", "s2", "--memory", "64m", "--format", "json", "-"}, "rootless"},
		{"egress start", []string{"egress", "start", "--format", "json"}, "egress sidecar's memory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := sbRun(t, run{env: env, args: c.args, stdin: strings.NewReader("echo ran")})
			wantCode(t, r, 125)
			if e := decodeErr(t, r); e.Error.Code != "engine_unsupported" || !strings.Contains(e.Error.Message, c.want) {
				t.Fatalf("%+v, want engine_unsupported naming %q", e, c.want)
			}
			if strings.Contains(r.Stdout+r.Stderr, "ran") && !strings.Contains(r.Stdout, "engine_unsupported") {
				t.Fatalf("the code ran:\n%s", r)
			}
		})
	}
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil || len(cs) != 0 {
		t.Fatalf("containers left on the rootless engine: %v %v", cs, err)
	}
	vs, err := cli.VolumeList(ctx, volume.ListOptions{})
	if err != nil || len(vs.Volumes) != 0 {
		t.Fatalf("volumes left on the rootless engine: %v %v", vs.Volumes, err)
	}
	// The rootful engine the rest of the suite uses is not touched: the
	// scope has nothing there either.
	if n, v := objects(t, scope); n != 0 || v != 0 {
		t.Fatalf("the refused calls made %d containers and %d volumes on the main engine", n, v)
	}
}
