package plugin_test

// End-to-end checks of the scope model (DESIGN.md, "Model"): sessions are
// isolated from each other, data outlives containers, first calls race
// safely, and --rm leaves nothing.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/google/go-cmp/cmp"
)

// sbConcurrent runs `docker sandbox ARGS` from any goroutine: unlike sbRun
// it never calls t.Fatal, it returns the failure to run instead.
func sbConcurrent(dir string, timeout time.Duration, args ...string) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := osexec.CommandContext(ctx, "docker", append([]string{"sandbox"}, args...)...)
	cmd.Env = os.Environ()
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := result{Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(start)}
	var ee *osexec.ExitError
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("%v did not finish within %s:\n%s", args, timeout, res)
	case errors.As(err, &ee):
		res.Code = ee.ExitCode()
	case err != nil:
		return res, fmt.Errorf("running %v: %v", args, err)
	}
	return res, nil
}

// sbTogether starts all calls at the same moment (behind a barrier) and
// returns their results in order.
func sbTogether(t *testing.T, calls [][]string) []result {
	t.Helper()
	dir := t.TempDir()
	results := make([]result, len(calls))
	errs := make([]error, len(calls))
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for i, args := range calls {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			results[i], errs[i] = sbConcurrent(dir, 3*time.Minute, args...)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	return results
}

// sandboxContainers lists the sandbox containers of a scope (all sessions).
func sandboxContainers(t *testing.T, scope string) []container.Summary {
	t.Helper()
	cs, err := engine(t).ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", "com.docker.sandbox.managed=true"),
		filters.Arg("label", "com.docker.sandbox.scope="+scope),
		filters.Arg("label", "com.docker.sandbox.kind=sandbox"))})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// scopeVolumes returns the names of a scope's volumes.
func scopeVolumes(t *testing.T, scope string) map[string]bool {
	t.Helper()
	vs, err := engine(t).VolumeList(context.Background(), volume.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", "com.docker.sandbox.scope="+scope))})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, v := range vs.Volumes {
		out[v.Name] = true
	}
	return out
}

func TestScopesSessionIsolation(t *testing.T) {
	needE2E(t)
	s, other := newScope(t), newScope(t)
	in := func(t *testing.T, scope, session, code string) result {
		t.Helper()
		args := []string{"exec", "-s", scope, "--lang", "sh", "-c", code}
		if session != "" {
			args = append(args, "--session", session)
		}
		return sb(t, args...)
	}

	wantStdout(t, in(t, s, "A", "echo a > /opt/workspace/a.txt && echo u > /opt/user/u.txt && echo ok"), "ok\n")
	wantStdout(t, in(t, s, "B", "echo b > /opt/workspace/b.txt && echo ok"), "ok\n")

	t.Run("B does not see A's workspace", func(t *testing.T) {
		wantStdout(t, in(t, s, "B", "test ! -e /opt/workspace/a.txt && "+shLsA+" /opt/workspace"), "b.txt\n")
	})
	t.Run("A does not see B's workspace", func(t *testing.T) {
		wantStdout(t, in(t, s, "A", "test ! -e /opt/workspace/b.txt && "+shLsA+" /opt/workspace"), "a.txt\n")
	})
	t.Run("both see the scope's long-term volume", func(t *testing.T) {
		wantStdout(t, in(t, s, "A", "cat /opt/user/u.txt"), "u\n")
		wantStdout(t, in(t, s, "B", "cat /opt/user/u.txt"), "u\n")
	})
	t.Run("another scope sees neither", func(t *testing.T) {
		for _, sess := range []string{"", "A", "B"} {
			wantStdout(t, in(t, other, sess,
				"for f in /opt/workspace/a.txt /opt/workspace/b.txt /opt/user/u.txt /opt/workspace/u.txt; do test ! -e $f || echo \"sees $f\"; done; echo done"),
				"done\n")
		}
	})
	t.Run("without a session the workspace is the long-term volume", func(t *testing.T) {
		wantStdout(t, in(t, s, "", "cat /opt/workspace/u.txt"), "u\n")
		wantStdout(t, in(t, s, "", "echo n > /opt/workspace/n.txt && echo m > /opt/user/m.txt && echo ok"), "ok\n")
		wantStdout(t, in(t, s, "", "cat /opt/user/n.txt /opt/workspace/m.txt"), "n\nm\n")
		wantStdout(t, in(t, s, "", "test ! -e /opt/workspace/a.txt && test ! -e /opt/workspace/b.txt && echo isolated"), "isolated\n")
		// The sessions see what the scope's own sandbox wrote to /opt/user,
		// and nothing of it lands in their workspaces.
		wantStdout(t, in(t, s, "A", "cat /opt/user/n.txt && test ! -e /opt/workspace/n.txt && echo ok"), "n\nok\n")
	})
	t.Run("objects", func(t *testing.T) {
		if n := len(sandboxContainers(t, s)); n != 3 {
			t.Errorf("scope %s has %d sandbox containers, want 3 (A, B, none)", s, n)
		}
		want := map[string]bool{
			"docker-sandbox-" + s + ".user": true,
			"docker-sandbox-" + s + ".A.ws": true,
			"docker-sandbox-" + s + ".B.ws": true,
		}
		if d := cmp.Diff(want, scopeVolumes(t, s)); d != "" {
			t.Errorf("volumes of scope %s (-want +got):\n%s", s, d)
		}
		// The session containers mount their own workspace.
		for _, sess := range []string{"A", "B"} {
			c := inspectSandbox(t, s, sess)
			found := false
			for _, m := range c.Mounts {
				if m.Destination == "/opt/workspace" {
					found = true
					if m.Name != "docker-sandbox-"+s+"."+sess+".ws" {
						t.Errorf("session %s mounts %s at /opt/workspace", sess, m.Name)
					}
				}
			}
			if !found {
				t.Errorf("session %s has no /opt/workspace mount", sess)
			}
		}
	})
}

