package plugin_test

// End-to-end checks of bad input: every refusal exits 125 with a message that
// says what is wrong, a stable JSON error code, and leaves nothing behind.

import (
	"context"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/volume"
)

// runObjects counts the plugin's containers and volumes that this test run
// can have made: those labelled with DOCKER_SANDBOX_TEST_RUN when it is set
// (other people's runs on the same engine do not disturb the count), else
// all of the plugin's objects (objects(t, "")).
func runObjects(t *testing.T) (containers, volumes int) {
	t.Helper()
	id := os.Getenv("DOCKER_SANDBOX_TEST_RUN")
	if id == "" {
		return objects(t, "")
	}
	ctx := context.Background()
	f := filters.NewArgs(filters.Arg("label", "com.docker.sandbox.managed=true"), filters.Arg("label", "com.docker.sandbox.test-run="+id))
	cs, err := engine(t).ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := engine(t).VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range vs.Volumes {
		// The helper volume is the plugin's shared cache (like its images),
		// made by the first call that needs it, kept for all sandboxes.
		if v.Labels["com.docker.sandbox.kind"] != "helper" {
			n++
		}
	}
	return len(cs), n
}

// scopeObjects counts every container and volume labelled with the scope,
// whatever else they carry (even without the managed label).
func scopeObjects(t *testing.T, scope string) (containers, volumes int) {
	t.Helper()
	ctx := context.Background()
	f := filters.NewArgs(filters.Arg("label", "com.docker.sandbox.scope="+scope))
	cs, err := engine(t).ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := engine(t).VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return len(cs), len(vs.Volumes)
}

// stoppedContainers returns the IDs of exited or never-started containers
// on the engine, except those another test run labelled as its own.
func stoppedContainers(t *testing.T) map[string]bool {
	t.Helper()
	mine := os.Getenv("DOCKER_SANDBOX_TEST_RUN")
	out := map[string]bool{}
	for _, st := range []string{"exited", "created", "dead"} {
		cs, err := engine(t).ContainerList(context.Background(), container.ListOptions{All: true,
			Filters: filters.NewArgs(filters.Arg("status", st))})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if run, ok := c.Labels["com.docker.sandbox.test-run"]; ok && run != mine {
				continue
			}
			out[c.ID] = true
		}
	}
	return out
}

// badCase is one refused invocation of exec.
type badCase struct {
	name string
	// args are exec's arguments after the format flag; {scope} is replaced
	// by a fresh scope.
	args []string
	env  []string
	// scope is the scope the call names (checked to have no objects); ""
	// means the fresh one.
	scope string
	codes []string // acceptable JSON error codes
	words []string // all must appear in the message
	exit  int      // 0 means 125
	after func(t *testing.T)
}

