package plugin_test

// End-to-end tests of the sandbox lifecycle: ls, inspect, stop, rm, prune,
// shell, the limit of live sandboxes, faults (containers killed or removed
// from outside, a killed plugin, rm racing exec) and a load test.
//
// Commands that act on every sandbox of the engine (ls, stop --all,
// rm --all, prune, the limit) run under a test-run label of their own
// (lcRunID), so that they see only what the test made, never what other
// suites sharing the engine are doing.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
)

const lcTestRunLabel = "com.docker.sandbox.test-run"

// lcRunID returns a test-run id of the test's own and removes everything
// carrying it when the test ends (containers, volumes but the shared helper
// volume, networks).
func lcRunID(t *testing.T) string {
	t.Helper()
	// Under the suite's run (RUN-lc-x), so that scripts/test.sh's cleanup
	// takes what the sweep leaves on purpose: the shared helper volume.
	id := "lc-" + randID(4)
	if outer := os.Getenv("DOCKER_SANDBOX_TEST_RUN"); outer != "" {
		id = outer + "-" + id
	}
	t.Cleanup(func() { lcSweep(t, id) })
	return id
}

func lcSweep(t *testing.T, id string) {
	ctx := context.Background()
	cli := engine(t)
	f := filters.NewArgs(filters.Arg("label", lcTestRunLabel+"="+id))
	cs, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	for _, c := range cs {
		_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	}
	for _, c := range cs {
		waitContainerGone(cli, c.ID)
	}
	vs, _ := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	for _, v := range vs.Volumes {
		if v.Labels["com.docker.sandbox.kind"] != "helper" {
			_ = cli.VolumeRemove(ctx, v.Name, true)
		}
	}
	ns, _ := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	for _, n := range ns {
		// Another suite's egress sidecar may have joined a scope network.
		if ni, err := cli.NetworkInspect(ctx, n.ID, network.InspectOptions{}); err == nil {
			for id := range ni.Containers {
				_ = cli.NetworkDisconnect(ctx, n.ID, id, true)
			}
		}
		_ = cli.NetworkRemove(ctx, n.ID)
	}
}

// lcEnv is the environment of a plugin call under a test run.
func lcEnv(runID string, extra ...string) []string {
	return append([]string{"DOCKER_SANDBOX_TEST_RUN=" + runID}, extra...)
}

// lcSb runs the plugin standalone (docker-sandbox ARGS) under a test run:
// the same binary as `docker sandbox`, without the docker CLI's dispatch,
// which would double the time of these tests on a loaded machine (the
// dispatch has tests of its own; lcCLI goes through it).
func lcSb(t *testing.T, runID string, args ...string) result {
	t.Helper()
	return sbRun(t, run{args: args, env: lcEnv(runID), standalone: true})
}

// lcCLI runs `docker sandbox ARGS` under a test run.
func lcCLI(t *testing.T, runID string, args ...string) result {
	t.Helper()
	return sbRun(t, run{args: args, env: lcEnv(runID)})
}

// lcFilter is the ls/--all/prune filter of a test run.
func lcFilter(runID string) string { return "label=" + lcTestRunLabel + "=" + runID }

// lcRow mirrors the documented `ls --format json` schema.
type lcRow struct {
	Scope     string     `json:"scope"`
	Session   string     `json:"session"`
	State     string     `json:"state"`
	Container string     `json:"container"`
	Image     string     `json:"image"`
	Network   string     `json:"network"`
	Runtime   string     `json:"runtime"`
	Created   time.Time  `json:"created"`
	LastUsed  *time.Time `json:"last_used"`
	IdleTTL   string     `json:"idle_ttl"`
	Channel   bool       `json:"channel"`
	Volumes   []string   `json:"volumes"`
	Size      *int64     `json:"size"`
}

// lcListJSON decodes ls --format json: one object per line.
func lcListJSON(t *testing.T, r result) []lcRow {
	t.Helper()
	wantCode(t, r, 0)
	var rows []lcRow
	for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		if l == "" {
			continue
		}
		var row lcRow
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&row); err != nil {
			t.Fatalf("ls --format json: bad line %q: %v", l, err)
		}
		rows = append(rows, row)
	}
	return rows
}

func lcFind(rows []lcRow, scope, session string) *lcRow {
	for i := range rows {
		if rows[i].Scope == scope && rows[i].Session == session {
			return &rows[i]
		}
	}
	return nil
}

// lcStartSlow starts an exec that prints "ready" and then sleeps (marker in
// its command line), and waits for "ready". The returned wait gives its
// result once it ended.
func lcStartSlow(t *testing.T, runID, scope, marker string) (wait func() result) {
	t.Helper()
	cmd := osexec.Command("docker", "sandbox", "exec", "-s", scope, "--timeout", "40s", "-c", "echo ready; exec sleep "+marker)
	cmd.Env = append(os.Environ(), lcEnv(runID)...)
	cmd.Dir = t.TempDir()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	br := bufio.NewReader(stdout)
	if line, err := br.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("slow program did not start: %q %v (%s)", line, err, stderr.String())
	}
	var (
		once sync.Once
		res  result
	)
	return func() result {
		once.Do(func() {
			rest, _ := io.ReadAll(br)
			err := cmd.Wait()
			res = result{Stdout: string(rest), Stderr: stderr.String()}
			var ee *osexec.ExitError
			if errors.As(err, &ee) {
				res.Code = ee.ExitCode()
			}
		})
		return res
	}
}

// lcContainerExists tells whether a container of that name exists.
func lcContainerExists(t *testing.T, name string) bool {
	t.Helper()
	_, err := engine(t).ContainerInspect(context.Background(), name)
	return err == nil
}

func lcVolumeExists(t *testing.T, name string) bool {
	t.Helper()
	_, err := engine(t).VolumeInspect(context.Background(), name)
	return err == nil
}

// TestLifecycleLsInspect: ls and inspect show each sandbox's state, image,
// network, times, TTL, volumes and sizes, in every output format.
func TestLifecycleLsInspect(t *testing.T) {
	needE2E(t)
	rid := lcRunID(t)
	s, gone := newScope(t), newScope(t)
	lcSetup(t, rid, [][]string{
		{"exec", "-s", s, "-c", "echo data > /opt/workspace/f; echo ok"},
		{"exec", "-s", s, "--session", "chat", "--idle-ttl", "0", "-c", "echo ok"},
		{"exec", "-s", gone, "-c", "head -c 300000 /dev/zero > /opt/workspace/big; echo ok"},
	})
	wantStdout(t, lcSb(t, rid, "stop", gone), gone+"\n")
	flt := lcFilter(rid)

	t.Run("json", func(t *testing.T) {
		rows := lcListJSON(t, lcCLI(t, rid, "ls", "--filter", flt, "--format", "json"))
		if len(rows) != 2 {
			t.Fatalf("ls without -a: want the 2 sandboxes with a container, got %+v", rows)
		}
		a, b := lcFind(rows, s, ""), lcFind(rows, s, "chat")
		if a == nil || b == nil {
			t.Fatalf("missing rows: %+v", rows)
		}
		for _, r := range []*lcRow{a, b} {
			if r.State != "idle" || len(r.Container) != 12 || !strings.HasPrefix(r.Image, "docker-sandbox-runtime:") ||
				r.Network != "none" || r.Runtime != "" || r.LastUsed == nil || r.Size != nil {
				t.Errorf("row %+v", r)
			}
			if d := time.Since(r.Created); d < -5*time.Second || d > 5*time.Minute {
				t.Errorf("created %v is not recent", r.Created)
			}
			if r.LastUsed.Before(r.Created.Add(-time.Second)) || time.Since(*r.LastUsed) > 5*time.Minute {
				t.Errorf("last used %v (created %v)", r.LastUsed, r.Created)
			}
		}
		if a.IdleTTL != "10m0s" || b.IdleTTL != "0s" {
			t.Errorf("idle ttl: %q and %q, want 10m0s and 0s", a.IdleTTL, b.IdleTTL)
		}
		if strings.Join(a.Volumes, ",") != "docker-sandbox-"+s+".user" || strings.Join(b.Volumes, ",") != "docker-sandbox-"+s+".chat.ws" {
			t.Errorf("volumes: %v and %v", a.Volumes, b.Volumes)
		}
	})
	t.Run("all shows expired-with-data", func(t *testing.T) {
		rows := lcListJSON(t, lcSb(t, rid, "ls", "-a", "--filter", flt, "--format", "json", "--size"))
		g := lcFind(rows, gone, "")
		if len(rows) != 3 || g == nil {
			t.Fatalf("ls -a: want 3 rows with %s, got %+v", gone, rows)
		}
		if g.State != "expired-with-data" || g.Container != "" || g.LastUsed != nil || g.IdleTTL != "" ||
			strings.Join(g.Volumes, ",") != "docker-sandbox-"+gone+".user" {
			t.Errorf("expired row %+v", g)
		}
		if g.Size == nil || *g.Size != 300000 {
			t.Errorf("--size: want the 300000 bytes of data, got %v", g.Size)
		}
		if a := lcFind(rows, s, ""); a == nil || a.Size == nil || *a.Size != int64(len("data\n")) {
			t.Errorf("--size of a running sandbox: %+v", a)
		}
		only := lcListJSON(t, lcSb(t, rid, "ls", "--filter", flt, "--filter", "state=expired-with-data", "--format", "json"))
		if len(only) != 1 || only[0].Scope != gone {
			t.Errorf("--filter state=expired-with-data: %+v", only)
		}
	})
	t.Run("quiet, filters, templates, table", func(t *testing.T) {
		wantStdout(t, lcSb(t, rid, "ls", "-q", "-a", "--filter", flt, "--filter", "scope="+s), s+"\n"+s+"/chat\n")
		wantStdout(t, lcSb(t, rid, "ls", "-q", "--filter", flt, "--filter", "session=chat"), s+"/chat\n")
		wantStdout(t, lcSb(t, rid, "ls", "-q", "--filter", flt, "--filter", "session=", "--filter", "scope="+s), s+"\n")
		wantStdout(t, lcSb(t, rid, "ls", "--filter", flt, "--format", "{{.scope}}|{{.session}}|{{.state}}"),
			s+"||idle\n"+s+"|chat|idle\n")
		r := lcSb(t, rid, "ls", "--filter", flt, "--format", "table {{.scope}}\t{{.state}}")
		wantCode(t, r, 0)
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		if len(lines) != 3 || strings.Fields(lines[0])[0] != "SCOPE" || strings.Fields(lines[0])[1] != "STATE" {
			t.Errorf("table template: %q", r.Stdout)
		}
		r = lcSb(t, rid, "ls", "-a", "--filter", flt)
		wantCode(t, r, 0)
		for _, h := range []string{"SCOPE", "SESSION", "STATE", "IMAGE", "NETWORK", "RUNTIME", "CREATED", "LAST USED", "IDLE TTL"} {
			if !strings.Contains(strings.SplitN(r.Stdout, "\n", 2)[0], h) {
				t.Errorf("table header lacks %s: %q", h, r.Stdout)
			}
		}
		if !strings.Contains(r.Stdout, "expired-with-data") || !strings.Contains(r.Stdout, "never") {
			t.Errorf("table: %q", r.Stdout)
		}
		for _, bad := range []string{"colour=red", "state=sleeping", "scope=../x", "nonsense"} {
			r := lcSb(t, rid, "ls", "--format", "json", "--filter", bad)
			wantCode(t, r, 125)
			if e := decodeErr(t, r); e.Error.Code != "bad_flag" {
				t.Errorf("--filter %s: code %q", bad, e.Error.Code)
			}
		}
		wantCode(t, lcSb(t, rid, "ls", "--filter", flt, "--format", "{{.scope"), 125)
	})
	t.Run("running, and inspect", func(t *testing.T) {
		wait := lcStartSlow(t, rid, s, "2121")
		rows := lcListJSON(t, lcSb(t, rid, "ls", "--filter", flt, "--format", "json"))
		if r := lcFind(rows, s, ""); r == nil || r.State != "running" || r.LastUsed == nil || time.Since(*r.LastUsed) > time.Minute {
			t.Fatalf("with an exec running: %+v", r)
		}
		r := lcCLI(t, rid, "inspect", s, s+"/chat", gone)
		wantCode(t, r, 0)
		var ds []lcDetails
		dec := json.NewDecoder(strings.NewReader(r.Stdout))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ds); err != nil || len(ds) != 3 {
			t.Fatalf("inspect: want a JSON array of 3: %v\n%s", err, r)
		}
		d := ds[0]
		if d.Scope != s || d.State != "running" || d.Name != "docker-sandbox-"+s || d.Limits == nil || d.StartedAt == nil {
			t.Fatalf("inspect %s: %+v", s, d)
		}
		if l := d.Limits; l.Memory != 1<<30 || l.MemorySwap != 1<<30 || l.CPUs != 1 || l.Pids != 256 || l.Nofile != 1024 ||
			l.TmpSize != 512<<20 || !l.ReadonlyRootfs || l.User != "65532:65532" || strings.Join(l.CapDrop, ",") != "ALL" ||
			strings.Join(l.SecurityOpt, ",") != "no-new-privileges" || l.Disk != 10<<30 || l.MaxLifetime != "" {
			t.Errorf("limits %+v", l)
		}
		// PID 1's own account, with the exec running: one registered run,
		// the disk limit, and the usage it measured while the run was live.
		if h := d.Helper; h == nil || h.Init == nil || h.Init.Runs != 1 || h.Init.DiskLimit != 10<<30 || h.Init.OverLimit || h.Init.Draining {
			t.Errorf("helper status: %+v", d.Helper)
		}
		mounts := map[string]lcMount{}
		for _, m := range d.Mounts {
			mounts[m.Destination] = m
		}
		if m := mounts["/opt/workspace"]; m.Name != "docker-sandbox-"+s+".user" || !m.RW {
			t.Errorf("mount /opt/workspace: %+v", m)
		}
		if m := mounts["/opt/sandbox"]; m.RW || !strings.HasPrefix(m.Name, "docker-sandbox.helper.") {
			t.Errorf("mount /opt/sandbox: %+v", m)
		}
		if d.Labels["com.docker.sandbox.managed"] != "true" || d.Labels["com.docker.sandbox.scope"] != s {
			t.Errorf("labels %v", d.Labels)
		}
		if d.Egress.Mode != "none" || len(d.Egress.Networks) != 0 {
			t.Errorf("egress %+v", d.Egress)
		}
		if len(d.Execs) == 0 || !d.Execs[0].Running || d.Helper == nil || !d.Helper.Busy {
			t.Errorf("execs %+v helper %+v", d.Execs, d.Helper)
		} else if kinds := lcKinds(d.Helper); !strings.Contains(kinds, "run") {
			t.Errorf("helper processes %s, want a run wrapper", kinds)
		}
		if c := ds[1]; c.Session != "chat" || c.State != "idle" || c.Helper == nil || c.Helper.Busy || c.Helper.IdleSince == nil || c.IdleTTL != "0s" {
			t.Errorf("inspect %s/chat: %+v helper %+v", s, c, c.Helper)
		}
		if g := ds[2]; g.State != "expired-with-data" || g.Limits != nil || g.Container != "" || g.Helper != nil ||
			g.Data["docker-sandbox-"+gone+".user"].Labels["com.docker.sandbox.kind"] != "user" {
			t.Errorf("inspect %s: %+v", gone, g)
		}
		wantStdout(t, lcSb(t, rid, "inspect", "--format", "{{.state}} {{.limits.pids}}", s), "running 256\n")
		r = lcSb(t, rid, "inspect", s+"/nosuch")
		wantCode(t, r, 125)
		if strings.TrimSpace(r.Stdout) != "[]" || !strings.Contains(r.Stderr, "no sandbox "+s+"/nosuch") {
			t.Errorf("inspect of a missing sandbox: %s", r)
		}
		// Stop it, killing the program, so that the scope's cleanup is quick.
		wantCode(t, lcSb(t, rid, "stop", "--force", s), 0)
		if w := wait(); w.Code == 0 {
			t.Errorf("the exec killed by stop --force exited 0:\n%s", w)
		}
	})
}

