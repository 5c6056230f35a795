package exec

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/google/go-cmp/cmp"
	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// fakeEngine is a tiny in-memory engine: containers by name, volumes, and
// execs answered by a fake helper.
type fakeEngine struct {
	Engine     // the lifecycle calls these tests do not make
	mu         sync.Mutex
	containers map[string]*container.Config
	hostcfg    map[string]*container.HostConfig
	// defaultRuntime is the engine's default runtime ("": runc).
	defaultRuntime string
	running        map[string]bool
	volumes        map[string]bool
	// volLabels override the labels of existing volumes (a user's own
	// volume, nil labels); every other volume has those its name implies.
	volLabels map[string]map[string]string
	calls     []string
	createErr error // returned once by ContainerCreate of the sandbox
	// volumeRemoveErr is returned by every VolumeRemove.
	volumeRemoveErr error
	runtimes        map[string]system.RuntimeWithStatus
	// startErrs: reasons the engine gives, one per exec start, instead of
	// starting it (written raw into the attached stream, as dockerd does).
	startErrs []string
	// drains: runs the fake helper refuses as draining (status before
	// Started), before it runs one.
	drains int
	// helper answers one exec: it gets the code and stdin, returns frames.
	helper func(cmd []string, code []byte, stdin []byte) (stdout, stderr string, st wire.RunStatus)
	// tamper: bytes other code of the sandbox writes into a run's stream
	// after Started (as gVisor allows through /proc/PID/fd), one write;
	// before it with tamperFirst.
	tamper      []byte
	tamperFirst bool
	// noStdin: the program reads no stdin (the fake helper does not wait
	// for the plugin's end of stdin, which follows Started).
	noStdin bool
	// injectCode replaces the code the helper reads (another run wrote
	// into the run's stdin).
	injectCode []byte
	// info changes what Info reports (the defaults: every limit enforced).
	info func(*system.Info)
	// seederCreate, when set, runs before the seeder's create (outside the
	// lock: it may wait for other calls).
	seederCreate func()
	// versions counts the ServerVersion calls.
	versions int
	// createWarnings are the warnings ContainerCreate of the sandbox gives.
	createWarnings []string
	// attach serves the container's attach (the first call's channel,
	// over stdcopy as the engine multiplexes it); nil: the engine refuses
	// an attach.
	attach func(c net.Conn)
	// exits: each ended exec's exit code, by exec ID (ContainerExecInspect).
	exits map[string]int
	// podman: the engine says it is Podman (ServerVersion); podmanDrop
	// changes a created sandbox's settings as Podman ignoring one would.
	podman     bool
	podmanDrop func(*container.HostConfig)
	// images are the images on the engine (ImageInspect).
	images map[string]image.InspectResponse
	// seederRemoveErr is returned by the removal of the volume seeder.
	seederRemoveErr error
}

func (f *fakeEngine) ServerVersion(ctx context.Context) (types.Version, error) {
	f.mu.Lock()
	f.versions++
	f.mu.Unlock()
	if f.podman {
		return types.Version{Version: "4.3.1", Components: []types.ComponentVersion{{Name: PodmanComponent}, {Name: "Conmon"}}}, nil
	}
	return types.Version{Version: "28.5.1", Components: []types.ComponentVersion{{Name: "Engine"}}}, nil
}

func (f *fakeEngine) VolumeCreate(ctx context.Context, o volume.CreateOptions) (volume.Volume, error) {
	f.call(fmt.Sprintf("VolumeCreate %s kind=%s", o.Name, o.Labels[core.LabelKind]))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.volumes[o.Name] = true
	return volume.Volume{Name: o.Name, Labels: o.Labels}, nil
}

func (f *fakeEngine) ContainerWait(ctx context.Context, id string, _ container.WaitCondition) (<-chan container.WaitResponse, <-chan error) {
	f.call("Wait")
	wc := make(chan container.WaitResponse, 1)
	wc <- container.WaitResponse{StatusCode: 2}
	return wc, make(chan error)
}

func newFake() *fakeEngine {
	return &fakeEngine{containers: map[string]*container.Config{}, hostcfg: map[string]*container.HostConfig{}, running: map[string]bool{},
		volumes: map[string]bool{}, runtimes: map[string]system.RuntimeWithStatus{"runc": {}}, exits: map[string]int{}}
}

// Events: an engine that reports no events until ctx ends.
func (f *fakeEngine) Events(ctx context.Context, _ events.ListOptions) (<-chan events.Message, <-chan error) {
	msgs, errs := make(chan events.Message), make(chan error, 1)
	go func() {
		<-ctx.Done()
		errs <- ctx.Err()
	}()
	return msgs, errs
}

func (f *fakeEngine) call(s string) {
	f.mu.Lock()
	f.calls = append(f.calls, s)
	f.mu.Unlock()
}

// snapshotCalls is a copy of the calls so far (calls made from other
// goroutines meanwhile go on).
func (f *fakeEngine) snapshotCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

var errNotFound = cerrdefs.ErrNotFound.WithMessage("No such container")

func (f *fakeEngine) ContainerExecCreate(ctx context.Context, name string, o container.ExecOptions) (container.ExecCreateResponse, error) {
	f.call("ExecCreate")
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.containers[name]; !ok {
		return container.ExecCreateResponse{}, errNotFound
	}
	if !f.running[name] {
		return container.ExecCreateResponse{}, cerrdefs.ErrConflict.WithMessage("Container " + name + " is not running")
	}
	b, _ := json.Marshal(o.Cmd)
	return container.ExecCreateResponse{ID: string(b)}, nil
}