func TestBadInput(t *testing.T) {
	needE2E(t)
	info, err := engine(t).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var runtimes []string
	for r := range info.Runtimes {
		runtimes = append(runtimes, r)
	}
	sort.Strings(runtimes)

	const missingBase = "docker-sandbox-nonexistent-base:1"
	nameRule := []string{"1 to 64"}
	cases := []badCase{
		{name: "scope dotdot", args: []string{"-s", "../x", "-c", "true"}, scope: "../x",
			codes: []string{"bad_name"}, words: append([]string{"scope", "../x"}, nameRule...)},
		{name: "scope space", args: []string{"-s", "a b", "-c", "true"}, scope: "a b",
			codes: []string{"bad_name"}, words: append([]string{"scope", `"a b"`}, nameRule...)},
		{name: "scope 65 chars", args: []string{"-s", strings.Repeat("a", 65), "-c", "true"}, scope: strings.Repeat("a", 65),
			codes: []string{"bad_name"}, words: append([]string{"scope"}, nameRule...)},
		{name: "scope empty", args: []string{"--scope", "", "-c", "true"}, scope: "",
			codes: []string{"bad_name"}, words: append([]string{"scope"}, nameRule...)},
		{name: "session dotdot", args: []string{"-s", "{scope}", "--session", "../x", "-c", "true"},
			codes: []string{"bad_name"}, words: append([]string{"session", "../x"}, nameRule...)},
		{name: "lang cobol", args: []string{"-s", "{scope}", "--lang", "cobol", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"cobol", "python", "node", "bash", "sh"}},
		{name: "file missing", args: []string{"-s", "{scope}", "/nonexistent/x.py"},
			codes: []string{"file_not_found"}, words: []string{"/nonexistent/x.py"}},
		{name: "engine unreachable", args: []string{"-s", "{scope}", "-c", "true"}, env: []string{"DOCKER_HOST=unix:///nonexistent.sock"},
			codes: []string{"engine_unreachable"}, words: []string{"Docker Engine"}},
		{name: "image missing", args: []string{"-s", "{scope}", "--image", "docker-sandbox-nonexistent:1", "-c", "true"},
			codes: []string{"image_missing"}, words: []string{"docker-sandbox-nonexistent:1"}},
		{name: "runtime base missing", args: []string{"-s", "{scope}", "-c", "true"}, env: []string{"DOCKER_SANDBOX_RUNTIME_BASE=" + missingBase},
			codes: []string{"image_build_failed"}, words: []string{missingBase},
			after: func(t *testing.T) {
				imgs, err := engine(t).ImageList(context.Background(), image.ListOptions{All: true,
					Filters: filters.NewArgs(filters.Arg("label", "com.docker.sandbox.base="+missingBase))})
				if err != nil {
					t.Fatal(err)
				}
				for _, im := range imgs {
					t.Errorf("the failed build left image %s %v", im.ID, im.RepoTags)
				}
			}},
		{name: "timeout negative", args: []string{"-s", "{scope}", "--timeout", "-5s", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"--timeout", "-5s"}},
		{name: "timeout zero", args: []string{"-s", "{scope}", "--timeout", "0", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"--timeout"}},
		{name: "timeout over max", args: []string{"-s", "{scope}", "--timeout", "1000h", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"--timeout", "1000h", "max_timeout"}},
		{name: "memory negative", args: []string{"-s", "{scope}", "--memory", "-1", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"--memory", "-1"}},
		{name: "memory huge", args: []string{"-s", "{scope}", "--memory", "100t", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"--memory", "100t"}},
		{name: "memory below minimum", args: []string{"-s", "{scope}", "--memory", "1k", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"--memory", "1k", "at least"}},
		{name: "cpus zero", args: []string{"-s", "{scope}", "--cpus", "0", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"--cpus"}},
		{name: "pids zero", args: []string{"-s", "{scope}", "--pids", "0", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"--pids"}},
		{name: "runtime missing", args: []string{"-s", "{scope}", "--runtime", "nonexistent-runtime", "-c", "true"},
			codes: []string{"runtime_unavailable"}, words: append([]string{"nonexistent-runtime"}, runtimes...)},
		{name: "network host", args: []string{"-s", "{scope}", "--network", "host", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"--network", "host"}},
		{name: "unknown flag", args: []string{"-s", "{scope}", "--bogus", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"unknown flag", "--bogus"}},
		{name: "timeout 2h over max_timeout 1h", args: []string{"-s", "{scope}", "--timeout", "2h", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"--timeout", "2h", "max_timeout"}},
		{name: "disk negative", args: []string{"-s", "{scope}", "--disk", "-1", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"--disk", "-1"}},
		{name: "max-lifetime negative", args: []string{"-s", "{scope}", "--max-lifetime", "-1s", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"--max-lifetime", "-1s"}},
		{name: "tmp-size not a size", args: []string{"-s", "{scope}", "--tmp-size", "lots", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"--tmp-size", "lots"}},
		{name: "tmp-size below minimum", args: []string{"-s", "{scope}", "--tmp-size", "512k", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"--tmp-size", "512k", "at least"}},
		{name: "tmp-size over maximum", args: []string{"-s", "{scope}", "--tmp-size", "17g", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"--tmp-size", "17g", "at most"}},
		{name: "nofile below minimum", args: []string{"-s", "{scope}", "--nofile", "10", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"--nofile", "10", "at least"}},
		{name: "nofile not an integer", args: []string{"-s", "{scope}", "--nofile", "many", "-c", "true"},
			codes: []string{"bad_flag"}, words: []string{"--nofile", "many"}},
		{name: "interpreter missing on a first call", args: []string{"-s", "{scope}", "--image", busybox, "--lang", "python", "-c", "print(1)"},
			exit: 127, codes: []string{"interpreter_not_found"}, words: []string{"python3"}},
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, mode := range []string{"plain", "json"} {
				t.Run(mode, func(t *testing.T) {
					scope := c.scope
					if scope == "" && c.name != "scope empty" {
						scope = newScope(t)
					}
					args := []string{"exec"}
					if mode == "json" {
						args = append(args, "--format", "json")
					}
					for _, a := range c.args {
						args = append(args, strings.ReplaceAll(a, "{scope}", scope))
					}
					c0, v0 := runObjects(t)
					stopped0 := stoppedContainers(t)

					r := sbRun(t, run{args: args, env: c.env})

					exit := c.exit
					if exit == 0 {
						exit = 125
					}
					wantCode(t, r, exit)
					for _, w := range c.words {
						if !strings.Contains(r.Stderr, w) {
							t.Errorf("stderr does not contain %q:\n%s", w, r)
						}
					}
					if mode == "json" {
						j := decodeErr(t, r)
						if !contains(c.codes, j.Error.Code) {
							t.Errorf("JSON error code %q, want one of %q", j.Error.Code, c.codes)
						}
						for _, w := range c.words {
							if !strings.Contains(j.Error.Message, w) {
								t.Errorf("JSON message %q does not contain %q", j.Error.Message, w)
							}
						}
					} else if r.Stdout != "" {
						t.Errorf("plain mode printed on stdout: %q", r.Stdout)
					}

					if c1, v1 := runObjects(t); c1 != c0 || v1 != v0 {
						t.Errorf("the refused call changed the plugin's objects: containers %d -> %d, volumes %d -> %d", c0, c1, v0, v1)
					}
					if n, m := scopeObjects(t, scope); n != 0 || m != 0 {
						t.Errorf("scope %q has %d containers and %d volumes after a refused call", scope, n, m)
					}
					for id := range stoppedContainers(t) {
						if !stopped0[id] {
							t.Errorf("the refused call left a stopped container %.12s", id)
						}
					}
					if c.after != nil {
						c.after(t)
					}
				})
			}
		})
	}
}