// lcDetails mirrors the documented `inspect` schema.
type lcDetails struct {
	lcRow
	Name      string     `json:"name"`
	StartedAt *time.Time `json:"started_at"`
	Limits    *struct {
		Memory         int64    `json:"memory"`
		MemorySwap     int64    `json:"memory_swap"`
		CPUs           float64  `json:"cpus"`
		Pids           int64    `json:"pids"`
		Nofile         int64    `json:"nofile"`
		TmpSize        int64    `json:"tmp_size"`
		ReadonlyRootfs bool     `json:"readonly_rootfs"`
		User           string   `json:"user"`
		CapDrop        []string `json:"cap_drop"`
		SecurityOpt    []string `json:"security_opt"`
		Runtime        string   `json:"runtime"`
		Disk           int64    `json:"disk"`
		MaxLifetime    string   `json:"max_lifetime"`
	} `json:"limits"`
	Mounts []lcMount         `json:"mounts"`
	Labels map[string]string `json:"labels"`
	Egress struct {
		Mode     string   `json:"mode"`
		Networks []string `json:"networks"`
	} `json:"egress"`
	Execs []struct {
		ID      string `json:"id"`
		Running bool   `json:"running"`
		PID     int    `json:"pid"`
	} `json:"execs"`
	Helper *lcHelperStatus `json:"helper"`
	Data   map[string]struct {
		Created string            `json:"created"`
		Labels  map[string]string `json:"labels"`
	} `json:"data"`
}

type lcMount struct {
	Type        string `json:"type"`
	Name        string `json:"name"`
	Destination string `json:"destination"`
	RW          bool   `json:"rw"`
}

type lcHelperStatus struct {
	PID1Started *time.Time `json:"pid1_started"`
	Busy        bool       `json:"busy"`
	Processes   []struct {
		PID     int        `json:"pid"`
		Kind    string     `json:"kind"`
		Started *time.Time `json:"started"`
	} `json:"processes"`
	IdleSince *time.Time `json:"idle_since"`
	Init      *struct {
		Runs        int        `json:"runs"`
		Draining    bool       `json:"draining"`
		DiskLimit   int64      `json:"disk_limit"`
		DiskUsed    int64      `json:"disk_used"`
		DiskScanned *time.Time `json:"disk_scanned"`
		OverLimit   bool       `json:"over_limit"`
		Expires     *time.Time `json:"expires"`
		Killed      int        `json:"killed"`
	} `json:"init"`
}

func lcKinds(h *lcHelperStatus) string {
	var ks []string
	for _, p := range h.Processes {
		ks = append(ks, p.Kind)
	}
	return strings.Join(ks, ",")
}

// TestLifecycleExpiryInLs: a sandbox whose idle TTL ran out shows as
// expired-with-data, and the next call re-creates it with the same data.
func TestLifecycleExpiryInLs(t *testing.T) {
	needE2E(t)
	rid := lcRunID(t)
	s := newScope(t)
	wantStdout(t, lcSb(t, rid, "exec", "-s", s, "--idle-ttl", "2s", "-c", "echo kept > f; echo ok"), "ok\n")
	poll(t, 30*time.Second, func() error {
		rows := lcListJSON(t, lcSb(t, rid, "ls", "-a", "--filter", "scope="+s, "--format", "json"))
		if len(rows) != 1 || rows[0].State != "expired-with-data" {
			return fmt.Errorf("ls -a: %+v", rows)
		}
		return nil
	})
	if lcContainerExists(t, "docker-sandbox-"+s) {
		t.Fatalf("ls says expired but the container exists")
	}
	j := decodeExec(t, lcSb(t, rid, "exec", "-s", s, "--idle-ttl", "2s", "--format", "json", "-c", "cat f"))
	if !j.Created || j.Stdout != "kept\n" {
		t.Fatalf("after expiry: %+v", j)
	}
}