// removeContainer force-removes a container through the Go client and waits
// until the engine has forgotten it.
func removeContainer(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	if err := engine(t).ContainerRemove(ctx, name, container.RemoveOptions{Force: true}); err != nil {
		t.Fatalf("remove %s: %v", name, err)
	}
	poll(t, 20*time.Second, func() error {
		if _, err := engine(t).ContainerInspect(ctx, name); err == nil {
			return fmt.Errorf("container %s still exists", name)
		}
		return nil
	})
}

func TestScopesDataSurvivesRecreate(t *testing.T) {
	needE2E(t)
	for _, sess := range []string{"", "job1"} {
		t.Run("session="+sess, func(t *testing.T) {
			s := newScope(t)
			base := []string{"exec", "-s", s, "--lang", "sh"}
			name := "docker-sandbox-" + s
			if sess != "" {
				base = append(base, "--session", sess)
				name += "." + sess
			}
			call := func(args ...string) []string { return append(append([]string{}, base...), args...) }

			r := sb(t, call("--format", "json", "-c", "echo keep > /opt/workspace/keep.txt && echo long > /opt/user/long.txt && echo ok")...)
			wantCode(t, r, 0)
			if j := decodeExec(t, r); !j.Created || j.Stdout != "ok\n" {
				t.Fatalf("first call: %+v, want created=true and ok", j)
			}
			first := inspectSandbox(t, s, sess).ID

			removeContainer(t, name)

			r = sb(t, call("--format", "json", "-c", "cat /opt/workspace/keep.txt /opt/user/long.txt")...)
			wantCode(t, r, 0)
			j := decodeExec(t, r)
			if j.Stdout != "keep\nlong\n" {
				t.Errorf("after the container was removed, the data is gone: stdout %q", j.Stdout)
			}
			if !j.Created {
				t.Errorf("the call that recreated the container reports created=false: %+v", j)
			}
			second := inspectSandbox(t, s, sess).ID
			if second == first {
				t.Errorf("the container was not recreated (same ID %.12s)", first)
			}
			if j.Container == "" || !strings.HasPrefix(second, j.Container) {
				t.Errorf("JSON container %q is not the new container %.12s", j.Container, second)
			}

			r = sb(t, call("--format", "json", "-c", "echo again")...)
			wantCode(t, r, 0)
			if j := decodeExec(t, r); j.Created {
				t.Errorf("a call into the existing container reports created=true: %+v", j)
			}
		})
	}
}

func TestScopesConcurrentFirstCalls(t *testing.T) {
	needE2E(t)
	for round := 0; round < 3; round++ {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			s := newScope(t)
			rs := sbTogether(t, [][]string{
				{"exec", "--format", "json", "-s", s, "--lang", "sh", "-c", "echo first-0"},
				{"exec", "--format", "json", "-s", s, "--lang", "sh", "-c", "echo first-1"},
			})
			created := 0
			for i, r := range rs {
				if r.Code != 0 {
					t.Errorf("call %d: want exit 0, got:\n%s", i, r)
					continue
				}
				j := decodeExec(t, r)
				if want := fmt.Sprintf("first-%d\n", i); j.Stdout != want {
					t.Errorf("call %d: stdout %q, want %q", i, j.Stdout, want)
				}
				if j.Created {
					created++
				}
			}
			if created != 1 {
				t.Errorf("%d calls report created=true, want exactly 1", created)
			}
			if cs := sandboxContainers(t, s); len(cs) != 1 {
				t.Errorf("scope %s has %d containers after two first calls, want 1", s, len(cs))
			}
			if c, v := objects(t, s); c != 1 || v != 1 {
				t.Errorf("scope %s has %d containers and %d volumes, want 1 and 1", s, c, v)
			}
			// Both results name the same container.
			if t.Failed() {
				return
			}
			if a, b := decodeExec(t, rs[0]).Container, decodeExec(t, rs[1]).Container; a != b || a == "" {
				t.Errorf("the calls ran in different containers: %q and %q", a, b)
			}
		})
	}
}