func TestInterpreterMissing(t *testing.T) {
	needE2E(t)
	needBusybox(t)
	s := newScope(t)
	// A program's own exit 127 (a command it runs is missing) is its result:
	// the sandbox a first call created stays.
	r0 := sb(t, "exec", "-s", s, "--image", busybox, "-c", "no-such-command-here")
	wantCode(t, r0, 127)
	if c, _ := scopeObjects(t, s); c != 1 {
		t.Fatalf("a program's own exit 127 removed the sandbox (%d containers):\n%s", c, r0)
	}
	// The helper's interpreter_not_found on a sandbox that existed before
	// leaves it as it was.
	r := sb(t, "exec", "-s", s, "--image", busybox, "--lang", "node", "-c", "x")
	wantCode(t, r, 127)
	if !strings.Contains(r.Stderr, "node") {
		t.Errorf("stderr does not name node:\n%s", r)
	}
	if r.Stdout != "" {
		t.Errorf("stdout: %q", r.Stdout)
	}
	r = sb(t, "exec", "--format", "json", "-s", s, "--image", busybox, "--lang", "node", "-c", "x")
	wantCode(t, r, 127)
	if j := decodeErr(t, r); j.Error.Code != "interpreter_not_found" || !strings.Contains(j.Error.Message, "node") {
		t.Errorf("JSON error %+v: want interpreter_not_found naming node", j.Error)
	}
	if c, v := scopeObjects(t, s); c != 1 || v != 1 {
		t.Errorf("the sandbox that existed before: %d containers, %d volumes, want 1 and 1", c, v)
	}
}