// TestLifecycleStopRm: stop keeps the data, rm removes it; several names,
// --all, not found, and scope_busy while an exec runs unless --force.
func TestLifecycleStopRm(t *testing.T) {
	needE2E(t)
	rid := lcRunID(t)
	s1, s2, s3 := newScope(t), newScope(t), newScope(t)
	var setup [][]string
	for _, s := range []string{s1, s2, s3} {
		setup = append(setup, []string{"exec", "-s", s, "-c", "echo data-" + s + " > f; echo ok"})
	}
	lcSetup(t, rid, append(setup, []string{"exec", "-s", s1, "--session", "a", "-c", "echo sess > f; echo ok"}))

	t.Run("stop several keeps data", func(t *testing.T) {
		wantStdout(t, lcCLI(t, rid, "stop", s1, s2), s1+"\n"+s2+"\n")
		for _, name := range []string{"docker-sandbox-" + s1, "docker-sandbox-" + s1 + ".a", "docker-sandbox-" + s2} {
			if lcContainerExists(t, name) {
				t.Errorf("container %s survived stop", name)
			}
		}
		for _, v := range []string{"docker-sandbox-" + s1 + ".user", "docker-sandbox-" + s1 + ".a.ws", "docker-sandbox-" + s2 + ".user"} {
			if !lcVolumeExists(t, v) {
				t.Errorf("stop removed volume %s", v)
			}
		}
		j := decodeExec(t, lcSb(t, rid, "exec", "-s", s2, "--format", "json", "-c", "cat f"))
		if !j.Created || j.Stdout != "data-"+s2+"\n" {
			t.Errorf("after stop: %+v", j)
		}
	})
	t.Run("not found", func(t *testing.T) {
		r := lcSb(t, rid, "stop", "--format", "json", s1)
		wantCode(t, r, 125)
		var res []lcTargetResult
		if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil || len(res) != 1 || res[0].Removed || res[0].Error == nil || res[0].Error.Code != "not_found" {
			t.Errorf("stop of a stopped sandbox: %v %s", err, r)
		}
		wantCode(t, lcSb(t, rid, "stop", "-f", s1), 0)
		wantCode(t, lcSb(t, rid, "rm", "-f", "nosuch-"+s1), 0)
		r = lcSb(t, rid, "rm", "nosuch-"+s1)
		wantCode(t, r, 125)
		if !strings.Contains(r.Stderr, "no sandbox nosuch-"+s1) {
			t.Errorf("rm of a missing sandbox: %s", r)
		}
	})
	t.Run("busy unless force", func(t *testing.T) {
		wait := lcStartSlow(t, rid, s3, "1919")
		for _, verb := range []string{"stop", "rm"} {
			r := lcCLI(t, rid, verb, "--format", "json", s3)
			wantCode(t, r, 125)
			var res []lcTargetResult
			if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil || len(res) != 1 || res[0].Error == nil || res[0].Error.Code != "scope_busy" {
				t.Fatalf("%s while an exec runs: %v %s", verb, err, r)
			}
			if !lcContainerExists(t, "docker-sandbox-"+s3) || !lcVolumeExists(t, "docker-sandbox-"+s3+".user") {
				t.Fatalf("%s refused as busy but removed something", verb)
			}
			if l := leftover(t, s3, "sleep 1919"); l == "" {
				t.Fatalf("%s refused as busy but the program is gone", verb)
			}
		}
		r := lcSb(t, rid, "rm", s3)
		if r.Code != 125 || !strings.Contains(r.Stderr, "--force") {
			t.Errorf("the busy message should say how to force: %s", r)
		}
		wantStdout(t, lcSb(t, rid, "stop", "--force", s3), s3+"\n")
		w := wait()
		if w.Code != 125 || !strings.Contains(w.Stderr, "removed") {
			t.Errorf("the exec whose sandbox was stopped with --force: want exit 125 saying so, got:\n%s", w)
		}
		if lcContainerExists(t, "docker-sandbox-"+s3) || !lcVolumeExists(t, "docker-sandbox-"+s3+".user") {
			t.Errorf("stop --force: the container must go and the data stay")
		}
	})
	t.Run("rm a session, then scopes", func(t *testing.T) {
		wantStdout(t, lcSb(t, rid, "rm", s1+"/a"), s1+"/a\n")
		if lcVolumeExists(t, "docker-sandbox-"+s1+".a.ws") || !lcVolumeExists(t, "docker-sandbox-"+s1+".user") {
			t.Errorf("rm SCOPE/SESSION must remove the session's workspace only")
		}
		r := lcSb(t, rid, "rm", "--format", "json", s1, s2)
		wantCode(t, r, 0)
		var res []lcTargetResult
		if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil || len(res) != 2 || !res[0].Removed || !res[1].Removed || res[0].Error != nil {
			t.Errorf("rm --format json: %v %s", err, r)
		}
		for _, s := range []string{s1, s2} {
			if c, v := objects(t, s); c != 0 || v != 0 {
				t.Errorf("rm %s left %d containers and %d volumes", s, c, v)
			}
		}
	})
	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{{"rm"}, {"stop"}, {"rm", "--all", s3}, {"stop", "--filter", "scope=" + s3, s3}, {"rm", "bad/na/me"}} {
			r := lcSb(t, rid, append(args, "--format", "json")...)
			wantCode(t, r, 125)
			if e := decodeErr(t, r); e.Error.Code != "bad_flag" && e.Error.Code != "bad_name" {
				t.Errorf("%v: code %q", args, e.Error.Code)
			}
		}
	})
	t.Run("rm --all with a filter", func(t *testing.T) {
		wantStdout(t, lcSb(t, rid, "exec", "-s", s3, "--session", "b", "-c", "echo ok"), "ok\n")
		r := lcSb(t, rid, "rm", "--all", "--filter", lcFilter(rid))
		wantCode(t, r, 0)
		if got := strings.Fields(r.Stdout); len(got) != 2 || got[0] != s3+"/b" || got[1] != s3 {
			t.Errorf("rm --all printed %q, want the session, then the scope", r.Stdout)
		}
		if c, v := objects(t, s3); c != 0 || v != 0 {
			t.Errorf("rm --all left %d containers and %d volumes", c, v)
		}
		wantStdout(t, lcSb(t, rid, "ls", "-a", "-q", "--filter", lcFilter(rid)), "")
	})
}

type lcTargetResult struct {
	Target  string `json:"target"`
	Removed bool   `json:"removed"`
	Error   *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// lcPruneReport mirrors the documented `prune --format json` schema.
type lcPruneReport struct {
	DryRun  bool          `json:"dry_run"`
	Objects []lcPruneItem `json:"objects"`
	Kept    []lcPruneItem `json:"kept"`
}

type lcPruneItem struct {
	Type     string     `json:"type"`
	Name     string     `json:"name"`
	ID       string     `json:"id"`
	Kind     string     `json:"kind"`
	Scope    string     `json:"scope"`
	Session  string     `json:"session"`
	Reason   string     `json:"reason"`
	LastUsed *time.Time `json:"last_used"`
	Removed  bool       `json:"removed"`
	Error    string     `json:"error"`
}

func lcDecodePrune(t *testing.T, r result) lcPruneReport {
	t.Helper()
	wantCode(t, r, 0)
	var rep lcPruneReport
	dec := json.NewDecoder(strings.NewReader(r.Stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("prune --format json: %v\n%s", err, r)
	}
	return rep
}

func (r lcPruneReport) names() map[string]bool {
	out := map[string]bool{}
	for _, it := range r.Objects {
		out[it.Type+" "+it.Name] = true
	}
	return out
}

// TestLifecyclePrune: prune removes expired containers, orphans (made here
// as the plugin makes them) and old data, and nothing that is not the
// plugin's own: not a user's container, volume or network, not one with
// the plugin's labels alone (a seeder's, a sandbox's, a scope network's),
// nor a container the user started from the runtime image (which inherits
// the image's labels).
func TestLifecyclePrune(t *testing.T) {
	needE2E(t)
	needBusybox(t)
	ctx := context.Background()
	cli := engine(t)
	rid := lcRunID(t)
	live, old, ghost := newScope(t), newScope(t), newScope(t)
	lcSetup(t, rid, [][]string{{"exec", "-s", live, "-c", "echo live > f; echo ok"}, {"exec", "-s", old, "-c", "echo old > f; echo ok"}})
	runtimeImage := inspectSandbox(t, live, "").Config.Image
	wantStdout(t, lcSb(t, rid, "stop", old), old+"\n")

	mine := map[string]string{lcTestRunLabel: rid}
	with := func(extra map[string]string) map[string]string {
		l := map[string]string{}
		for k, v := range mine {
			l[k] = v
		}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	mkContainer := func(name, image string, cmd []string, labels map[string]string, start bool) string {
		t.Helper()
		resp, err := cli.ContainerCreate(ctx, &container.Config{Image: image, Cmd: cmd, Labels: labels},
			&container.HostConfig{NetworkMode: "none"}, nil, nil, name)
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		if start {
			if err := cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
				t.Fatalf("start %s: %v", name, err)
			}
		}
		return resp.ID
	}
	// The user's own objects: not the plugin's (no managed label), even
	// when they carry look-alike labels.
	userCtr := mkContainer("lc-user-"+rid, busybox, []string{"sleep", "300"},
		with(map[string]string{"com.docker.sandbox.kind": "sandbox", "com.docker.sandbox.scope": ghost}), true)
	userExited := mkContainer("lc-user-exited-"+rid, busybox, []string{"true"},
		with(map[string]string{"com.docker.sandbox.kind": "sandbox", "com.docker.sandbox.managed": "yes"}), true)
	fromImage := mkContainer("lc-user-runtime-"+rid, runtimeImage, []string{"sleep", "300"}, with(nil), true)
	userVol := "lc-user-vol-" + rid
	if _, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: userVol,
		Labels: with(map[string]string{"com.docker.sandbox.kind": "user", "com.docker.sandbox.scope": ghost})}); err != nil {
		t.Fatal(err)
	}
	userNet, err := cli.NetworkCreate(ctx, "lc-user-net-"+rid, network.CreateOptions{Internal: true,
		Labels: with(map[string]string{"com.docker.sandbox.scope": ghost})})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := cli.ContainerInspect(ctx, fromImage); err != nil || c.Config.Labels["com.docker.sandbox.image-kind"] != "runtime" {
		t.Fatalf("a container of the runtime image should inherit its labels (the case this test guards): %v %v", err, c.Config)
	}
	// Look-alikes of the plugin's orphans: the labels alone.
	fakeNet, err := cli.NetworkCreate(ctx, "lc-user-fake-net-"+rid, network.CreateOptions{Internal: true,
		Labels: with(map[string]string{"com.docker.sandbox.managed": "true", "com.docker.sandbox.kind": "egress-network", "com.docker.sandbox.scope": ghost})})
	if err != nil {
		t.Fatal(err)
	}
	fakeSeeder := mkContainer("lc-user-fake-seeder-"+rid, busybox, []string{"true"},
		with(map[string]string{"com.docker.sandbox.managed": "true", "com.docker.sandbox.kind": "seeder"}), false)
	fakeExpired := mkContainer("lc-user-fake-expired-"+rid, busybox, []string{"true"},
		with(map[string]string{"com.docker.sandbox.managed": "true", "com.docker.sandbox.kind": "sandbox",
			"com.docker.sandbox.scope": ghost, "com.docker.sandbox.session": ""}), true)
	// The plugin's orphans, as interrupted calls leave them, made here as
	// the plugin makes them (names, labels, mounts).
	helperVol := ""
	for _, mp := range inspectSandbox(t, live, "").Mounts {
		if mp.Destination == "/opt/sandbox" {
			helperVol = mp.Name
		}
	}
	ghostVol := "docker-sandbox-" + ghost + ".user"
	if _, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: ghostVol, Labels: with(map[string]string{
		"com.docker.sandbox.managed": "true", "com.docker.sandbox.kind": "user", "com.docker.sandbox.scope": ghost})}); err != nil {
		t.Fatal(err)
	}
	orphanNetName := "docker-sandbox.net." + ghost
	orphanNet := lcMkNet(t, orphanNetName, with(map[string]string{"com.docker.sandbox.managed": "true",
		"com.docker.sandbox.kind": "egress-network", "com.docker.sandbox.scope": ghost}))
	seeder := lcMkContainer(t, "", busybox, []string{"/opt/sandbox/sandbox-helper"},
		with(map[string]string{"com.docker.sandbox.managed": "true", "com.docker.sandbox.kind": "seeder"}),
		[]mount.Mount{{Type: mount.TypeVolume, Source: ghostVol, Target: "/opt/user"}, {Type: mount.TypeVolume, Source: helperVol, Target: "/opt/sandbox"}}, false)
	seederName := ""
	if ci, err := cli.ContainerInspect(ctx, seeder); err == nil {
		seederName = strings.TrimPrefix(ci.Name, "/")
	}
	expired := lcMkContainer(t, "docker-sandbox-"+ghost, busybox, []string{"true"},
		with(map[string]string{"com.docker.sandbox.managed": "true", "com.docker.sandbox.kind": "sandbox",
			"com.docker.sandbox.scope": ghost, "com.docker.sandbox.session": ""}),
		lcSandboxMounts(ghostVol, ghostVol, helperVol), true)
	poll(t, 20*time.Second, func() error {
		for _, id := range []string{expired, userExited, fakeExpired} {
			if c, err := cli.ContainerInspect(ctx, id); err != nil || c.State.Running {
				return fmt.Errorf("%s still running", id)
			}
		}
		return nil
	})
	env := lcEnv(rid, "DOCKER_SANDBOX_PRUNE_GRACE=0s")
	prune := func(args ...string) result {
		return sbRun(t, run{args: append([]string{"prune", "--filter", lcFilter(rid)}, args...), env: env, standalone: true})
	}
	survivors := func(t *testing.T) {
		t.Helper()
		for _, id := range []string{userCtr, userExited, fromImage, fakeSeeder, fakeExpired} {
			if _, err := cli.ContainerInspect(ctx, id); err != nil {
				t.Errorf("prune removed a container that is not the plugin's: %s: %v", id, err)
			}
		}
		if _, err := cli.NetworkInspect(ctx, fakeNet.ID, network.InspectOptions{}); err != nil {
			t.Errorf("prune removed a network with the plugin's labels only: %v", err)
		}
		if c, err := cli.ContainerInspect(ctx, userCtr); err != nil || !c.State.Running {
			t.Errorf("prune stopped the user's container")
		}
		if !lcVolumeExists(t, userVol) {
			t.Errorf("prune removed the user's volume %s", userVol)
		}
		if _, err := cli.NetworkInspect(ctx, userNet.ID, network.InspectOptions{}); err != nil {
			t.Errorf("prune removed the user's network: %v", err)
		}
		if !lcContainerExists(t, "docker-sandbox-"+live) || !lcVolumeExists(t, "docker-sandbox-"+live+".user") {
			t.Errorf("prune touched the live sandbox %s", live)
		}
	}

	t.Run("prompt refused", func(t *testing.T) {
		r := sbRun(t, run{args: []string{"prune", "--filter", lcFilter(rid)}, env: env, stdin: strings.NewReader("n\n")})
		wantCode(t, r, 125)
		if !strings.Contains(r.Stderr, "Are you sure") || !lcContainerExists(t, seeder) {
			t.Errorf("prune without -f must ask, and do nothing on no: %s", r)
		}
	})
	t.Run("dry run", func(t *testing.T) {
		rep := lcDecodePrune(t, prune("--dry-run", "--format", "json"))
		n := rep.names()
		if !rep.DryRun || !n["network "+orphanNetName] || !n["container "+seederName] || !n["container docker-sandbox-"+ghost] {
			t.Errorf("dry run should list the orphans: %+v", rep.Objects)
		}
		for _, it := range rep.Objects {
			if it.Removed || it.Type == "volume" && it.Kind != "helper" {
				t.Errorf("dry run without --older-than: %+v", it)
			}
			if strings.HasPrefix(it.Name, "lc-user") {
				t.Errorf("prune picked a user's object: %+v", it)
			}
		}
		if !lcContainerExists(t, seeder) || !lcContainerExists(t, expired) {
			t.Errorf("--dry-run removed something")
		}
		rep = lcDecodePrune(t, prune("--dry-run", "--older-than", "1h", "--format", "json"))
		keptOld := false
		for _, k := range rep.Kept {
			if k.Name == "docker-sandbox-"+old+".user" && k.LastUsed != nil && time.Since(*k.LastUsed) < 10*time.Minute {
				keptOld = true
			}
		}
		if !keptOld || rep.names()["volume docker-sandbox-"+old+".user"] {
			t.Errorf("--older-than 1h must keep the data written a moment ago: %+v", rep)
		}
		survivors(t)
	})
	t.Run("prune", func(t *testing.T) {
		rep := lcDecodePrune(t, sbRun(t, run{args: []string{"prune", "--filter", lcFilter(rid), "-f", "--older-than", "0s", "--format", "json"}, env: env}))
		n := rep.names()
		for _, want := range []string{"network " + orphanNetName, "container " + seederName, "container docker-sandbox-" + ghost,
			"volume docker-sandbox-" + old + ".user", "volume " + ghostVol} {
			if !n[want] {
				t.Errorf("prune did not remove %s: %+v", want, rep.Objects)
			}
		}
		for _, it := range rep.Objects {
			if !it.Removed || it.Error != "" {
				t.Errorf("not removed: %+v", it)
			}
			if it.Scope == live || strings.HasPrefix(it.Name, "lc-user") {
				t.Errorf("prune picked %+v", it)
			}
		}
		for _, id := range []string{seeder, expired} {
			if lcContainerExists(t, id) {
				t.Errorf("container %s survived prune", id)
			}
		}
		if _, err := cli.NetworkInspect(ctx, orphanNet, network.InspectOptions{}); err == nil {
			t.Errorf("the orphaned network survived prune")
		}
		if lcVolumeExists(t, "docker-sandbox-"+old+".user") {
			t.Errorf("the old data survived prune --older-than 0s")
		}
		survivors(t)
		wantStdout(t, lcSb(t, rid, "exec", "-s", live, "-c", "cat f"), "live\n")
		// Nothing is left to prune, and the probe container is gone.
		rep = lcDecodePrune(t, prune("-f", "--older-than", "0s", "--format", "json"))
		if len(rep.Objects) != 0 {
			t.Errorf("a second prune found %+v", rep.Objects)
		}
		cs, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
			filters.Arg("label", lcTestRunLabel+"="+rid), filters.Arg("label", "com.docker.sandbox.kind=probe"))})
		if len(cs) != 0 {
			t.Errorf("prune left its probe container")
		}
	})
	t.Run("bad flags", func(t *testing.T) {
		for _, args := range [][]string{{"--older-than", "soon"}, {"--filter", "scope=x"}, {"extra"}} {
			r := prune(append([]string{"-f", "--format", "json"}, args...)...)
			wantCode(t, r, 125)
			if e := decodeErr(t, r); e.Error.Code != "bad_flag" {
				t.Errorf("%v: %q", args, e.Error.Code)
			}
		}
	})
}

