package plugin_test

// The engine's host is never reachable through the proxy (issue 8 item 4):
// listeners on the engine's host, bound to the gateway address of the
// default bridge, of a network made before the sidecar and of networks
// made after it started (one before an exec, one while an exec runs),
// see no connection, whatever the scope's policy says. Only loopback, the
// engine's own gateways and the test's own networks and containers are
// ever aimed at.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/pkg/stdcopy"
)

// hostListener records every connection it accepts.
type hostListener struct {
	l     net.Listener
	mu    sync.Mutex
	peers []string
}

func egListen(t *testing.T, ip string, port int) *hostListener {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
	if err != nil {
		t.Fatalf("listening on the engine's host at %s:%d: %v", ip, port, err)
	}
	h := &hostListener{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.peers = append(h.peers, c.RemoteAddr().String())
			h.mu.Unlock()
			_, _ = c.Write([]byte("HTTP/1.0 200 OK\r\n\r\nengine host\n"))
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return h
}

func (h *hostListener) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.peers...)
}

// egGateway is the engine host's address on a network: its gateway, or
// the first address of its subnet when none is recorded (the default
// bridge on API 1.41).
func egGateway(t *testing.T, name string) (string, netip.Prefix) {
	t.Helper()
	n, err := engine(t).NetworkInspect(context.Background(), name, network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.IPAM.Config {
		p, err := netip.ParsePrefix(c.Subnet)
		if err != nil || !p.Addr().Is4() {
			continue
		}
		if c.Gateway != "" {
			return c.Gateway, p
		}
		return p.Masked().Addr().Next().String(), p
	}
	t.Fatalf("network %s has no IPv4 subnet", name)
	return "", netip.Prefix{}
}

// egNetwork makes a plain bridge network of the test's, removed at the end.
func egNetwork(t *testing.T, what string) string {
	t.Helper()
	name := "docker-sandbox-eg-" + what + "-" + randID(4)
	if _, err := engine(t).NetworkCreate(context.Background(), name, network.CreateOptions{Driver: "bridge", Labels: egLabels(what)}); err != nil {
		t.Fatalf("creating network %s: %v", name, err)
	}
	t.Cleanup(func() { _ = engine(t).NetworkRemove(context.Background(), name) })
	return name
}

// egReset removes a sidecar a test left (and refuses to touch one that a
// test did not make), and registers the removal of the one this test
// starts, with its volume.
func egReset(t *testing.T) {
	t.Helper()
	if c, err := engine(t).ContainerInspect(context.Background(), egSidecar); err == nil {
		if c.Config.Labels["com.docker.sandbox.test-run"] == "" {
			t.Fatalf("an egress sidecar not made by a test runs on this engine: the egress tests would replace it")
		}
		wantCode(t, sb(t, "egress", "stop", "--rm"), 0)
	}
	t.Cleanup(func() {
		if r := sb(t, "egress", "stop", "--rm"); r.Code != 0 {
			t.Logf("egress stop --rm: %s", r)
		}
		vs, _ := engine(t).VolumeList(context.Background(), volume.ListOptions{Filters: filters.NewArgs(filters.Arg("name", "docker-sandbox.egress-data"))})
		for _, v := range vs.Volumes {
			if v.Name == "docker-sandbox.egress-data" && v.Labels["com.docker.sandbox.test-run"] != "" {
				_ = engine(t).VolumeRemove(context.Background(), v.Name, true)
			}
		}
	})
}

// egRunIn runs busybox COMMAND in the network namespace of a container and
// returns its output.
func egRunIn(t *testing.T, ctr string, cmd ...string) string {
	t.Helper()
	needBusybox(t)
	ctx := context.Background()
	cli := engine(t)
	resp, err := cli.ContainerCreate(ctx, &container.Config{Image: busybox, Cmd: cmd, Labels: egLabels("probe"), User: "65532:65532"},
		&container.HostConfig{NetworkMode: container.NetworkMode("container:" + ctr), CapDrop: []string{"ALL"}}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.ContainerRemove(context.Background(), resp.ID, container.RemoveOptions{Force: true}) }()
	if err := cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	wc, errc := cli.ContainerWait(ctx, resp.ID, container.WaitConditionNotRunning)
	select {
	case <-wc:
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(time.Minute):
		t.Fatal("busybox did not finish")
	}
	rc, err := cli.ContainerLogs(ctx, resp.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out bytes.Buffer
	_, _ = stdcopy.StdCopy(&out, &out, rc)
	return out.String()
}

func TestEgressEngineHost(t *testing.T) {
	needE2E(t)
	egReset(t)
	ctx := context.Background()

	// (a) the default bridge, (b) the sidecar's outbound network, made
	// before it: a plain bridge, so that the sidecar routes to the
	// engine's host through it (its next hop).
	outNet := egNetwork(t, "hostout")
	r := sb(t, "egress", "start", "--outbound-network", outNet, "--no-dns", "--replace")
	wantCode(t, r, 0)
	sidecar, err := engine(t).ContainerInspect(ctx, egSidecar)
	if err != nil {
		t.Fatal(err)
	}

	// Listeners on the engine's host, one port for all of them.
	bridgeGW, bridgeSub := egGateway(t, "bridge")
	outGW, outSub := egGateway(t, outNet)
	first := egListen(t, bridgeGW, 0)
	port := first.l.Addr().(*net.TCPAddr).Port
	listeners := map[string]*hostListener{"bridge": first, "outbound": egListen(t, outGW, port)}
	targets := map[string]string{"bridge": bridgeGW, "outbound": outGW}

	s := newScope(t)
	policyArgs := func(subs ...netip.Prefix) []string {
		a := []string{"-s", s, "--allow", "*", "--allow-port", fmt.Sprint(port), "--allow-port", "443", "--allow-cidr", "0.0.0.0/0"}
		for _, p := range subs {
			a = append(a, "--allow-cidr", p.String())
		}
		return a
	}
	probe := func(names ...string) string {
		var b strings.Builder
		for _, n := range names {
			ip := targets[n]
			fmt.Fprintf(&b, "R[%q] = connect(\"%s:%d\")\n", n+" connect", ip, port)
			fmt.Fprintf(&b, "R[%q] = get(\"http://%s:%d/\")\n", n+" get", ip, port)
			fmt.Fprintf(&b, "R[%q] = connect(\"[::ffff:%s]:%d\")\n", n+" mapped", ip, port)
		}
		return b.String()
	}
	check := func(res map[string]map[string]any, names ...string) {
		t.Helper()
		for _, n := range names {
			for _, k := range []string{n + " connect", n + " get", n + " mapped"} {
				got := res[k]
				if fmt.Sprint(got["status"]) != "403" || (got["code"] != "address_range_denied" && got["code"] != "address_denied") {
					t.Errorf("%s: got %v %v (%v)", k, got["status"], got["code"], got["body"])
				}
			}
		}
	}

	t.Run("bridge and outbound gateways", func(t *testing.T) {
		res := egResults(t, policyArgs(bridgeSub, outSub), probe("bridge", "outbound"))
		check(res, "bridge", "outbound")
	})

	// (c) a network made after the sidecar started, then an exec: the
	// exec pushes the engine's networks to the sidecar first.
	later := egNetwork(t, "later")
	laterGW, laterSub := egGateway(t, later)
	listeners["later"], targets["later"] = egListen(t, laterGW, port), laterGW
	t.Run("network made after the sidecar", func(t *testing.T) {
		res := egResults(t, policyArgs(laterSub), probe("later"))
		check(res, "later")
	})

	// (d) a network made while an exec runs: nothing tells the sidecar,
	// the proxy finds the engine's host by itself when it dials.
	parent := t
	t.Run("network made while an exec runs", func(t *testing.T) {
		code := `
import time
open("/opt/workspace/started", "w").write("1")
deadline = time.time() + 120
while not os.path.exists("/opt/workspace/go") and time.time() < deadline:
    time.sleep(0.1)
ip, port = open("/opt/workspace/go").read().split()
R["during connect"] = connect("%s:%s" % (ip, port))
R["during get"] = get("http://%s:%s/" % (ip, port))
`
		var wg sync.WaitGroup
		var res result
		var rerr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, rerr = sbConcurrent(t.TempDir(), 3*time.Minute, append(append([]string{"exec"}, policyArgs()...), "--lang", "python", "-c", egProbe+code+"\nprint(json.dumps(R))")...)
		}()
		poll(t, 90*time.Second, func() error {
			if r := sb(t, "files", "cat", s+":started"); r.Code != 0 {
				return fmt.Errorf("the exec has not started: %s", r)
			}
			return nil
		})
		during := egNetwork(parent, "during") // kept until the listeners are checked
		duringGW, _ := egGateway(t, during)
		listeners["during"], targets["during"] = egListen(parent, duringGW, port), duringGW
		wantCode(t, sbIn(t, duringGW+" "+fmt.Sprint(port), "files", "put", s+":go"), 0)
		wg.Wait()
		if rerr != nil {
			t.Fatal(rerr)
		}
		wantCode(t, res, 0)
		var out map[string]map[string]any
		lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
		if err := jsonUnmarshal(lines[len(lines)-1], &out); err != nil {
			t.Fatalf("%v\n%s", err, res)
		}
		for _, k := range []string{"during connect", "during get"} {
			got := out[k]
			if fmt.Sprint(got["status"]) != "403" || got["code"] != "address_range_denied" {
				t.Errorf("%s: %v", k, got)
			}
		}
		sc, err := engine(t).ContainerInspect(ctx, egSidecar)
		if err != nil || sc.NetworkSettings.Networks[during] != nil {
			t.Fatalf("the sidecar joined %s (%v): the test would not show what it means to", during, err)
		}
	})

	t.Run("credential only from its scope's network", func(t *testing.T) {
		sc := inspectSandbox(t, s, "")
		u, err := url.Parse(egressProxyURL(sc.Config.Env))
		if err != nil || u.User == nil {
			t.Fatalf("proxy URL of %s: %v", s, err)
		}
		tok, _ := u.User.Password()
		other := newScope(t)
		stolen := "Basic " + base64.StdEncoding.EncodeToString([]byte(s+":"+tok))
		res := egResults(t, []string{"-s", other, "--allow", "*", "--allow-port", fmt.Sprint(port), "--allow-cidr", "0.0.0.0/0"}, fmt.Sprintf(`
R["stolen"] = connect("x.test:443", auth=%q)
R["stolen, to the host"] = connect("%s:%d", auth=%q)
R["own"] = connect("x.test:443")
`, stolen, bridgeGW, port, stolen))
		for _, k := range []string{"stolen", "stolen, to the host"} {
			if got := res[k]; fmt.Sprint(got["status"]) != "403" || got["code"] != "bad_credentials" {
				t.Errorf("%s: another scope's credential from %s's network: %v", k, other, got)
			}
		}
		if got := res["own"]; got["code"] == "bad_credentials" || got["code"] == "auth_required" {
			t.Errorf("the scope's own credential refused: %v", got)
		}
		res = egResults(t, policyArgs(), `R["own"] = connect("x.test:443")`)
		if got := res["own"]; got["code"] == "bad_credentials" {
			t.Errorf("%s's own credential refused: %v", s, got)
		}
	})

	t.Run("no forwarding in the sidecar", func(t *testing.T) {
		if got := sidecar.HostConfig.Sysctls; got["net.ipv4.ip_forward"] != "0" || got["net.ipv6.conf.all.forwarding"] != "0" {
			t.Fatalf("sysctls %v", got)
		}
		out := egRunIn(t, sidecar.ID, "cat", "/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding")
		if strings.Join(strings.Fields(out), " ") != "0 0" {
			t.Fatalf("in the sidecar's network namespace: %q", out)
		}
	})

	// No listener saw a connection, through the proxy or from the probes
	// it makes. A connection of the test's own, made last and answered
	// (the answer is written after the peer is recorded), shows that every
	// earlier one was recorded (the accept queue is in order).
	for name, h := range listeners {
		c, err := net.DialTimeout("tcp", h.l.Addr().String(), 10*time.Second)
		if err != nil {
			t.Fatalf("the canary connection to %s (%s): %v", name, h.l.Addr(), err)
		}
		// Its port: some hosts rewrite the source address of a local
		// connection (this one shows 192.0.2.2 for 172.17.0.1), not the port.
		mine := fmt.Sprint(c.LocalAddr().(*net.TCPAddr).Port)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(c)
		c.Close()
		if !strings.Contains(string(b), "engine host") {
			t.Fatalf("the canary connection to %s (%s) got %q, %v; the listener saw %v", name, h.l.Addr(), b, err, h.seen())
		}
		for _, p := range h.seen() {
			if _, pp, _ := net.SplitHostPort(p); pp != mine {
				t.Errorf("the listener on the engine's host (%s, %s:%d) was reached from %s", name, targets[name], port, p)
			}
		}
	}
}

func egressProxyURL(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HTTP_PROXY="); ok {
			return v
		}
	}
	return ""
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