func TestScopesConcurrentExecs(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	wantStdout(t, sb(t, "exec", "-s", s, "-c", "echo warm"), "warm\n")
	var calls [][]string
	for i := 0; i < 8; i++ {
		calls = append(calls, []string{"exec", "-s", s, "--lang", "sh", "-c", fmt.Sprintf("sleep 0.2; echo value-%d", i)})
	}
	for i, r := range sbTogether(t, calls) {
		if want := fmt.Sprintf("value-%d\n", i); r.Code != 0 || r.Stdout != want {
			t.Errorf("call %d: want exit 0 and %q, got:\n%s", i, want, r)
		}
	}
	if cs := sandboxContainers(t, s); len(cs) != 1 {
		t.Errorf("scope %s has %d containers, want 1", s, len(cs))
	}
}

func TestScopesRm(t *testing.T) {
	needE2E(t)
	t.Run("new scope", func(t *testing.T) {
		s := newScope(t)
		wantStdout(t, sb(t, "exec", "--rm", "-s", s, "-c", "echo data > /opt/workspace/f && echo done"), "done\n")
		if c, v := objects(t, s); c != 0 || v != 0 {
			t.Errorf("exec --rm left %d containers and %d volumes of scope %s", c, v, s)
		}
		if c, v := scopeObjects(t, s); c != 0 || v != 0 {
			t.Errorf("exec --rm left %d containers and %d volumes labelled with scope %s", c, v, s)
		}
	})
	t.Run("new scope with session", func(t *testing.T) {
		s := newScope(t)
		wantStdout(t, sb(t, "exec", "--rm", "-s", s, "--session", "once", "-c", "echo data > /opt/workspace/f && echo done"), "done\n")
		if c, v := objects(t, s); c != 0 || v != 0 {
			t.Errorf("exec --rm --session left %d containers and %d volumes of scope %s", c, v, s)
		}
	})
	t.Run("json", func(t *testing.T) {
		s := newScope(t)
		r := sb(t, "exec", "--rm", "--format", "json", "-s", s, "-c", "echo done")
		wantCode(t, r, 0)
		if j := decodeExec(t, r); j.Stdout != "done\n" {
			t.Errorf("stdout %q", j.Stdout)
		}
		if c, v := objects(t, s); c != 0 || v != 0 {
			t.Errorf("exec --rm --format json left %d containers and %d volumes of scope %s", c, v, s)
		}
	})
	t.Run("failing program", func(t *testing.T) {
		s := newScope(t)
		r := sb(t, "exec", "--rm", "-s", s, "-c", "echo out; exit 3")
		wantCode(t, r, 3)
		if c, v := objects(t, s); c != 0 || v != 0 {
			t.Errorf("exec --rm of a failing program left %d containers and %d volumes of scope %s", c, v, s)
		}
	})
	t.Run("session of an existing scope keeps the scope's data", func(t *testing.T) {
		s := newScope(t)
		wantStdout(t, sb(t, "exec", "-s", s, "-c", "echo long > /opt/user/long.txt && echo ok"), "ok\n")
		wantStdout(t, sb(t, "exec", "--rm", "-s", s, "--session", "once", "-c", "cat /opt/user/long.txt"), "long\n")
		vols := scopeVolumes(t, s)
		if vols["docker-sandbox-"+s+".once.ws"] {
			t.Errorf("exec --rm --session left the session's workspace volume")
		}
		if !vols["docker-sandbox-"+s+".user"] {
			t.Fatalf("exec --rm --session removed the scope's long-term volume")
		}
		for _, c := range sandboxContainers(t, s) {
			if c.Labels["com.docker.sandbox.session"] == "once" {
				t.Errorf("exec --rm --session left its container %s", c.Names)
			}
		}
		wantStdout(t, sb(t, "exec", "-s", s, "-c", "cat /opt/user/long.txt"), "long\n")
	})
	t.Run("an existing sandbox is not wiped by a one-shot call", func(t *testing.T) {
		s := newScope(t)
		wantStdout(t, sb(t, "exec", "-s", s, "-c", "echo mine > /opt/workspace/mine.txt && echo ok"), "ok\n")
		r := sb(t, "exec", "--rm", "-s", s, "-c", "cat /opt/workspace/mine.txt")
		wantStdout(t, r, "mine\n")
		if !strings.Contains(r.Stderr, "existed before") {
			t.Errorf("--rm on an existing sandbox should say it stays: %q", r.Stderr)
		}
		if c, v := objects(t, s); c != 1 || v != 1 {
			t.Fatalf("--rm on an existing sandbox removed it: %d containers, %d volumes left", c, v)
		}
		wantStdout(t, sb(t, "exec", "-s", s, "-c", "cat /opt/workspace/mine.txt"), "mine\n")
	})
}