// lcShell runs `docker sandbox shell ARGS` on a pseudo-terminal (util-linux
// script) of the given size, sending each input once the output so far
// contains its trigger. It returns the output and the exit code.
func lcShell(t *testing.T, runID string, rows, cols int, args string, steps [][2]string) (string, int) {
	t.Helper()
	return ptyShell(t, lcEnv(runID), "", rows, cols, args, steps)
}

// ptyShell runs `docker GLOBAL sandbox shell ARGS` with env added, as
// lcShell does.
func ptyShell(t *testing.T, env []string, global string, rows, cols int, args string, steps [][2]string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p := startPty(t, ctx, env, fmt.Sprintf("stty rows %d cols %d; exec docker %s sandbox shell %s", rows, cols, global, args))
	cmd, stdin, readDone, seen := p.cmd, p.stdin, p.readDone, p.seen
	for _, st := range steps {
		trigger, input := st[0], st[1]
		poll(t, 60*time.Second, func() error {
			if !strings.Contains(seen(), trigger) {
				return fmt.Errorf("no %q in the shell's output yet: %q", trigger, seen())
			}
			return nil
		})
		if _, err := io.WriteString(stdin, input); err != nil {
			t.Fatal(err)
		}
	}
	<-readDone
	err := cmd.Wait()
	code := 0
	var ee *osexec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("script: %v\n%s", err, seen())
	}
	if ctx.Err() != nil {
		t.Fatalf("the shell did not end:\n%s", seen())
	}
	return seen(), code
}

// ptyRun is a command running on a pseudo-terminal (script(1)): its
// input, and its output so far.
type ptyRun struct {
	cmd      *osexec.Cmd
	stdin    io.WriteCloser
	readDone chan struct{} // closed when the output ends
	mu       sync.Mutex
	out      bytes.Buffer
}