func (f *fakeEngine) ContainerExecAttach(ctx context.Context, id string, _ container.ExecAttachOptions) (types.HijackedResponse, error) {
	f.call("ExecAttach")
	var cmd []string
	_ = json.Unmarshal([]byte(id), &cmd)
	client, server := net.Pipe()
	f.mu.Lock()
	var startErr string
	if len(f.startErrs) > 0 {
		startErr, f.startErrs = f.startErrs[0], f.startErrs[1:]
	}
	f.mu.Unlock()
	if startErr != "" {
		go func() {
			defer server.Close()
			go func() { _, _ = io.Copy(io.Discard, server) }()
			_, _ = stdcopy.NewStdWriter(server, stdcopy.Stdout).Write([]byte(startErr + "\r\n"))
		}()
		return types.NewHijackedResponse(&halfConn{Conn: client}, ""), nil
	}
	if len(cmd) > 1 && cmd[1] == wire.VerbStatus {
		// PID 1 answers: the sandbox lives.
		go func() {
			defer server.Close()
			go func() { _, _ = io.Copy(io.Discard, server) }()
			_, _ = stdcopy.NewStdWriter(server, stdcopy.Stdout).Write([]byte(`{"pid1_started":"2026-01-02T03:04:05Z"}`))
		}()
		return types.NewHijackedResponse(&halfConn{Conn: client}, ""), nil
	}
	go func() {
		defer server.Close()
		noCode, sum := false, ""
		for i, a := range cmd {
			if a == "--no-code" {
				noCode = true
			}
			if a == "--code-sha256" && i+1 < len(cmd) {
				sum = cmd[i+1]
			}
		}
		var code []byte
		if !noCode {
			n, err := wire.ReadCodeHeader(server)
			if err != nil {
				return
			}
			code = make([]byte, n)
			if _, err := io.ReadFull(server, code); err != nil {
				return
			}
		}
		// As the helper: Started, then the rest of stdin, until the plugin
		// closes its side for writing.
		w := stdcopy.NewStdWriter(server, stdcopy.Stdout)
		fw := wire.NewFrameWriter(w)
		f.mu.Lock()
		drain := f.drains > 0
		if drain {
			f.drains--
		}
		f.mu.Unlock()
		if drain {
			go func() { _, _ = io.Copy(io.Discard, server) }()
			b, _ := json.Marshal(wire.RunStatus{ExitCode: 125, ErrorCode: wire.ErrDraining})
			_ = fw.WriteFrame(wire.Status, b)
			return
		}
		f.mu.Lock()
		tamper, first := f.tamper, f.tamperFirst
		f.mu.Unlock()
		if tamper != nil && first {
			_, _ = w.Write(tamper)
			tamper = nil
		}
		if err := fw.WriteFrame(wire.Started, nil); err != nil {
			return
		}
		f.mu.Lock()
		if f.injectCode != nil {
			code = f.injectCode
		}
		f.mu.Unlock()
		if tamper != nil {
			_, _ = w.Write(tamper)
		}
		var stdin []byte
		if f.noStdin {
			go func() { _, _ = io.Copy(io.Discard, server) }()
		} else {
			stdin = readUntilMarker(server)
		}
		var out, errs string
		var st wire.RunStatus
		if got := sha256.Sum256(code); !noCode && sum != hex.EncodeToString(got[:]) {
			// As the helper: the code is not the one the command line names.
			st = wire.RunStatus{ExitCode: 125, ErrorCode: wire.ErrStreamTampered, Error: "sandbox-helper run: the code on stdin is not the code the plugin sent"}
		} else {
			out, errs, st = f.helper(cmd, code, stdin)
			_ = fw.WriteFrame(wire.Stdout, []byte(out))
			_ = fw.WriteFrame(wire.Stderr, []byte(errs))
		}
		b, _ := json.Marshal(st)
		f.mu.Lock()
		f.exits[id] = st.ExitCode
		f.mu.Unlock()
		_ = fw.WriteFrame(wire.Status, b)
	}()
	return types.NewHijackedResponse(&halfConn{Conn: client}, ""), nil
}

// halfConn turns CloseWrite into a marker the fake server understands
// (net.Pipe has no half close).
type halfConn struct{ net.Conn }

const eofMarker = "\x00\x00FAKE-EOF\x00\x00"

func (h *halfConn) CloseWrite() error {
	_, err := h.Conn.Write([]byte(eofMarker))
	return err
}

// readUntilMarker reads the plugin's stdin up to its CloseWrite marker.
func readUntilMarker(r io.Reader) []byte {
	br := bufio.NewReader(r)
	var out []byte
	for {
		b, err := br.ReadByte()
		if err != nil {
			return out
		}
		out = append(out, b)
		if strings.HasSuffix(string(out), eofMarker) {
			return out[:len(out)-len(eofMarker)]
		}
	}
}

func (f *fakeEngine) ContainerExecInspect(ctx context.Context, id string) (container.ExecInspect, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	code, ended := f.exits[id]
	return container.ExecInspect{ExecID: id, Running: !ended, ExitCode: code, Pid: 4242}, nil
}