// seen is the output so far.
func (p *ptyRun) seen() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// startPty starts the shell command line inner on a pseudo-terminal, with
// env added, in a temporary folder; ctx ending kills it.
func startPty(t *testing.T, ctx context.Context, env []string, inner string) *ptyRun {
	t.Helper()
	p := &ptyRun{cmd: osexec.CommandContext(ctx, "script", "-qefc", inner, "/dev/null"), readDone: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Dir = t.TempDir()
	p.stdin, _ = p.cmd.StdinPipe()
	stdout, _ := p.cmd.StdoutPipe()
	p.cmd.Stderr = p.cmd.Stdout
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.readDone)
		buf := make([]byte, 4096)
		for {
			n, err := stdout.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return p
}

// TestLifecycleShell: an interactive shell on a TTY, as the sandbox user, in
// the same hardened container, with the terminal's size; exit and Ctrl-D end
// it with the shell's status.
func TestLifecycleShell(t *testing.T) {
	needE2E(t)
	rid := lcRunID(t)
	s := newScope(t)
	wantStdout(t, lcSb(t, rid, "exec", "-s", s, "-c", "echo hello > f; echo ok"), "ok\n")
	t.Run("exit status and size", func(t *testing.T) {
		out, code := lcShell(t, rid, 33, 111, s, [][2]string{
			{"", "echo READY$((20+1))\n"},
			{"READY21", "id -u; stty size; cat f; test -t 0 && echo TTY$((1+1)); echo $HOME; touch /x 2>/dev/null || echo RO$((2+2)); exit 3\n"},
		})
		if code != 3 {
			t.Errorf("shell exit status: want 3, got %d\n%s", code, out)
		}
		for _, want := range []string{"65532", "33 111", "hello", "TTY2", "/opt/user", "RO4"} {
			if !strings.Contains(out, want) {
				t.Errorf("shell output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("ctrl-d", func(t *testing.T) {
		out, code := lcShell(t, rid, 24, 80, s, [][2]string{{"", "echo READY$((30+1))\n"}, {"READY31", "\x04"}})
		if code != 0 {
			t.Errorf("Ctrl-D: want exit 0, got %d\n%s", code, out)
		}
	})
	t.Run("ctrl-c stops the program, not the shell", func(t *testing.T) {
		out, code := lcShell(t, rid, 24, 80, s, [][2]string{
			{"", "sh -c 'echo START$((3+4)); exec sleep 1313'\n"},
			{"START7", "\x03"},
			// ^C is echoed once the terminal has flushed its input.
			{"^C", "echo AFTER$((5+5)); exit 0\n"},
		})
		if code != 0 || !strings.Contains(out, "AFTER10") {
			t.Errorf("Ctrl-C: want the sleep interrupted and the shell alive, got %d\n%s", code, out)
		}
		if l := leftover(t, s, "sleep 1313"); l != "" {
			t.Errorf("Ctrl-C left %s", l)
		}
	})
	t.Run("a new sandbox, a command, not a tty", func(t *testing.T) {
		s2 := newScope(t)
		out, code := lcShell(t, rid, 24, 80, s2+"/dbg -- sh -c 'id -u; exit 7'", nil)
		if code != 7 || !strings.Contains(out, "65532") {
			t.Errorf("shell -- COMMAND in a new sandbox: %d\n%s", code, out)
		}
		checkHardening(t, s2, "dbg", 1<<30, 1e9, 256)
		r := lcSb(t, rid, "shell", s)
		wantCode(t, r, 125)
		if !strings.Contains(r.Stderr, "not a TTY") {
			t.Errorf("shell without a terminal: %s", r)
		}
	})
}

// TestLifecycleLimit: over max_sandboxes, exit 125 limit_reached naming the
// limit, and nothing created; existing sandboxes keep working.
func TestLifecycleLimit(t *testing.T) {
	needE2E(t)
	rid := lcRunID(t)
	a, b, c := newScope(t), newScope(t), newScope(t)
	env := lcEnv(rid, "DOCKER_SANDBOX_MAX_SANDBOXES=2")
	for _, s := range []string{a, b} {
		wantStdout(t, sbRun(t, run{args: []string{"exec", "-s", s, "-c", "echo ok"}, env: env, standalone: true}), "ok\n")
	}
	r := sbRun(t, run{args: []string{"exec", "-s", c, "--format", "json", "-c", "echo ok"}, env: env})
	wantCode(t, r, 125)
	if e := decodeErr(t, r); e.Error.Code != "limit_reached" || !strings.Contains(e.Error.Message, "max_sandboxes") ||
		!strings.Contains(e.Error.Message, "2") {
		t.Errorf("over the limit: %+v", e)
	}
	if n, v := objects(t, c); n != 0 || v != 0 {
		t.Errorf("over the limit, %d containers and %d volumes were created", n, v)
	}
	r = sbRun(t, run{args: []string{"exec", "-s", a, "--session", "x", "-c", "echo ok"}, env: env, standalone: true})
	wantCode(t, r, 125)
	wantStdout(t, sbRun(t, run{args: []string{"exec", "-s", a, "-c", "echo still"}, env: env, standalone: true}), "still\n")
	wantStdout(t, sbRun(t, run{args: []string{"stop", b}, env: env, standalone: true}), b+"\n")
	wantStdout(t, sbRun(t, run{args: []string{"exec", "-s", c, "-c", "echo ok"}, env: env, standalone: true}), "ok\n")
}

// TestLifecycleFaults: containers killed or removed from outside, between
// two execs and during one; the plugin killed mid-exec.
func TestLifecycleFaults(t *testing.T) {
	needE2E(t)
	rid := lcRunID(t)
	// The killed plugin first: its sandbox then expires while the rest runs.
	killedScope := newScope(t)
	cmd := osexec.Command("docker", "sandbox", "exec", "-s", killedScope, "--idle-ttl", "2s", "--timeout", "3s", "-c", "echo ready; exec sleep 1616")
	cmd.Env = append(os.Environ(), lcEnv(rid)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	if l, _ := bufio.NewReader(stdout).ReadString('\n'); l != "ready\n" {
		t.Fatalf("not started: %q", l)
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
	killed := time.Now()

	s := newScope(t)
	name := "docker-sandbox-" + s
	wantStdout(t, lcSb(t, rid, "exec", "-s", s, "-c", "echo kept > f; echo ok"), "ok\n")
	t.Run("removed between two execs", func(t *testing.T) {
		removeContainer(t, name)
		j := decodeExec(t, lcSb(t, rid, "exec", "-s", s, "--format", "json", "-c", "cat f"))
		if !j.Created || j.Stdout != "kept\n" {
			t.Errorf("after docker rm -f: %+v", j)
		}
	})
	for _, how := range []string{"rm -f", "kill"} {
		t.Run(how+" during an exec", func(t *testing.T) {
			wait := lcStartSlow(t, rid, s, "1717")
			start := time.Now()
			if how == "kill" {
				if err := engine(t).ContainerKill(context.Background(), name, "KILL"); err != nil {
					t.Fatal(err)
				}
			} else {
				removeContainer(t, name)
			}
			w := wait()
			if w.Code != 125 || !strings.Contains(w.Stderr, "killed or removed") {
				t.Errorf("the running exec: want exit 125 saying its container was killed or removed, got:\n%s", w)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("the running exec took %s to notice", d)
			}
			poll(t, 20*time.Second, func() error {
				if lcContainerExists(t, name) {
					return fmt.Errorf("container %s still there", name)
				}
				return nil
			})
			j := decodeExec(t, lcSb(t, rid, "exec", "-s", s, "--format", "json", "-c", "cat f"))
			if !j.Created || j.Stdout != "kept\n" {
				t.Errorf("the next call: %+v", j)
			}
		})
	}
	t.Run("plugin killed: the sandbox still expires", func(t *testing.T) {
		poll(t, 30*time.Second, func() error {
			if lcContainerExists(t, "docker-sandbox-"+killedScope) {
				return fmt.Errorf("the sandbox of the killed plugin still exists %s later", time.Since(killed).Round(time.Second))
			}
			return nil
		})
		if d := time.Since(killed); d < 4*time.Second {
			t.Errorf("the sandbox went %s after the kill: before the program's 3 s timeout and 2 s TTL", d)
		}
		if !lcVolumeExists(t, "docker-sandbox-"+killedScope+".user") {
			t.Errorf("expiry removed the data")
		}
	})
}

// lcConcurrent runs a plugin call (`docker sandbox ARGS`, or the standalone
// binary when ARGS start with --standalone) from any goroutine (no t.Fatal).
func lcConcurrent(dir string, env []string, args ...string) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := osexec.CommandContext(ctx, "docker", append([]string{"sandbox"}, args...)...)
	if len(args) > 0 && args[0] == "--standalone" {
		cmd = osexec.CommandContext(ctx, pluginBin, args[1:]...)
	}
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := result{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *osexec.ExitError
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("%v did not finish:\n%s", args, res)
	case errors.As(err, &ee):
		res.Code = ee.ExitCode()
	case err != nil:
		return res, err
	}
	return res, nil
}

// lcTogether runs plugin calls (standalone) at the same time and returns
// their results in order.
func lcTogether(t *testing.T, env []string, calls [][]string) []result {
	t.Helper()
	dir := t.TempDir()
	results := make([]result, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, args := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = lcConcurrent(dir, env, append([]string{"--standalone"}, args...)...)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	return results
}

// lcSetup runs setup calls (each printing "ok") at the same time.
func lcSetup(t *testing.T, runID string, calls [][]string) {
	t.Helper()
	for i, r := range lcTogether(t, lcEnv(runID), calls) {
		if r.Code != 0 || r.Stdout != "ok\n" {
			t.Fatalf("setup %v: %s", calls[i], r)
		}
	}
}

// TestLifecycleRace: rm and exec on one scope, starting together (even
// rounds) or the exec once the rm's drain runs in the container (odd
// rounds, on the engine's exec_start event), then a second rm while the
// exec's program is known to run (it waits for a line on its standard
// input, which the test sends only after that rm ended). The log says which
// interleaving each round hit.
// Every call's outcome is one of the allowed ones and consistent with what
// is left:
//   - the exec always succeeds, in the old sandbox or a new one;
//   - the second rm is refused with scope_busy (a program runs), and
//     removes nothing;
//   - the first rm removes the sandbox (before the exec found it, or after
//     it ended) or is refused with scope_busy; never not_found (the sandbox
//     existed and nothing else removes it);
//   - what is left is a whole sandbox with the exec's data, or nothing;
//     nothing only if the first rm succeeded; and the engine's view by name
//     agrees with the plugin's labels (no unlabelled volume, no stray
//     object).
func TestLifecycleRace(t *testing.T) {
	needE2E(t)
	rid := lcRunID(t)
	dir := t.TempDir()
	env := lcEnv(rid)
	outcomes := map[string]int{}
	cli := engine(t)
	for round := 0; round < 4; round++ {
		s := newScope(t)
		wantStdout(t, lcSb(t, rid, "exec", "-s", s, "-c", "echo ok"), "ok\n")
		before := inspectSandbox(t, s, "").ID
		// The exec: prints "started", waits for a line on stdin, writes.
		ex := osexec.Command(pluginBin, "exec", "-s", s, "--timeout", "90s", "-c", "echo started; read go; echo ran > f; echo ran")
		ex.Env = append(os.Environ(), env...)
		ex.Dir = dir
		exIn, _ := ex.StdinPipe()
		exOut, _ := ex.StdoutPipe()
		var exErr bytes.Buffer
		ex.Stderr = &exErr
		var (
			rmA    result
			rmAErr error
			wg     sync.WaitGroup
		)
		// Even rounds: rm and exec start together. Odd rounds: the exec
		// starts once the rm's drain runs in the container (an engine
		// event), so that it lands while the rm claims and removes.
		evCtx, evCancel := context.WithTimeout(context.Background(), time.Minute)
		var evs <-chan events.Message
		if round%2 == 1 {
			evs, _ = cli.Events(evCtx, events.ListOptions{Since: fmt.Sprint(time.Now().Add(-time.Second).Unix()), Filters: filters.NewArgs(
				filters.Arg("type", "container"), filters.Arg("event", "exec_start"), filters.Arg("container", "docker-sandbox-"+s))})
		}
		rmADone := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(rmADone)
			rmA, rmAErr = lcConcurrent(dir, env, "--standalone", "rm", "--format", "json", s)
		}()
		how := "together"
		if round%2 == 1 {
			how = "the rm ended before its drain was seen"
		wait:
			for {
				select {
				case msg := <-evs:
					if strings.Contains(string(msg.Action), "drain") {
						how = "during the rm's drain"
						break wait
					}
				case <-rmADone:
					break wait
				case <-evCtx.Done():
					break wait
				}
			}
		}
		evCancel()
		if err := ex.Start(); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(exOut)
		line, err := br.ReadString('\n')
		if err != nil || line != "started\n" {
			_ = ex.Process.Kill()
			_ = ex.Wait() // then its stderr is complete
			wg.Wait()
			t.Fatalf("round %d: the exec's program did not start: %q %v\n%s", round, line, err, exErr.String())
		}
		// The program runs: a second rm must be refused.
		rmB, err := lcConcurrent(dir, env, "--standalone", "rm", "--format", "json", s)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(exIn, "go\n")
		_ = exIn.Close()
		rest, _ := io.ReadAll(br)
		exCode := 0
		if err := ex.Wait(); err != nil {
			var ee *osexec.ExitError
			if !errors.As(err, &ee) {
				t.Fatal(err)
			}
			exCode = ee.ExitCode()
		}
		wg.Wait()
		if rmAErr != nil {
			t.Fatal(rmAErr)
		}
		outcome := func(r result) string {
			res := lcTargets(t, r)
			x, ok := res[s]
			switch {
			case !ok || len(res) != 1:
				return "bad output"
			case x.Removed && x.Error == nil && r.Code == 0:
				return "removed"
			case !x.Removed && x.Error != nil && r.Code == 125:
				return x.Error.Code
			}
			return "inconsistent"
		}
		a, b := outcome(rmA), outcome(rmB)
		if exCode != 0 || string(rest) != "ran\n" {
			t.Errorf("round %d: the exec: exit %d, stdout %q after started, stderr %s", round, exCode, rest, exErr.String())
		}
		if b != "scope_busy" {
			t.Errorf("round %d: the rm while the program ran: %s, want scope_busy:\n%s", round, b, rmB)
		}
		if a != "removed" && a != "scope_busy" {
			t.Errorf("round %d: the rm racing the exec: %s, want removed or scope_busy:\n%s", round, a, rmA)
		}
		// What is left, by the plugin's labels and by name.
		c, v := objects(t, s)
		byName := lcContainerExists(t, "docker-sandbox-"+s) && lcVolumeExists(t, "docker-sandbox-"+s+".user")
		noneByName := !lcContainerExists(t, "docker-sandbox-"+s) && !lcVolumeExists(t, "docker-sandbox-"+s+".user")
		left := ""
		switch {
		case c == 0 && v == 0 && noneByName:
			left = "nothing"
			if a != "removed" {
				t.Errorf("round %d: nothing is left, but no rm removed it (rm %s, rm %s)", round, a, b)
			}
		case c == 1 && v == 1 && byName:
			left = "the old sandbox"
			if inspectSandbox(t, s, "").ID != before {
				left = "a new sandbox"
				if a != "removed" && a != "scope_busy" {
					t.Errorf("round %d: the sandbox was re-created, but the rm says %s", round, a)
				}
			} else if a == "removed" {
				t.Errorf("round %d: the rm says it removed the sandbox, and the old one is still there", round)
			}
			wantStdout(t, lcSb(t, rid, "exec", "-s", s, "-c", "cat f"), "ran\n")
		default:
			t.Errorf("round %d: left %d containers and %d volumes with the plugin's labels; by name: container %v, volume %v",
				round, c, v, lcContainerExists(t, "docker-sandbox-"+s), lcVolumeExists(t, "docker-sandbox-"+s+".user"))
		}
		outcomes["exec "+how+": rm "+a+", left "+left]++
		t.Logf("round %d: exec %s; racing rm %s, rm while running %s, exec exit %d; left %s", round, how, a, b, exCode, left)
		wantCode(t, lcSb(t, rid, "rm", "-f", s), 0)
		if c, v := objects(t, s); c != 0 || v != 0 {
			t.Errorf("round %d: rm -f left %d containers and %d volumes", round, c, v)
		}
	}
	t.Logf("interleavings seen: %v", outcomes)
	// No seeder, probe or other object of the run is left.
	f := filters.NewArgs(filters.Arg("label", lcTestRunLabel+"="+rid))
	cs, _ := engine(t).ContainerList(context.Background(), container.ListOptions{All: true, Filters: f})
	if len(cs) != 0 {
		t.Errorf("%d containers of the run left", len(cs))
	}
}

// TestLifecycleLoad: 4 scopes × 25 execs, 8 at a time, each echoing a
// distinct 64 KiB payload and its sha256: zero errors, byte-exact, and no
// object left beyond the 4 scopes' own.
func TestLifecycleLoad(t *testing.T) {
	needE2E(t)
	rid := lcRunID(t)
	env := lcEnv(rid)
	dir := t.TempDir()
	var (
		scopes []string
		calls  [][]string
	)
	for i := 0; i < 4; i++ {
		s := newScope(t)
		scopes = append(scopes, s)
		calls = append(calls, []string{"exec", "-s", s, "-c", "echo ok"})
	}
	lcSetup(t, rid, calls)
	type job struct {
		scope   string
		payload []byte
	}
	var jobs []job
	for i := 0; i < 100; i++ {
		p := make([]byte, 64<<10)
		seed := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", rid, i)))
		for j := range p {
			p[j] = seed[j%32] ^ byte(j/32)
		}
		jobs = append(jobs, job{scope: scopes[i%4], payload: p})
	}
	start := time.Now()
	sem := make(chan struct{}, 8)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
	)
	for i, jb := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// The standalone binary: the docker CLI's plugin dispatch would
			// triple the processes started, and it is not what is tested.
			cmd := osexec.CommandContext(ctx, pluginBin, "exec", "-s", jb.scope, "-c",
				`{ tee /dev/fd/3 | sha256sum >&2; } 3>&1`)
			cmd.Env = append(os.Environ(), env...)
			cmd.Dir = dir
			cmd.Stdin = bytes.NewReader(jb.payload)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			sum := sha256.Sum256(jb.payload)
			var bad string
			switch {
			case err != nil:
				bad = fmt.Sprintf("exec %d: %v: %s", i, err, stderr.String())
			case !bytes.Equal(stdout.Bytes(), jb.payload):
				bad = fmt.Sprintf("exec %d: payload differs (%d bytes back)", i, stdout.Len())
			case strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(stderr.String()), "-")) != hex.EncodeToString(sum[:]):
				bad = fmt.Sprintf("exec %d: sha256 %q, want %s", i, stderr.String(), hex.EncodeToString(sum[:]))
			}
			if bad != "" {
				mu.Lock()
				errs = append(errs, bad)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("100 execs of 64 KiB, 8 at a time, in %s", time.Since(start).Round(time.Millisecond))
	for _, e := range errs {
		t.Error(e)
	}
	f := filters.NewArgs(filters.Arg("label", lcTestRunLabel+"="+rid))
	cs, _ := engine(t).ContainerList(context.Background(), container.ListOptions{All: true, Filters: f})
	vs, _ := engine(t).VolumeList(context.Background(), volume.ListOptions{Filters: f})
	ns, _ := engine(t).NetworkList(context.Background(), network.ListOptions{Filters: f})
	want := map[string]bool{}
	for _, s := range scopes {
		want["docker-sandbox-"+s] = true
		want["docker-sandbox-"+s+".user"] = true
	}
	var extra []string
	for _, c := range cs {
		if n := strings.TrimPrefix(c.Names[0], "/"); !want[n] {
			extra = append(extra, "container "+n)
		}
	}
	nv := 0
	for _, v := range vs.Volumes {
		if v.Labels["com.docker.sandbox.kind"] == "helper" {
			continue
		}
		nv++
		if !want[v.Name] {
			extra = append(extra, "volume "+v.Name)
		}
	}
	for _, n := range ns {
		extra = append(extra, "network "+n.Name)
	}
	if len(extra) > 0 || len(cs) != 4 || nv != 4 {
		t.Errorf("after the load: %d containers, %d volumes; unexpected: %v", len(cs), nv, extra)
	}
}

// lcMkContainer creates (and with start, starts) a container with the
// engine's API, as a user would, under the test run's label when labels
// are given.
func lcMkContainer(t *testing.T, name, image string, entrypoint []string, labels map[string]string, mounts []mount.Mount, start bool) string {
	t.Helper()
	ctx := context.Background()
	cli := engine(t)
	resp, err := cli.ContainerCreate(ctx, &container.Config{Image: image, Entrypoint: entrypoint, Labels: labels},
		&container.HostConfig{NetworkMode: "none", Mounts: mounts}, nil, nil, name)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	t.Cleanup(func() { _ = cli.ContainerRemove(context.Background(), resp.ID, container.RemoveOptions{Force: true}) })
	if start {
		if err := cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
	}
	return resp.ID
}

// lcLabels copies labels and sets more.
func lcLabels(base map[string]string, kv ...string) map[string]string {
	l := map[string]string{}
	for k, v := range base {
		l[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return l
}

// lcSandboxMounts are the mounts a sandbox container of target has (volumes
// named as the plugin names them, the helper volume of an existing sandbox).
func lcSandboxMounts(ws, user, helper string) []mount.Mount {
	return []mount.Mount{
		{Type: mount.TypeVolume, Source: ws, Target: "/opt/workspace"},
		{Type: mount.TypeVolume, Source: user, Target: "/opt/user"},
		{Type: mount.TypeVolume, Source: helper, Target: "/opt/sandbox", ReadOnly: true},
	}
}

// lcTargets decodes stop/rm --format json.
func lcTargets(t *testing.T, r result) map[string]lcTargetResult {
	t.Helper()
	var res []lcTargetResult
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("stop/rm --format json: %v\n%s", err, r)
	}
	out := map[string]lcTargetResult{}
	for _, x := range res {
		out[x.Target] = x
	}
	return out
}

// lcErrCode is the error code of the single target of stop/rm --format json.
func lcErrCode(t *testing.T, r result) string {
	t.Helper()
	res := lcTargets(t, r)
	if len(res) != 1 {
		t.Fatalf("want one target: %s", r)
	}
	for _, x := range res {
		if x.Error != nil {
			return x.Error.Code
		}
	}
	return ""
}

// TestLifecycleLookAlikes: containers and volumes that look like a
// sandbox's but are not the plugin's are not listed, inspected, stopped,
// removed, pruned, counted against the limit or shelled into, and still
// exist afterwards: a container run from a committed sandbox image (with
// the sandbox's name after the original is gone, and with a name of its
// own), a user's container with copied labels and the sandbox's very mounts
// under a random name, a container named like a sandbox without its mounts,
// one whose labels (and mounts) name another scope than its name, and
// volumes named like a scope's without its labels or with another's.
func TestLifecycleLookAlikes(t *testing.T) {
	needE2E(t)
	ctx := context.Background()
	cli := engine(t)
	rid := lcRunID(t)
	s, c := newScope(t), newScope(t)
	l, m, v, w, n := newScope(t), newScope(t), newScope(t), newScope(t), newScope(t)
	lcSetup(t, rid, [][]string{{"exec", "-s", s, "-c", "echo s > f; echo ok"}, {"exec", "-s", c, "-c", "echo c > f; echo ok"}})
	real := inspectSandbox(t, s, "")
	rtImage := real.Config.Image
	helperVol := ""
	for _, mp := range real.Mounts {
		if mp.Destination == "/opt/sandbox" {
			helperVol = mp.Name
		}
	}
	if helperVol == "" {
		t.Fatalf("the sandbox has no helper mount: %+v", real.Mounts)
	}
	// docker commit of c's sandbox: the image carries all its labels.
	img := strings.ToLower("lc-committed-" + rid)
	if _, err := cli.ContainerCommit(ctx, inspectSandbox(t, c, "").ID, container.CommitOptions{Reference: img}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), img, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	wantStdout(t, lcSb(t, rid, "stop", c), c+"\n")
	sleep := []string{"sleep", "600"}
	// After the original is gone: the same name, and a name of its own
	// (inherited labels: none given here).
	committedSame := lcMkContainer(t, "docker-sandbox-"+c, img, sleep, nil, nil, true)
	committedOwn := lcMkContainer(t, "lc-committed-"+rid, img, []string{"true"}, nil, nil, true)
	if ci, err := cli.ContainerInspect(ctx, committedSame); err != nil || ci.Config.Labels["com.docker.sandbox.scope"] != c ||
		ci.Config.Labels["com.docker.sandbox.managed"] != "true" || ci.Config.Labels[lcTestRunLabel] != rid {
		t.Fatalf("a container of the committed image should carry the sandbox's labels (the case this test guards): %v %+v", err, ci.Config)
	}
	// Copied labels and the sandbox's own mounts, a random name.
	copied := lcMkContainer(t, "lc-copied-"+rid, rtImage, sleep, real.Config.Labels,
		lcSandboxMounts("docker-sandbox-"+s+".user", "docker-sandbox-"+s+".user", helperVol), true)
	// A sandbox's name and labels, without its mounts (exited: prune removes
	// the plugin's exited sandboxes).
	noMounts := lcMkContainer(t, "docker-sandbox-"+l, rtImage, []string{"true"},
		lcLabels(real.Config.Labels, "com.docker.sandbox.scope", l), nil, true)
	// Named for m, labels and mounts of s.
	otherScope := lcMkContainer(t, "docker-sandbox-"+m, rtImage, sleep, real.Config.Labels,
		lcSandboxMounts("docker-sandbox-"+s+".user", "docker-sandbox-"+s+".user", helperVol), true)
	containers := map[string]string{"committed, same name": committedSame, "committed, own name": committedOwn,
		"copied labels and mounts": copied, "sandbox name, no mounts": noMounts, "labels of another scope": otherScope}
	running := []string{committedSame, copied, otherScope}
	mkVol := func(name string, labels map[string]string) string {
		t.Helper()
		if _, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: labels}); err != nil {
			t.Fatal(err)
		}
		return name
	}
	volLabels := func(scope string) map[string]string {
		return map[string]string{lcTestRunLabel: rid, "com.docker.sandbox.managed": "true", "com.docker.sandbox.kind": "user", "com.docker.sandbox.scope": scope}
	}
	vols := []string{
		mkVol("docker-sandbox-"+v+".user", map[string]string{lcTestRunLabel: rid}), // a scope's name, no labels
		mkVol("docker-sandbox-"+w+".user", volLabels(v)),                           // w's name, v's labels
		mkVol("lc-vol-"+rid, volLabels(v)),                                         // v's labels, a random name
	}
	poll(t, 20*time.Second, func() error {
		for _, id := range []string{committedOwn, noMounts} {
			if ci, err := cli.ContainerInspect(ctx, id); err != nil || ci.State.Running {
				return fmt.Errorf("%s still running", id)
			}
		}
		return nil
	})
	allThere := func(t *testing.T, when string) {
		t.Helper()
		for what, id := range containers {
			if !lcContainerExists(t, id) {
				t.Errorf("%s: the look-alike %q was removed", when, what)
			}
		}
		for _, id := range running {
			if ci, err := cli.ContainerInspect(ctx, id); err == nil && !ci.State.Running {
				t.Errorf("%s: the look-alike %s was stopped", when, ci.Name)
			}
		}
		for _, name := range vols {
			if !lcVolumeExists(t, name) {
				t.Errorf("%s: the look-alike volume %s was removed", when, name)
			}
		}
	}

	t.Run("ls", func(t *testing.T) {
		rows := lcListJSON(t, lcSb(t, rid, "ls", "-a", "--filter", lcFilter(rid), "--format", "json"))
		var got []string
		for _, r := range rows {
			got = append(got, r.Scope+"/"+r.Session+" "+r.State+" "+r.Container)
		}
		want := []string{s + "/ idle " + real.ID[:12], c + "/ expired-with-data "}
		if len(got) != 2 || !(got[0] == want[0] && got[1] == want[1] || got[0] == want[1] && got[1] == want[0]) {
			t.Errorf("ls -a: got %q, want only %q", got, want)
		}
	})
	t.Run("inspect", func(t *testing.T) {
		r := lcSb(t, rid, "inspect", c)
		wantCode(t, r, 0)
		var ds []struct {
			State     string            `json:"state"`
			Container string            `json:"container"`
			Mounts    []json.RawMessage `json:"mounts"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &ds); err != nil || len(ds) != 1 || ds[0].State != "expired-with-data" ||
			ds[0].Container != "" || len(ds[0].Mounts) != 0 {
			t.Errorf("inspect %s showed the look-alike: %v\n%s", c, err, r)
		}
		for _, x := range []string{l, m} {
			r := lcSb(t, rid, "inspect", x)
			if r.Code != 125 || !strings.Contains(r.Stderr, "no sandbox "+x) {
				t.Errorf("inspect %s: want not_found:\n%s", x, r)
			}
		}
	})
	t.Run("limit", func(t *testing.T) {
		// One sandbox of the plugin's lives (s) and three look-alikes run:
		// with max_sandboxes 2, one more may be created.
		r := sbRun(t, run{args: []string{"exec", "-s", n, "-c", "echo ok"}, env: lcEnv(rid, "DOCKER_SANDBOX_MAX_SANDBOXES=2"), standalone: true})
		wantStdout(t, r, "ok\n")
		r = sbRun(t, run{args: []string{"exec", "-s", n, "--session", "x", "--format", "json", "-c", "echo ok"},
			env: lcEnv(rid, "DOCKER_SANDBOX_MAX_SANDBOXES=2"), standalone: true})
		if r.Code != 125 || decodeErr(t, r).Error.Code != "limit_reached" {
			t.Errorf("the limit no longer counts the plugin's own sandboxes:\n%s", r)
		}
	})
	t.Run("shell", func(t *testing.T) {
		out, code := lcShell(t, rid, 24, 80, c+" -- sh -c 'touch /tmp/lc-pwned; echo SHELL-RAN'", nil)
		if code != 125 || strings.Contains(out, "SHELL-RAN") || !strings.Contains(out, "is not the docker sandbox of "+c) {
			t.Errorf("shell into a look-alike holding the sandbox's name: exit %d\n%s", code, out)
		}
		ex, err := cli.ContainerExecCreate(ctx, committedSame, container.ExecOptions{Cmd: []string{"test", "-e", "/tmp/lc-pwned"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := cli.ContainerExecStart(ctx, ex.ID, container.ExecStartOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, 20*time.Second, func() error {
			ei, err := cli.ContainerExecInspect(ctx, ex.ID)
			if err != nil || ei.Running {
				return fmt.Errorf("exec still running: %v", err)
			}
			if ei.ExitCode == 0 {
				t.Errorf("the shell ran in the look-alike")
			}
			return nil
		})
	})
	t.Run("stop", func(t *testing.T) {
		for _, x := range []string{c, l, m} {
			if code := lcErrCode(t, lcSb(t, rid, "stop", "--format", "json", x)); code != "not_found" {
				t.Errorf("stop %s: %q, want not_found", x, code)
			}
		}
		res := lcTargets(t, lcSb(t, rid, "stop", "--all", "--filter", lcFilter(rid), "--format", "json"))
		if len(res) != 2 || !res[s].Removed || !res[n].Removed {
			t.Errorf("stop --all: %+v, want %s and %s", res, s, n)
		}
		if lcContainerExists(t, "docker-sandbox-"+s) || lcContainerExists(t, "docker-sandbox-"+n) {
			t.Errorf("stop --all left a sandbox")
		}
		allThere(t, "after stop")
	})
	t.Run("rm", func(t *testing.T) {
		for _, x := range []string{l, m, v, w} {
			if code := lcErrCode(t, lcSb(t, rid, "rm", "--format", "json", x)); code != "not_found" {
				t.Errorf("rm %s: %q, want not_found", x, code)
			}
		}
		// c's data goes, the container holding its name stays.
		if code := lcErrCode(t, lcSb(t, rid, "rm", "--format", "json", c)); code != "" || lcVolumeExists(t, "docker-sandbox-"+c+".user") {
			t.Errorf("rm %s: %q", c, code)
		}
		// s's data is in use by look-alikes: rm says so and removes neither.
		if code := lcErrCode(t, lcSb(t, rid, "rm", "--format", "json", s)); code != "scope_busy" || !lcVolumeExists(t, "docker-sandbox-"+s+".user") {
			t.Errorf("rm %s while look-alikes use its volume: %q", s, code)
		}
		allThere(t, "after rm")
	})
	t.Run("prune", func(t *testing.T) {
		r := sbRun(t, run{args: []string{"prune", "-f", "--older-than", "0s", "--filter", lcFilter(rid), "--format", "json"},
			env: lcEnv(rid, "DOCKER_SANDBOX_PRUNE_GRACE=0s"), standalone: true})
		// s's data is in use by look-alikes: the engine refuses to remove
		// it, which prune reports (exit 125); nothing else fails.
		var rep lcPruneReport
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil || r.Code != 125 {
			t.Fatalf("prune: %v\n%s", err, r)
		}
		for _, it := range rep.Objects {
			if (it.Error != "") != (it.Name == "docker-sandbox-"+s+".user") {
				t.Errorf("prune: %+v", it)
			}
		}
		for _, it := range rep.Objects {
			for _, id := range containers {
				if it.ID == id {
					t.Errorf("prune picked a look-alike: %+v", it)
				}
			}
			for _, name := range vols {
				if it.Name == name {
					t.Errorf("prune picked a look-alike volume: %+v", it)
				}
			}
		}
		if !rep.names()["volume docker-sandbox-"+n+".user"] {
			t.Errorf("prune --older-than 0s kept n's data: %+v", rep)
		}
		allThere(t, "after prune")
	})
}

// TestLifecyclePruneFutureTimes: sandboxed code that plants modification
// times in the future (touch -d) cannot make its scope look fresh to
// prune --older-than: those times are ignored, in a scope's volume, in a
// session's workspace, near or far in the future; a volume whose every time
// is in the future ages from its creation.
func TestLifecyclePruneFutureTimes(t *testing.T) {
	needE2E(t)
	rid := lcRunID(t)
	far, near, sess, all, ctl, recent := newScope(t), newScope(t), newScope(t), newScope(t), newScope(t), newScope(t)
	// Everything three hours old, as a sandbox used then would leave it.
	const old = `o=$(( $(date +%s) - 10800 )); echo x > a; echo y > b; mkdir -p d; echo z > d/c; echo u > /opt/user/u; find /opt/workspace /opt/user -exec touch -h -d @$o {} +; `
	lcSetup(t, rid, [][]string{
		{"exec", "-s", far, "-c", old + "touch -d 2099-01-01 b d; echo ok"},
		{"exec", "-s", near, "-c", old + "touch -d @$(( $(date +%s) + 600 )) a; echo ok"},
		{"exec", "-s", sess, "--session", "s", "-c", old + "touch -d 2099-01-01 /opt/workspace d/c; echo ok"},
		{"exec", "-s", all, "-c", old + "find /opt/workspace /opt/user -exec touch -h -d 2099-01-01 {} +; echo ok"},
		{"exec", "-s", ctl, "-c", old + "echo ok"},
		{"exec", "-s", recent, "-c", "echo x > a; echo ok"},
	})
	res := lcTargets(t, lcSb(t, rid, "stop", "--all", "--filter", lcFilter(rid), "--format", "json"))
	if len(res) != 6 {
		t.Fatalf("stop --all: %+v", res)
	}
	prune := func(olderThan string) lcPruneReport {
		return lcDecodePrune(t, sbRun(t, run{args: []string{"prune", "-f", "--older-than", olderThan, "--filter", lcFilter(rid), "--format", "json"},
			env: lcEnv(rid, "DOCKER_SANDBOX_PRUNE_GRACE=0s"), standalone: true}))
	}
	rep := prune("1h")
	gone := rep.names()
	for _, x := range []string{far, near, sess, ctl} {
		if !gone["volume docker-sandbox-"+x+".user"] || lcVolumeExists(t, "docker-sandbox-"+x+".user") {
			t.Errorf("scope %s (data 3 h old, planted future times) was not pruned by --older-than 1h:\n%+v", x, rep)
		}
	}
	if !gone["volume docker-sandbox-"+sess+".s.ws"] || lcVolumeExists(t, "docker-sandbox-"+sess+".s.ws") {
		t.Errorf("the session's workspace with planted times was not pruned: %+v", rep)
	}
	for _, it := range rep.Objects {
		if it.Type != "volume" || it.Scope == ctl {
			continue
		}
		if !strings.Contains(it.Reason, "in the future ignored") || it.LastUsed == nil || time.Since(*it.LastUsed) < 2*time.Hour {
			t.Errorf("%s: the reason should say future times were ignored, and the last use be the honest 3 h: %+v", it.Name, it)
		}
	}
	// All in the future: nothing in the data can be believed, the volume's
	// creation (a minute ago) stands for its last use.
	for _, x := range []string{all, recent} {
		if gone["volume docker-sandbox-"+x+".user"] || !lcVolumeExists(t, "docker-sandbox-"+x+".user") {
			t.Errorf("scope %s, used a moment ago, was pruned by --older-than 1h: %+v", x, rep)
		}
	}
	rep = prune("0s")
	for _, x := range []string{all, recent} {
		if !rep.names()["volume docker-sandbox-"+x+".user"] || lcVolumeExists(t, "docker-sandbox-"+x+".user") {
			t.Errorf("scope %s was not pruned by --older-than 0s: %+v", x, rep)
		}
	}
}

// lcMkNet creates a network as a user or the plugin would (the plugin's:
// internal bridge, no address on the host's side), under the test run.
func lcMkNet(t *testing.T, name string, labels map[string]string) string {
	t.Helper()
	ctx := context.Background()
	cli := engine(t)
	for attempt := 0; ; attempt++ {
		b := make([]byte, 2)
		_, _ = rand.Read(b)
		sub := fmt.Sprintf("10.%d.%d.0/28", 200+int(b[0])%50, b[1])
		resp, err := cli.NetworkCreate(ctx, name, network.CreateOptions{
			Driver: "bridge", Internal: true,
			IPAM: &network.IPAM{Driver: "default", Config: []network.IPAMConfig{{Subnet: sub}}},
			Options: map[string]string{"com.docker.network.bridge.inhibit_ipv4": "true",
				"com.docker.network.bridge.enable_ip_masquerade": "false"},
			Labels: labels,
		})
		if err != nil && strings.Contains(err.Error(), "overlap") && attempt < 10 {
			continue
		}
		if err != nil {
			t.Fatalf("network %s: %v", name, err)
		}
		t.Cleanup(func() { _ = cli.NetworkRemove(context.Background(), resp.ID) })
		return resp.ID
	}
}

func lcNetExists(t *testing.T, id string) bool {
	t.Helper()
	_, err := engine(t).NetworkInspect(context.Background(), id, network.InspectOptions{})
	return err == nil
}

// TestLifecycleRmDeadSeeder: a call killed between its seeder's create and
// that seeder's removal leaves the seeder (a never-started container of the
// helper mounting the scope's volumes, made here as the plugin makes it);
// `rm -f` removes it, then the volume (it said scope_busy until a prune).
// A container of the user's that mounts a scope's volume is never removed:
// scope_busy, and the container and the volume stay.
func TestLifecycleRmDeadSeeder(t *testing.T) {
	needE2E(t)
	rid := lcRunID(t)
	dead, held := newScope(t), newScope(t)
	for _, s := range []string{dead, held} {
		wantStdout(t, lcSb(t, rid, "exec", "-s", s, "-c", "echo ok"), "ok\n")
	}
	helperVol := ""
	for _, mp := range inspectSandbox(t, dead, "").Mounts {
		if mp.Destination == "/opt/sandbox" {
			helperVol = mp.Name
		}
	}
	for _, s := range []string{dead, held} {
		wantStdout(t, lcSb(t, rid, "stop", s), s+"\n")
	}
	deadVol, heldVol := "docker-sandbox-"+dead+".user", "docker-sandbox-"+held+".user"
	seeder := lcMkContainer(t, "", busybox, []string{"/opt/sandbox/sandbox-helper"},
		map[string]string{lcTestRunLabel: rid, "com.docker.sandbox.managed": "true", "com.docker.sandbox.kind": "seeder"},
		[]mount.Mount{{Type: mount.TypeVolume, Source: deadVol, Target: "/opt/user"}, {Type: mount.TypeVolume, Source: helperVol, Target: "/opt/sandbox"}}, false)
	if r := lcSb(t, rid, "rm", "-f", dead); r.Code != 0 || lcContainerExists(t, seeder) || lcVolumeExists(t, deadVol) {
		t.Fatalf("rm -f with a dead seeder on the volume: seeder left %v, volume left %v\n%s", lcContainerExists(t, seeder), lcVolumeExists(t, deadVol), r)
	}
	user := lcMkContainer(t, "", busybox, []string{"/opt/sandbox/sandbox-helper"},
		map[string]string{lcTestRunLabel: rid, "com.docker.sandbox.kind": "seeder"},
		[]mount.Mount{{Type: mount.TypeVolume, Source: heldVol, Target: "/opt/user"}, {Type: mount.TypeVolume, Source: helperVol, Target: "/opt/sandbox"}}, false)
	r := lcSb(t, rid, "rm", "-f", held)
	if r.Code != 125 || !strings.Contains(r.Stderr, "busy") || !lcContainerExists(t, user) || !lcVolumeExists(t, heldVol) {
		t.Fatalf("rm -f with a user's container on the volume: want scope_busy, the container and the volume kept (container %v, volume %v)\n%s",
			lcContainerExists(t, user), lcVolumeExists(t, heldVol), r)
	}
}

// TestLifecycleRmScopeNetwork: rm SCOPE removes the scope's egress network
// also when the scope has no container (or no data) left; rm --all the
// networks of scopes with nothing else; and never a network that is not
// the plugin's own (a name alone, labels of another scope), nor one a
// container still uses. (The networks are made as the plugin makes them,
// without the egress sidecar.)
func TestLifecycleRmScopeNetwork(t *testing.T) {
	needE2E(t)
	rid := lcRunID(t)
	ctx := context.Background()
	cli := engine(t)
	only, withData, user, mis, other, busy, all, sess := newScope(t), newScope(t), newScope(t), newScope(t), newScope(t), newScope(t), newScope(t), newScope(t)
	own := func(scope string) map[string]string {
		return map[string]string{lcTestRunLabel: rid, "com.docker.sandbox.managed": "true",
			"com.docker.sandbox.kind": "egress-network", "com.docker.sandbox.scope": scope}
	}
	netName := func(scope string) string { return "docker-sandbox.net." + scope }
	wantStdout(t, lcSb(t, rid, "exec", "-s", withData, "-c", "echo ok"), "ok\n")
	rtImage := inspectSandbox(t, withData, "").Config.Image
	wantStdout(t, lcSb(t, rid, "stop", withData), withData+"\n")
	nOnly := lcMkNet(t, netName(only), own(only))
	nData := lcMkNet(t, netName(withData), own(withData))
	nUser := lcMkNet(t, netName(user), map[string]string{lcTestRunLabel: rid})
	nMis := lcMkNet(t, netName(mis), own(other))
	nBusy := lcMkNet(t, netName(busy), own(busy))
	nAll := lcMkNet(t, netName(all), own(all))
	nSess := lcMkNet(t, netName(sess), own(sess))
	resp, err := cli.ContainerCreate(ctx, &container.Config{Image: rtImage, Entrypoint: []string{"sleep", "600"}, Labels: map[string]string{lcTestRunLabel: rid}},
		&container.HostConfig{NetworkMode: container.NetworkMode(netName(busy))}, nil, nil, "lc-on-net-"+rid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.ContainerRemove(context.Background(), resp.ID, container.RemoveOptions{Force: true}) })
	if err := cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}

	wantStdout(t, lcSb(t, rid, "rm", only), only+"\n")
	if lcNetExists(t, nOnly) {
		t.Errorf("rm %s (nothing but its network) left the network", only)
	}
	wantStdout(t, lcSb(t, rid, "rm", withData), withData+"\n")
	if lcNetExists(t, nData) || lcVolumeExists(t, "docker-sandbox-"+withData+".user") {
		t.Errorf("rm %s left its network or data", withData)
	}
	for _, x := range []string{user, mis, other} {
		if code := lcErrCode(t, lcSb(t, rid, "rm", "--format", "json", x)); code != "not_found" {
			t.Errorf("rm %s: %q, want not_found", x, code)
		}
	}
	if !lcNetExists(t, nUser) || !lcNetExists(t, nMis) {
		t.Errorf("rm removed a network that is not the plugin's own")
	}
	if code := lcErrCode(t, lcSb(t, rid, "rm", "--format", "json", busy)); code != "scope_busy" {
		t.Errorf("rm %s while a container is on its network: %q, want scope_busy", busy, code)
	}
	if ci, err := cli.ContainerInspect(ctx, resp.ID); !lcNetExists(t, nBusy) || err != nil || !ci.State.Running {
		t.Errorf("rm %s removed the network in use, or touched the container on it: %v", busy, err)
	}
	// A session's rm leaves the scope's network.
	if code := lcErrCode(t, lcSb(t, rid, "rm", "--format", "json", sess+"/s")); code != "not_found" || !lcNetExists(t, nSess) {
		t.Errorf("rm %s/s: %q; the scope's network must stay", sess, code)
	}
	r := lcSb(t, rid, "rm", "--all", "--filter", lcFilter(rid), "--format", "json")
	res := lcTargets(t, r)
	if !res[all].Removed || !res[sess].Removed || res[busy].Error == nil || res[busy].Error.Code != "scope_busy" || r.Code != 125 {
		t.Errorf("rm --all: %+v\n%s", res, r)
	}
	for _, x := range []string{user, mis, other} {
		if _, ok := res[x]; ok {
			t.Errorf("rm --all took a network that is not the plugin's own for scope %s's: %+v", x, res)
		}
	}
	if lcNetExists(t, nAll) || lcNetExists(t, nSess) || !lcNetExists(t, nUser) || !lcNetExists(t, nMis) || !lcNetExists(t, nBusy) {
		t.Errorf("after rm --all: all %v sess %v user %v mis %v busy %v", lcNetExists(t, nAll), lcNetExists(t, nSess),
			lcNetExists(t, nUser), lcNetExists(t, nMis), lcNetExists(t, nBusy))
	}
}

// TestLifecycleExecThenRemove: `stop` or `rm` right after an exec returned
// is not refused as busy. The exec's call returns once the wrapper's status
// arrived and the engine marks the exec ended a moment later (seen as
// scope_busy on a loaded machine by scripts/bench.sh): the claim lets such
// an exec settle before it calls the sandbox busy.
func TestLifecycleExecThenRemove(t *testing.T) {
	needE2E(t)
	for i := 0; i < 6; i++ {
		s := newScope(t)
		wantCode(t, sb(t, "exec", "-s", s, "-c", "true"), 0)
		verb := []string{"stop", "rm"}[i%2]
		if r := sb(t, verb, s); r.Code != 0 {
			t.Fatalf("%s right after an exec (round %d):\n%s", verb, i, r)
		}
		if n, _ := objects(t, s); n != 0 {
			t.Fatalf("%s left the container (round %d)", verb, i)
		}
	}
}