func (f *fakeEngine) ContainerCreate(ctx context.Context, cfg *container.Config, hc *container.HostConfig, _ *network.NetworkingConfig, _ *ocispec.Platform, name string) (container.CreateResponse, error) {
	if name == "" && f.seederCreate != nil {
		f.seederCreate()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if name == "" {
		f.calls = append(f.calls, "CreateSeeder")
		for _, m := range hc.Mounts {
			f.volumes[m.Source] = true
		}
		return container.CreateResponse{ID: "seeder"}, nil
	}
	f.calls = append(f.calls, "Create")
	if f.createErr != nil {
		err := f.createErr
		f.createErr = nil
		return container.CreateResponse{}, err
	}
	if _, ok := f.containers[name]; ok {
		return container.CreateResponse{}, cerrdefs.ErrConflict.WithMessage("name in use")
	}
	f.containers[name] = cfg
	if f.podman && f.podmanDrop != nil {
		c := *hc
		f.podmanDrop(&c)
		hc = &c
	}
	f.hostcfg[name] = hc
	return container.CreateResponse{ID: name + "-0123456789abcdef", Warnings: f.createWarnings}, nil
}

func (f *fakeEngine) ContainerAttach(ctx context.Context, id string, _ container.AttachOptions) (types.HijackedResponse, error) {
	f.call("Attach")
	if f.attach == nil {
		return types.HijackedResponse{}, errors.New("attach refused")
	}
	client, server := net.Pipe()
	go func() {
		defer server.Close()
		f.attach(server)
	}()
	return types.NewHijackedResponse(client, ""), nil
}

func (f *fakeEngine) ContainerStart(ctx context.Context, id string, _ container.StartOptions) error {
	if id == "seeder" {
		f.call("StartSeeder")
		return nil
	}
	f.call("Start")
	f.mu.Lock()
	defer f.mu.Unlock()
	name := strings.TrimSuffix(id, "-0123456789abcdef")
	if _, ok := f.containers[name]; !ok {
		return errNotFound
	}
	f.running[name] = true
	return nil
}

func (f *fakeEngine) ContainerRemove(ctx context.Context, id string, _ container.RemoveOptions) error {
	if id == "seeder" {
		f.call("RemoveSeeder")
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.seederRemoveErr
	}
	f.call("Remove")
	f.mu.Lock()
	defer f.mu.Unlock()
	id = strings.TrimSuffix(id, "-0123456789abcdef")
	if _, ok := f.containers[id]; !ok {
		return errNotFound
	}
	delete(f.containers, id)
	delete(f.running, id)
	return nil
}

func (f *fakeEngine) ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := strings.TrimSuffix(id, "-0123456789abcdef")
	if _, ok := f.containers[name]; !ok {
		return container.InspectResponse{}, errNotFound
	}
	c := container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: name + "-0123456789abcdef"}}
	// The engine reports the runtime a container got: its default one
	// when the create named none.
	rt := f.defaultRuntime
	if hc := f.hostcfg[name]; hc != nil && hc.Runtime != "" {
		rt = hc.Runtime
	}
	if rt == "" {
		rt = "runc"
	}
	c.HostConfig = &container.HostConfig{Runtime: rt}
	if f.podman {
		hc := *f.hostcfg[name]
		hc.Runtime = rt
		c.HostConfig, c.Config = &hc, f.containers[name]
	}
	return c, nil
}

func (f *fakeEngine) ContainerList(ctx context.Context, o container.ListOptions) ([]container.Summary, error) {
	return nil, nil
}

// ImageInspect: the images in f.images; any other is not found (Images,
// the fakeImages, answers for it then).
func (f *fakeEngine) ImageInspect(ctx context.Context, ref string, _ ...client.ImageInspectOption) (image.InspectResponse, error) {
	f.call("ImageInspect " + ref)
	f.mu.Lock()
	defer f.mu.Unlock()
	if img, ok := f.images[ref]; ok {
		return img, nil
	}
	return image.InspectResponse{}, cerrdefs.ErrNotFound.WithMessage("No such image: " + ref)
}

// settledCalls checks that the seeder's removal (which runs in the
// background while the sandbox is created and started) came after the
// seeder's creation and before the first exec that follows, and returns
// the calls without it and without the image inspects of preflight.
func settledCalls(t *testing.T, calls []string) []string {
	t.Helper()
	var out []string
	seeder, removed := -1, -1
	for i, c := range calls {
		switch {
		case c == "CreateSeeder":
			seeder = i
		case c == "RemoveSeeder":
			if seeder < 0 || removed >= 0 {
				t.Fatalf("the seeder's removal out of place: %v", calls)
			}
			removed = i
			continue
		case c == "ExecCreate" && seeder >= 0 && removed < 0:
			t.Fatalf("an exec before the seeder's removal: %v", calls)
		case strings.HasPrefix(c, "ImageInspect "):
			continue
		}
		out = append(out, c)
	}
	if seeder >= 0 && removed < 0 {
		t.Fatalf("the seeder was not removed: %v", calls)
	}
	return out
}

func (f *fakeEngine) VolumeInspect(ctx context.Context, v string) (volume.Volume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.volumes[v] {
		return volume.Volume{}, cerrdefs.ErrNotFound.WithMessage("no such volume")
	}
	if l, ok := f.volLabels[v]; ok {
		return volume.Volume{Name: v, Labels: l}, nil
	}
	return volume.Volume{Name: v, Labels: ownVolumeLabels(v)}, nil
}

// ownVolumeLabels are the labels the plugin gives the volume named v.
func ownVolumeLabels(v string) map[string]string {
	if isHelperVolumeName(v) {
		return core.BaseLabels(core.KindHelper)
	}
	t, kind, ok := core.ParseVolumeName(v)
	if !ok {
		return nil
	}
	l := core.BaseLabels(kind)
	l[core.LabelScope] = t.Scope
	if t.Session != "" {
		l[core.LabelSession] = t.Session
	}
	return l
}

func (f *fakeEngine) VolumeList(ctx context.Context, o volume.ListOptions) (volume.ListResponse, error) {
	return volume.ListResponse{}, nil
}

func (f *fakeEngine) VolumeRemove(ctx context.Context, v string, force bool) error {
	f.call(fmt.Sprintf("VolumeRemove %s force=%v", v, force))
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.volumeRemoveErr != nil {
		return f.volumeRemoveErr
	}
	delete(f.volumes, v)
	return nil
}

func (f *fakeEngine) Info(ctx context.Context) (system.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	info := system.Info{Runtimes: f.runtimes, MemoryLimit: true, SwapLimit: true, PidsLimit: true, CPUCfsQuota: true, CgroupVersion: "1", CgroupDriver: "cgroupfs"}
	if f.info != nil {
		f.info(&info)
	}
	return info, nil
}

type fakeImages struct {
	img image.InspectResponse
	err error
}

func (fi fakeImages) EnsureImage(ctx context.Context, ref string) (image.InspectResponse, error) {
	return fi.img, fi.err
}

func (fi fakeImages) EnsureHelper(ctx context.Context, arch string, readable bool) (string, string, error) {
	return "helper:1", "docker-sandbox.helper.vol-" + arch, nil
}

func testSpec() Spec {
	return Spec{Target: core.Target{Scope: "u1", Session: "s"}, Settings: core.Settings{Image: "rt:1", Network: "none", Memory: 1 << 30, CPUs: 1, Pids: 256,
		Nofile: 1024, TmpSize: 512 << 20, IdleTTL: 10 * time.Minute}, HelperID: "h", Version: "0.1.0"}
}

func TestRunCreatesThenReuses(t *testing.T) {
	f := newFake()
	f.helper = func(cmd []string, code, stdin []byte) (string, string, wire.RunStatus) {
		return "code=" + string(code) + " stdin=" + string(stdin), "last-arg=" + cmd[len(cmd)-1], wire.RunStatus{ExitCode: 7}
	}
	m := &Manager{Engine: f, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64", Os: "linux"}}, Version: "0.1.0"}
	var out, errb strings.Builder
	req := Request{Lang: languages["python"], Code: []byte("print(1)"), Args: []string{"x"}, Workdir: core.WorkspaceDir,
		Timeout: time.Second, MaxOutput: 100, Stdin: strings.NewReader("in"), Stdout: &out, Stderr: &errb}
	res, err := m.Run(context.Background(), testSpec(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || res.Status.ExitCode != 7 || out.String() != "code=print(1) stdin=in" || errb.String() != "last-arg=x" {
		t.Fatalf("res %+v out %q err %q", res, out.String(), errb.String())
	}
	want := []string{"CreateSeeder", "Create", "Start", "ExecCreate", "ExecAttach"}
	if diff := cmp.Diff(want, settledCalls(t, f.calls)); diff != "" {
		t.Fatalf("first call (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"docker-sandbox-u1.user", "docker-sandbox-u1.s.ws"}, res.FreshVolumes); diff != "" {
		t.Fatalf("fresh volumes: %s", diff)
	}
	// Warm: exactly two round trips.
	f.calls = nil
	out.Reset()
	req.Stdin = strings.NewReader("in")
	res, err = m.Run(context.Background(), testSpec(), req)
	if err != nil || res.Created {
		t.Fatal(err, res)
	}
	if diff := cmp.Diff([]string{"ExecCreate", "ExecAttach"}, f.calls); diff != "" {
		t.Fatalf("warm call (-want +got):\n%s", diff)
	}
}

// The engine refuses to start an exec after the attach (a stop or rm won
// the race) by writing its reason into the stream: nothing ran, so the call
// runs again; any other reason is an engine error that names it.
func TestRunExecStartRefused(t *testing.T) {
	f := newFake()
	f.helper = func([]string, []byte, []byte) (string, string, wire.RunStatus) { return "ran", "", wire.RunStatus{} }
	f.containers["docker-sandbox-u1.s"] = &container.Config{}
	f.running["docker-sandbox-u1.s"] = true
	m := &Manager{Engine: f, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64"}}, Version: "0.1.0"}
	req := func(out io.Writer) Request {
		return Request{Lang: languages["sh"], Code: []byte("echo"), Workdir: core.WorkspaceDir, Timeout: time.Second, MaxOutput: 10, Stdout: out}
	}

	var out strings.Builder
	// The reasons seen from dockerd when an rm won: the container
	// stopped, removed with its execs, or its task gone.
	for _, reason := range []string{"cannot exec in a stopped container: unknown", "No such exec instance: c18f96d25230", "task 68dbf9415566 not found: not found"} {
		f.startErrs = []string{reason}
		f.calls = nil
		out.Reset()
		if _, err := m.Run(context.Background(), testSpec(), req(&out)); err != nil || out.String() != "ran" {
			t.Fatalf("after a refused start (%s): %v, out %q, calls %v", reason, err, out.String(), f.calls)
		}
		if n := strings.Count(strings.Join(f.calls, " "), "ExecAttach"); n != 2 {
			t.Fatalf("%d exec starts, want 2 (refused, then ran): %v", n, f.calls)
		}
	}

	// A run the helper refuses while a stop/rm drains the sandbox: tried
	// again, and the program still gets the whole of its stdin.
	f.drains = 1
	f.helper = func(_ []string, _, stdin []byte) (string, string, wire.RunStatus) {
		return "stdin=" + string(stdin), "", wire.RunStatus{}
	}
	out.Reset()
	r := req(&out)
	r.Stdin = strings.NewReader("all of it")
	if _, err := m.Run(context.Background(), testSpec(), r); err != nil || out.String() != "stdin=all of it" {
		t.Fatalf("after a draining refusal: %v, out %q", err, out.String())
	}

	f.startErrs = []string{`OCI runtime exec failed: exec failed: unable to start container process: exec: "/x": permission denied: unknown`}
	out.Reset()
	_, err := m.Run(context.Background(), testSpec(), req(&out))
	var e *core.Error
	if !errors.As(err, &e) || e.Code != core.CodeEngineError || !strings.Contains(e.Message, "permission denied") || out.Len() != 0 {
		t.Fatalf("other reason: %v (out %q)", err, out.String())
	}

	// A container that has the name but not the helper or the working
	// directory is not a sandbox: refused at once, never waited for.
	for _, reason := range []string{
		`OCI runtime exec failed: exec failed: unable to start container process: chdir to cwd ("/opt/workspace") set in config.json failed: no such file or directory: unknown`,
		`OCI runtime exec failed: exec failed: unable to start container process: exec: "/opt/sandbox/sandbox-helper": stat /opt/sandbox/sandbox-helper: no such file or directory: unknown`,
	} {
		f.startErrs = []string{reason}
		f.calls = nil
		out.Reset()
		_, err = m.Run(context.Background(), testSpec(), req(&out))
		if !errors.As(err, &e) || e.Code != core.CodeNotSandbox || out.Len() != 0 {
			t.Fatalf("a look-alike (%s): %v (out %q)", reason, err, out.String())
		}
		if n := strings.Count(strings.Join(f.calls, " "), "ExecAttach"); n != 1 {
			t.Fatalf("%d exec starts on a look-alike, want 1: %v", n, f.calls)
		}
	}
}

func TestRunLosesCreateRace(t *testing.T) {
	f := newFake()
	f.helper = func([]string, []byte, []byte) (string, string, wire.RunStatus) { return "ok", "", wire.RunStatus{} }
	// Another call creates the container between our exec create and our
	// create: the fake engine makes the winner's container appear (created,
	// not started) exactly when our create arrives, and refuses it.
	e := &lcLoseCreate{fakeEngine: f}
	m := &Manager{Engine: e, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64"}}, Version: "0.1.0"}
	var out strings.Builder
	res, err := m.Run(context.Background(), testSpec(), Request{Lang: languages["sh"], Workdir: core.WorkspaceDir, Timeout: time.Second, MaxOutput: 10, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "ok" || res.Created {
		t.Fatalf("out %q res %+v calls %v", out.String(), res, f.calls)
	}
	// The branch was taken: our create lost, no second create was tried,
	// and the program ran in the winner's container, which this call
	// started (it was not running yet).
	lost, creates, startAfter := -1, 0, false
	for i, c := range f.calls {
		switch {
		case c == "Create lost":
			lost = i
		case c == "Create":
			creates++
		case c == "Start" && lost >= 0:
			startAfter = true
		}
	}
	if lost < 0 || creates != 0 || !startAfter || f.calls[len(f.calls)-1] != "ExecAttach" || !f.running["docker-sandbox-u1.s"] {
		t.Fatalf("calls %v: want our create lost, no other create, the winner's container started, then the exec", f.calls)
	}
}

func TestRunCreateFailureRemovesFreshVolumes(t *testing.T) {
	f := newFake()
	f.createErr = errors.New("Minimum memory limit allowed is 6MB")
	m := &Manager{Engine: f, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64"}}, Version: "0.1.0"}
	_, err := m.Run(context.Background(), testSpec(), Request{Lang: languages["sh"], Workdir: core.WorkspaceDir, Timeout: time.Second, MaxOutput: 10})
	if err == nil || core.AsError(err).Exit != 125 {
		t.Fatalf("err %v", err)
	}
	for _, v := range []string{"docker-sandbox-u1.user", "docker-sandbox-u1.s.ws"} {
		if f.volumes[v] {
			t.Errorf("volume %s left behind", v)
		}
	}
	if !f.volumes["docker-sandbox.helper.vol-amd64"] {
		t.Errorf("the shared helper volume should stay")
	}
}

func TestRunRefusesMissingRuntime(t *testing.T) {
	f := newFake()
	m := &Manager{Engine: f, Images: fakeImages{}, Version: "0.1.0"}
	spec := testSpec()
	spec.Runtime = "runsc"
	_, err := m.Run(context.Background(), spec, Request{Lang: languages["sh"], Timeout: time.Second, MaxOutput: 1})
	e := core.AsError(err)
	if e.Code != core.CodeRuntimeUnavailable || !strings.Contains(e.Message, "runc") || e.Exit != 125 {
		t.Fatalf("%+v", e)
	}
	for _, c := range f.calls {
		if strings.HasPrefix(c, "Create") {
			t.Fatalf("created something: %v", f.calls)
		}
	}
}

// Under a runtime other than the engine's default (gVisor), other code of
// the sandbox can write into a run's output stream. Whatever it writes, the
// run never reports a status the wrapper did not send: a forged whole
// Status is read past (the engine's exit code of the wrapper decides), and
// a stream whose framing it broke ends with stream_tampered, never with
// the forged exit code. Under runc, where nothing can write there, a
// stream that carries a non-JSON status is an internal error, as before.
func TestRunTamperedStream(t *testing.T) {
	frame := func(typ byte, p string) []byte {
		var b bytes.Buffer
		_ = wire.NewFrameWriter(&b).WriteFrame(typ, []byte(p))
		return b.Bytes()
	}
	forged := frame(wire.Status, `{"exit_code":0}`)
	cases := []struct {
		name     string
		runtime  string
		tamper   []byte
		first    bool   // written before the wrapper's first frame
		wantCode string // "" for the wrapper's own result
	}{
		{"a header before the wrapper's first frame", "runsc", []byte{wire.Stdout, 0, 0, 0, 0, 0, 0x10, 0}, true, core.CodeStreamTampered},
		{"a forged status before the wrapper's first frame", "runsc", forged, true, ""},
		{"no tampering", "runsc", nil, false, ""},
		{"a forged whole status", "runsc", forged, false, ""},
		{"a forged status that is not JSON", "runsc", frame(wire.Status, "exit 0"), false, ""},
		{"forged output frames and status", "runsc", append(frame(wire.Stdout, "forged\n"), forged...), false, ""},
		{"a header that swallows the wrapper's frames", "runsc", []byte{wire.Stdout, 0, 0, 0, 0, 0, 0x10, 0}, false, core.CodeStreamTampered},
		{"a header of no frame type", "runsc", []byte{9, 9, 9, 9, 0, 0, 0, 1}, false, core.CodeStreamTampered},
		{"half a header", "runsc", []byte{wire.Status, 0, 0}, false, core.CodeStreamTampered},
		{"a status that is not JSON under runc", "", frame(wire.Status, "exit 0"), false, core.CodeInternal},
		// No runtime asked for, on an engine whose default is gVisor: the
		// container says so, and the run gets the same checks.
		{"default runtime runsc: a forged whole status", "default:runsc", forged, false, ""},
		{"default runtime runsc: a forged status before the first frame", "default:runsc", forged, true, ""},
		{"default runtime runsc: a header that swallows the wrapper's frames", "default:runsc", []byte{wire.Stdout, 0, 0, 0, 0, 0, 0x10, 0}, false, core.CodeStreamTampered},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.runtimes["runsc"] = system.RuntimeWithStatus{}
			f.tamper, f.tamperFirst, f.noStdin = tc.tamper, tc.first, true
			f.helper = func([]string, []byte, []byte) (string, string, wire.RunStatus) {
				return "victim\n", "", wire.RunStatus{ExitCode: 7}
			}
			m := &Manager{Engine: f, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64", Os: "linux"}}, Version: "0.1.0"}
			spec := testSpec()
			spec.Runtime = tc.runtime
			if d, ok := strings.CutPrefix(tc.runtime, "default:"); ok {
				spec.Runtime, f.defaultRuntime = "", d
			}
			var out strings.Builder
			res, err := m.Run(context.Background(), spec, Request{Lang: languages["sh"], Code: []byte("echo victim; exit 7"),
				Timeout: 5 * time.Second, MaxOutput: 1 << 20, Stdout: &out})
			if tc.wantCode == "" {
				if err != nil || res.Status.ExitCode != 7 || !strings.HasSuffix(out.String(), "victim\n") {
					t.Fatalf("err %v, status %+v, stdout %q: want the wrapper's exit 7 and output", err, res.Status, out.String())
				}
				return
			}
			e := core.AsError(err)
			if e == nil || e.Code != tc.wantCode || e.Exit != 125 {
				t.Fatalf("err %+v, status %+v: want %s", err, res.Status, tc.wantCode)
			}
			if res.Status.ExitCode == 0 && err == nil {
				t.Fatalf("the forged status was reported")
			}
			if tc.name == "a header that swallows the wrapper's frames" && !strings.Contains(e.Message, "exited with 7") {
				t.Errorf("message does not name the engine's exit code of the wrapper: %s", e.Message)
			}
		})
	}
}

// The code sent is the code that runs: the helper gets its SHA-256 on the
// command line, and a code that does not match it (other code of the
// sandbox wrote into the run's stdin) ends the call with stream_tampered.
func TestRunCodeSum(t *testing.T) {
	f := newFake()
	var cmds [][]string
	f.helper = func(cmd []string, code, _ []byte) (string, string, wire.RunStatus) {
		cmds = append(cmds, cmd)
		return string(code), "", wire.RunStatus{}
	}
	m := &Manager{Engine: f, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64", Os: "linux"}}, Version: "0.1.0"}
	var out strings.Builder
	if _, err := m.Run(context.Background(), testSpec(), Request{Lang: languages["sh"], Code: []byte("echo hi"), Timeout: time.Second, MaxOutput: 100, Stdout: &out}); err != nil || out.String() != "echo hi" {
		t.Fatalf("err %v, out %q", err, out.String())
	}
	a, err := wire.ParseRunArgs(cmds[0][2:])
	if sum := sha256.Sum256([]byte("echo hi")); err != nil || a.CodeSum != hex.EncodeToString(sum[:]) {
		t.Fatalf("code sum %q (%v)", a.CodeSum, err)
	}
	// Another run writes into this run's stdin before the wrapper read
	// its code: the code the helper gets is not the one sent.
	f.injectCode = []byte("rm -rf ~")
	cmds = nil
	_, err = m.Run(context.Background(), testSpec(), Request{Lang: languages["sh"], Code: []byte("echo hi"), Timeout: time.Second, MaxOutput: 100})
	if e := core.AsError(err); e == nil || e.Code != core.CodeStreamTampered || e.Exit != 125 || !strings.Contains(e.Message, "not the code the plugin sent") {
		t.Fatalf("%+v", err)
	}
	if len(cmds) != 0 {
		t.Fatalf("the injected code ran: %q", cmds)
	}
}

// An engine that cannot enforce a limit every sandbox has (rootless Docker
// on cgroup v1 reports no memory, swap, pids or CPU limits), or that
// created the container and said it discarded a setting, gets no sandbox:
// engine_unsupported, exit 125, no container and no volume left, nothing
// ran.
func TestRunRefusesEngineWithoutLimits(t *testing.T) {
	for _, tc := range []struct {
		name     string
		info     func(*system.Info)
		warnings []string
		want     string
	}{
		{"no memory limit", func(i *system.Info) { i.MemoryLimit = false }, nil, "memory (--memory)"},
		{"no swap limit", func(i *system.Info) { i.SwapLimit = false }, nil, "swap"},
		{"no pids limit", func(i *system.Info) { i.PidsLimit = false }, nil, "process count (--pids)"},
		{"no CPU quota", func(i *system.Info) { i.CPUCfsQuota = false }, nil, "CPU (--cpus)"},
		{"rootless on cgroup v1", func(i *system.Info) {
			*i = system.Info{Runtimes: i.Runtimes, CgroupVersion: "1", CgroupDriver: "none", SecurityOptions: []string{"name=seccomp,profile=default", "name=rootless"}}
		}, nil, "memory (--memory), swap (the memory limit includes swap), process count (--pids), CPU (--cpus) limits (docker info: cgroup 1, driver none, rootless)"},
		{"a limit discarded at create", nil, []string{"Your kernel does not support memory limit capabilities or the cgroup is not mounted. Limitation discarded."}, "Limitation discarded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.info, f.createWarnings = tc.info, tc.warnings
			ran := false
			f.helper = func([]string, []byte, []byte) (string, string, wire.RunStatus) {
				ran = true
				return "", "", wire.RunStatus{}
			}
			m := &Manager{Engine: f, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64", Os: "linux"}}, Version: "0.1.0"}
			_, err := m.Run(context.Background(), testSpec(), Request{Lang: languages["sh"], Code: []byte("true"), Timeout: time.Second, MaxOutput: 1})
			e := core.AsError(err)
			if e == nil || e.Code != core.CodeEngineUnsupported || e.Exit != 125 || !strings.Contains(e.Message, tc.want) {
				t.Fatalf("err %+v, want engine_unsupported naming %q", err, tc.want)
			}
			delete(f.volumes, "docker-sandbox.helper.vol-amd64") // shared by every sandbox, kept as after any failed create
			if ran || len(f.containers) != 0 || len(f.volumes) != 0 {
				t.Fatalf("left behind: ran %v, containers %v, volumes %v", ran, f.containers, f.volumes)
			}
		})
	}
}

func TestRunSpecMismatch(t *testing.T) {
	f := newFake()
	f.containers["docker-sandbox-u1.s"] = &container.Config{}
	f.running["docker-sandbox-u1.s"] = true
	f.helper = func([]string, []byte, []byte) (string, string, wire.RunStatus) {
		return "", "", wire.RunStatus{ExitCode: 125, ErrorCode: wire.ErrSpecMismatch}
	}
	m := &Manager{Engine: f, Images: fakeImages{}, Version: "0.1.0"}
	_, err := m.Run(context.Background(), testSpec(), Request{Lang: languages["sh"], Timeout: time.Second, MaxOutput: 1})
	if e := core.AsError(err); e.Code != core.CodeSandboxMismatch || !strings.Contains(e.Message, "docker sandbox stop u1/s") {
		t.Fatalf("%+v", e)
	}
}

func TestCheckImage(t *testing.T) {
	for wd, bad := range map[string]bool{"/proc/self/cwd": true, "/proc": true, "/sys/x": true, "/dev": true, "/app": false, "": false, "/procx": false} {
		err := CheckImage("i", image.InspectResponse{Config: &dockerspec.DockerOCIImageConfig{ImageConfig: ocispec.ImageConfig{WorkingDir: wd}}, Os: "linux"})
		if (err != nil) != bad {
			t.Errorf("WORKDIR %q: %v", wd, err)
		}
	}
}

func TestContainerConfigHardening(t *testing.T) {
	cfg, hc := testSpec().ContainerConfig()
	if cfg.User != "65532:65532" || cfg.WorkingDir != core.WorkspaceDir || cfg.Entrypoint[0] != core.HelperPath || len(cfg.Cmd) != 0 {
		t.Errorf("config %+v", cfg)
	}
	pids := int64(256)
	want := container.Resources{Memory: 1 << 30, MemorySwap: 1 << 30, NanoCPUs: 1e9, PidsLimit: &pids,
		Ulimits: []*container.Ulimit{{Name: "nofile", Soft: 1024, Hard: 1024}}}
	if diff := cmp.Diff(want, hc.Resources); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if !hc.ReadonlyRootfs || hc.Privileged || !cmp.Equal([]string(hc.CapDrop), []string{"ALL"}) || len(hc.CapAdd) != 0 ||
		!cmp.Equal(hc.SecurityOpt, []string{"no-new-privileges"}) || hc.NetworkMode != "none" || hc.IpcMode != "private" ||
		hc.RestartPolicy.Name != container.RestartPolicyDisabled || len(hc.PortBindings) != 0 || hc.PublishAllPorts || len(hc.Binds) != 0 {
		t.Errorf("host config %+v", hc)
	}
	if hc.Tmpfs["/tmp"] != "rw,nosuid,nodev,noexec,size=536870912,mode=1777" {
		t.Errorf("tmpfs %q", hc.Tmpfs["/tmp"])
	}
	for _, m := range hc.Mounts {
		if m.Type != mount.TypeVolume {
			t.Errorf("mount %+v is not a volume", m)
		}
		if m.Target == core.HelperDir && !m.ReadOnly {
			t.Errorf("helper mount is writable")
		}
	}
}

func TestSpecHashCoversSettings(t *testing.T) {
	base := testSpec()
	seen := map[string]bool{base.Hash(): true}
	for _, mod := range []func(*Spec){
		func(s *Spec) { s.Image = "other" }, func(s *Spec) { s.Memory++ }, func(s *Spec) { s.CPUs = 2 },
		func(s *Spec) { s.Pids++ }, func(s *Spec) { s.Runtime = "runsc" }, func(s *Spec) { s.IdleTTL = 0 },
		func(s *Spec) { s.HelperID = "x" }, func(s *Spec) { s.Network = "proxy" }, func(s *Spec) { s.TmpSize++ },
	} {
		s := testSpec()
		mod(&s)
		if seen[s.Hash()] {
			t.Errorf("a settings change did not change the hash: %+v", s)
		}
		seen[s.Hash()] = true
	}
	other := testSpec()
	other.Target = core.Target{Scope: "zz"}
	if other.Hash() != base.Hash() {
		t.Error("the hash must not depend on the target")
	}
}

func TestPreambleWriter(t *testing.T) {
	pre := "\x00docker-sandbox-fs\n"
	cases := []struct {
		name    string
		writes  []string
		out     string
		foreign bool
	}{
		{"whole", []string{pre + "data"}, "data", false},
		{"split", []string{pre[:3], pre[3:10], pre[10:] + "da", "ta"}, "data", false},
		{"nothing", nil, "", false},
		{"preamble only", []string{pre}, "", false},
		{"engine text", []string{"OCI runtime exec failed: no such file or directory\n"}, "", true},
		{"a prefix, then other", []string{"\x00dock", "er-something else"}, "", true},
		{"a prefix only", []string{"\x00dock"}, "", true},
	}
	for _, c := range cases {
		var out bytes.Buffer
		p := &preambleWriter{want: []byte(pre), dst: &out}
		for _, w := range c.writes {
			if n, err := p.Write([]byte(w)); err != nil || n != len(w) {
				t.Fatalf("%s: Write = %d, %v", c.name, n, err)
			}
		}
		if out.String() != c.out || p.foreign() != c.foreign {
			t.Errorf("%s: passed %q foreign %v, want %q %v", c.name, out.String(), p.foreign(), c.out, c.foreign)
		}
	}
}

func TestExecOnlyRuntime(t *testing.T) {
	info := system.Info{DefaultRuntime: "runc", Runtimes: map[string]system.RuntimeWithStatus{
		"runc":                  {Runtime: system.Runtime{Path: "runc"}},
		"io.containerd.runc.v2": {Runtime: system.Runtime{Path: "runc"}},
		"crun":                  {Runtime: system.Runtime{Path: "/usr/bin/crun"}},
		"runsc":                 {Runtime: system.Runtime{Path: "/usr/bin/runsc"}},
		"kata":                  {Runtime: system.Runtime{Path: "/usr/bin/kata-runtime"}},
	}}
	for rt, want := range map[string]bool{"": true, "runc": true, "io.containerd.runc.v2": true, "crun": true, "runsc": false, "kata": false, "missing": false} {
		if got := ExecOnlyRuntime(info, rt); got != want {
			t.Errorf("ExecOnlyRuntime(%q) = %v, want %v", rt, got, want)
		}
	}
	info.DefaultRuntime = "runsc"
	if ExecOnlyRuntime(info, "") {
		t.Error("the default runtime runsc: execute-only")
	}
}

// RemoveCreated (exec --rm) removes the container and the volumes the run
// created, and nothing of a sandbox the run joined.
func TestRemoveCreated(t *testing.T) {
	f := newFake()
	f.helper = func(cmd []string, code, stdin []byte) (string, string, wire.RunStatus) {
		return "", "", wire.RunStatus{}
	}
	m := &Manager{Engine: f, Images: fakeImages{img: image.InspectResponse{Architecture: "amd64", Os: "linux"}}, Version: "0.1.0"}
	req := Request{Lang: languages["sh"], Workdir: core.WorkspaceDir, Timeout: time.Second, MaxOutput: 10}
	spec := testSpec()

	// A sandbox that existed before the run (made by a first run) stays.
	first, err := m.Run(context.Background(), spec, req)
	if err != nil || !first.Created {
		t.Fatal(err, first)
	}
	joined, err := m.Run(context.Background(), spec, req)
	if err != nil || joined.Created {
		t.Fatal(err, joined)
	}
	f.calls = nil
	if removed, err := m.RemoveCreated(context.Background(), spec.Target, joined); removed || err != nil || len(f.calls) != 0 {
		t.Fatalf("joined sandbox: removed %v, err %v, calls %q", removed, err, f.calls)
	}
	if f.containers[spec.ContainerName()] == nil {
		t.Fatal("the joined sandbox's container was removed")
	}

	// The run that created it removes its container and its volumes.
	removed, err := m.RemoveCreated(context.Background(), spec.Target, first)
	if !removed || err != nil {
		t.Fatalf("removed %v, err %v", removed, err)
	}
	want := []string{"Remove", "VolumeRemove docker-sandbox-u1.user force=true", "VolumeRemove docker-sandbox-u1.s.ws force=true"}
	if d := cmp.Diff(want, f.calls); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
	if f.containers[spec.ContainerName()] != nil || f.volumes["docker-sandbox-u1.user"] || f.volumes["docker-sandbox-u1.s.ws"] {
		t.Errorf("left: containers %v volumes %v", f.containers, f.volumes)
	}
	if !f.volumes["docker-sandbox.helper.vol-amd64"] {
		t.Error("the shared helper volume should stay")
	}

	// A volume that cannot be removed is an error naming it; every volume is tried.
	f.calls = nil
	f.volumeRemoveErr = errors.New("volume is in use")
	removed, err = m.RemoveCreated(context.Background(), spec.Target, Result{FreshVolumes: []string{"a", "b"}})
	if removed || err == nil || !strings.Contains(err.Error(), "cannot remove volume a") {
		t.Errorf("removed %v, err %v", removed, err)
	}
	if d := cmp.Diff([]string{"VolumeRemove a force=true", "VolumeRemove b force=true"}, f.calls); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
}
