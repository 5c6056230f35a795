package plugin_test

// End-to-end tests of the egress proxy (issue 5): the sidecar, the scope
// networks, real clients in proxy-mode sandboxes, and hostile requests
// from inside them.
//
// Nothing here can reach anything outside this machine: the sidecar's
// outbound network is an internal network the test creates, holding only
// the test's upstream container (a static Go server, imported as a FROM
// scratch image), and the proxy runs with --no-dns, resolving only the
// upstream's name. Every address a test aims at is loopback, the engine's
// own gateways, or one of the test's own containers.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/netip"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/docker-sandbox/docker-sandbox/egress"
)

const (
	egUpName      = "up.egress.test"
	egDenyName    = "x.egress.test" // the upstream too, under another name (after egUpName in any order)
	egSidecar     = "docker-sandbox.egress"
	egCanaryPorts = "22,25,6379"
)

// egFixture is the live setup shared by the subtests.
type egFixture struct {
	outNet     string       // the sidecar's internal outbound network
	outSubnet  netip.Prefix // its subnet
	outGateway string
	upIP       string // the upstream container's address
	upID       string
	caPEM      string // the upstream's certificate (self-signed, for up.egress.test)
	startArgs  []string
	sidecarOut string // the sidecar's address on the outbound network
}

func egTestRun() string { return os.Getenv("DOCKER_SANDBOX_TEST_RUN") }

func egLabels(kind string) map[string]string {
	l := map[string]string{"com.docker.sandbox.egress-test": kind}
	if id := egTestRun(); id != "" {
		l["com.docker.sandbox.test-run"] = id
	}
	return l
}

// egCert makes a self-signed certificate for the upstream's name.
func egCert(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: egUpName},
		DNSNames: []string{egUpName}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// egUpstreamImage builds egress/internal/testupstream and imports it as a
// FROM scratch image with the certificate; removed when the test ends.
func egUpstreamImage(t *testing.T, certPEM, keyPEM []byte) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "upstream")
	build := osexec.Command("go", "build", "-trimpath", "-o", bin, "./egress/internal/testupstream")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test upstream: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"upstream", 0o555, b}, {"cert.pem", 0o444, certPEM}, {"key.pem", 0o444, keyPEM}} {
		_ = tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)})
		_, _ = tw.Write(f.data)
	}
	_ = tw.Close()
	ref := "docker-sandbox-eg-upstream:" + randID(4)
	changes := []string{`ENTRYPOINT ["/upstream"]`, "LABEL com.docker.sandbox.egress-test=upstream"}
	if id := egTestRun(); id != "" {
		changes = append(changes, "LABEL com.docker.sandbox.test-run="+id)
	}
	ctx := context.Background()
	rc, err := engine(t).ImageImport(ctx, image.ImportSource{Source: &buf, SourceName: "-"}, ref, image.ImportOptions{Changes: changes})
	if err != nil {
		t.Fatalf("importing the upstream image: %v", err)
	}
	_, _ = io.Copy(io.Discard, rc)
	rc.Close()
	t.Cleanup(func() {
		_, _ = engine(t).ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	return ref
}

// egSetup creates the outbound network, the upstream and the sidecar.
func egSetup(t *testing.T) *egFixture {
	t.Helper()
	ctx := context.Background()
	cli := engine(t)
	f := &egFixture{}
	if c, err := cli.ContainerInspect(ctx, egSidecar); err == nil {
		if c.Config.Labels["com.docker.sandbox.test-run"] == "" {
			t.Fatalf("an egress sidecar not made by a test runs on this engine: the egress tests would replace it")
		}
		wantCode(t, sb(t, "egress", "stop", "--rm"), 0)
	}
	certPEM, keyPEM := egCert(t)
	f.caPEM = string(certPEM)
	ref := egUpstreamImage(t, certPEM, keyPEM)

	f.outNet = "docker-sandbox-eg-out-" + randID(4)
	_, err := cli.NetworkCreate(ctx, f.outNet, network.CreateOptions{
		Driver: "bridge", Internal: true, Labels: egLabels("outbound"),
		Options: map[string]string{"com.docker.network.bridge.inhibit_ipv4": "true"},
	})
	if err != nil {
		t.Fatalf("creating the outbound network: %v", err)
	}
	t.Cleanup(func() {
		// The sidecar goes first (its cleanup was registered later).
		_ = engine(t).NetworkRemove(context.Background(), f.outNet)
	})
	n, err := cli.NetworkInspect(ctx, f.outNet, network.InspectOptions{})
	if err != nil || len(n.IPAM.Config) == 0 {
		t.Fatalf("inspecting the outbound network: %v", err)
	}
	f.outSubnet = netip.MustParsePrefix(n.IPAM.Config[0].Subnet)
	f.outGateway = n.IPAM.Config[0].Gateway

	resp, err := cli.ContainerCreate(ctx, &container.Config{
		Image: ref, User: "65532:65532", Labels: egLabels("upstream"),
		Cmd: []string{"--http", ":80", "--https", ":443", "--canary", egCanaryPorts},
	}, &container.HostConfig{
		NetworkMode: container.NetworkMode(f.outNet), CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"},
		ReadonlyRootfs: true, Sysctls: map[string]string{"net.ipv4.ip_unprivileged_port_start": "0"},
	}, nil, nil, "docker-sandbox-eg-upstream-"+randID(4))
	if err != nil {
		t.Fatalf("creating the upstream: %v", err)
	}
	f.upID = resp.ID
	t.Cleanup(func() {
		_ = engine(t).ContainerRemove(context.Background(), resp.ID, container.RemoveOptions{Force: true})
		waitContainerGone(engine(t), resp.ID)
	})
	if err := cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		t.Fatalf("starting the upstream: %v", err)
	}
	poll(t, 20*time.Second, func() error {
		if !strings.Contains(egUpstreamLog(t, f), "READY") {
			return fmt.Errorf("upstream not ready:\n%s", egUpstreamLog(t, f))
		}
		return nil
	})
	c, err := cli.ContainerInspect(ctx, resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	f.upIP = c.NetworkSettings.Networks[f.outNet].IPAddress

	f.startArgs = []string{"egress", "start", "--outbound-network", f.outNet, "--no-dns", "--add-host", egUpName + "=" + f.upIP,
		"--add-host", egDenyName + "=" + f.upIP}
	r := sb(t, append(f.startArgs, "--replace")...) // whatever settings a volume kept
	t.Cleanup(func() {
		r := sb(t, "egress", "stop", "--rm")
		if r.Code != 0 {
			t.Logf("egress stop --rm: %s", r)
		}
		// The sidecar's volume (tokens, policies, log), when a test made it.
		vs, _ := engine(t).VolumeList(context.Background(), volume.ListOptions{Filters: filters.NewArgs(filters.Arg("name", egSidecar))})
		for _, v := range vs.Volumes {
			if v.Name == egSidecar && v.Labels["com.docker.sandbox.test-run"] != "" {
				_ = engine(t).VolumeRemove(context.Background(), v.Name, true)
			}
		}
	})
	wantCode(t, r, 0)
	sc, err := cli.ContainerInspect(ctx, egSidecar)
	if err != nil {
		t.Fatal(err)
	}
	f.sidecarOut = sc.NetworkSettings.Networks[f.outNet].IPAddress
	return f
}

func egUpstreamLog(t *testing.T, f *egFixture) string {
	t.Helper()
	rc, err := engine(t).ContainerLogs(context.Background(), f.upID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out, errb bytes.Buffer
	_, _ = stdcopy.StdCopy(&out, &errb, rc)
	return out.String() + errb.String()
}

// egCheckUpstream fails if a canary port was reached, or if anything but
// the sidecar connected to the upstream.
func egCheckUpstream(t *testing.T, f *egFixture) {
	t.Helper()
	for _, line := range strings.Split(egUpstreamLog(t, f), "\n") {
		if strings.HasPrefix(line, "CANARY") {
			t.Errorf("a connection reached a port no policy allows: %s", line)
		}
		if strings.HasPrefix(line, "CONN ") && !strings.Contains(line, "from "+f.sidecarOut+":") {
			t.Errorf("the upstream was reached by something else than the sidecar (%s): %s", f.sidecarOut, line)
		}
	}
}

// egProbe is Python run in a proxy-mode sandbox: raw requests to the proxy
// (with the sandbox's own credential unless auth=False) and direct
// connection attempts.
const egProbe = `
import os, json, socket, base64, urllib.parse, sys
P = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
AUTH = "Basic " + base64.b64encode(("%s:%s" % (P.username, P.password)).encode()).decode()
def raw(req, auth=True, timeout=10, half_close=False, extra=b""):
    s = socket.create_connection((P.hostname, P.port), timeout=timeout)
    head, _, rest = req.partition("\r\n")
    if auth is True:
        req = head + "\r\nProxy-Authorization: " + AUTH + "\r\n" + rest
    elif auth:
        req = head + "\r\nProxy-Authorization: " + auth + "\r\n" + rest
    s.sendall(req.encode() + extra)
    if half_close:
        s.shutdown(socket.SHUT_WR)
    data = b""
    try:
        while b"\r\n\r\n" not in data or half_close:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except socket.timeout:
        pass
    s.close()
    head = data.split(b"\r\n\r\n")[0].decode(errors="replace").split("\r\n")
    parts = head[0].split() if head and head[0] else []
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    hdrs = dict((l.split(":", 1)[0].lower(), l.split(":", 1)[1].strip()) for l in head[1:] if ":" in l)
    return {"status": status, "code": hdrs.get("x-sandbox-egress-error", ""), "body": data.decode(errors="replace")[-300:]}
def connect(target, **kw):
    return raw("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, kw.pop("host", target)), **kw)
def get(url, host="x.test", **kw):
    return raw("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (url, host), **kw)
def direct(host, port, timeout=2):
    try:
        s = socket.create_connection((host, port), timeout=timeout)
        s.close()
        return "connected"
    except Exception as e:
        return "%s: %s" % (type(e).__name__, e)
R = {}
`

// egResults runs probe code (which fills the dict R) in scope's sandbox
// and returns R.
func egResults(t *testing.T, args []string, code string) map[string]map[string]any {
	t.Helper()
	r := sb(t, append(append([]string{"exec"}, args...), "--lang", "python", "-c", egProbe+code+"\nprint(json.dumps(R))")...)
	wantCode(t, r, 0)
	var out map[string]map[string]any
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &out); err != nil {
		t.Fatalf("probe output: %v\n%s", err, r)
	}
	return out
}

func egPolicyArgs(f *egFixture, scope string) []string {
	return []string{"-s", scope, "--allow", egUpName, "--allow-cidr", f.outSubnet.String()}
}

func TestEgressLive(t *testing.T) {
	needE2E(t)
	f := egSetup(t)
	a := newScope(t)
	b := newScope(t)
	aArgs := egPolicyArgs(f, a)

	t.Run("start is idempotent", func(t *testing.T) {
		before, err := engine(t).ContainerInspect(context.Background(), egSidecar)
		if err != nil {
			t.Fatal(err)
		}
		r := sb(t, append(f.startArgs, "--format", "json")...)
		wantCode(t, r, 0)
		var st struct {
			Running         bool   `json:"running"`
			Container       string `json:"container"`
			OutboundNetwork string `json:"outbound_network"`
			NoDNS           bool   `json:"no_dns"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil || !st.Running || st.OutboundNetwork != f.outNet || !st.NoDNS || !strings.HasPrefix(before.ID, st.Container) {
			t.Fatalf("second start: %+v %v\n%s", st, err, r)
		}
		// Other settings while it runs: refused, and nothing changes.
		r = sb(t, "egress", "start", "--outbound-network", "bridge", "--format", "json")
		wantCode(t, r, 125)
		if e := decodeErr(t, r); e.Error.Code != "egress_mismatch" || !strings.Contains(e.Error.Message, f.outNet) {
			t.Fatalf("start with other settings: %+v", e)
		}
		after, err := engine(t).ContainerInspect(context.Background(), egSidecar)
		if err != nil || after.ID != before.ID || !after.State.Running {
			t.Fatalf("the sidecar changed: %v", err)
		}
		// Hardened like a sandbox.
		hc := after.HostConfig
		if after.Config.User != "65532:65532" || !hc.ReadonlyRootfs || strings.Join(hc.CapDrop, ",") != "ALL" ||
			strings.Join(hc.SecurityOpt, ",") != "no-new-privileges" || hc.Privileged || len(hc.PortBindings) != 0 {
			t.Fatalf("sidecar not hardened: user %q %+v", after.Config.User, hc)
		}
	})

	t.Run("clients", func(t *testing.T) {
		// Python urllib over HTTP and HTTPS (CONNECT), with the proxy
		// variables the sandbox got and nothing else.
		code := fmt.Sprintf(`
import urllib.request, ssl, os, json
open("/tmp/ca.pem", "w").write(%q)
ctx = ssl.create_default_context(cafile="/tmp/ca.pem")
print(urllib.request.urlopen("http://%[2]s/hello", timeout=10).read().decode().strip())
print(urllib.request.urlopen("https://%[2]s/hello", timeout=10, context=ctx).read().decode().strip())
h = json.loads(urllib.request.urlopen("http://%[2]s/headers", timeout=10).read())
print("proxy-authorization forwarded" if any(k.lower().startswith("proxy-") for k in h) else "no proxy headers upstream")
`, f.caPEM, egUpName)
		r := sb(t, append(append([]string{"exec"}, aArgs...), "--lang", "python", "-c", code)...)
		wantStdout(t, r, "hello from upstream, host "+egUpName+"\nhello from upstream, host "+egUpName+"\nno proxy headers upstream\n")

		// Node has no proxy support of its own (fetch and http ignore the
		// variables): a script talks to the proxy explicitly.
		node := fmt.Sprintf(`
const http = require("http"), tls = require("tls");
const p = new URL(process.env.HTTP_PROXY);
const auth = "Basic " + Buffer.from(decodeURIComponent(p.username) + ":" + decodeURIComponent(p.password)).toString("base64");
http.get({host: p.hostname, port: p.port, path: "http://%[1]s/hello", headers: {"Proxy-Authorization": auth}}, res => {
  let b = ""; res.on("data", d => b += d); res.on("end", () => {
    process.stdout.write(b);
    const req = http.request({host: p.hostname, port: p.port, method: "CONNECT", path: "%[1]s:443", headers: {"Proxy-Authorization": auth}});
    req.on("connect", (res, socket) => {
      const s = tls.connect({socket, servername: "%[1]s", ca: %[2]q}, () => s.write("GET /hello HTTP/1.1\r\nHost: %[1]s\r\nConnection: close\r\n\r\n"));
      let out = ""; s.on("data", d => out += d); s.on("end", () => process.stdout.write(out.split("\r\n\r\n")[1]));
    });
    req.end();
  });
});`, egUpName, f.caPEM)
		r = sb(t, append(append([]string{"exec"}, aArgs...), "--lang", "node", "-c", node)...)
		wantStdout(t, r, "hello from upstream, host "+egUpName+"\nhello from upstream, host "+egUpName+"\n")

		// curl (HTTP; HTTPS through CONNECT) and pip (an index over HTTPS)
		// with the proxy variables alone; a host the policy does not
		// grant is the proxy's 403, over HTTP and CONNECT alike.
		script := "cat > /tmp/ca.pem <<'EOF'\n" + f.caPEM + "EOF\n" + fmt.Sprintf(`curl -sS http://%[1]s/hello
curl -sS --cacert /tmp/ca.pem https://%[1]s/hello
curl -s -o /dev/null -w 'denied http %%{http_code}\n' http://denied.test/hello
curl -s -o /dev/null -w 'denied https %%{http_connect}' https://denied.test/hello; echo " exit $?"
pip install -q --no-cache-dir --index-url https://%[1]s/simple/ --cert /tmp/ca.pem egress-probe >/tmp/pip.out 2>&1 || cat /tmp/pip.out
python3 -c 'import egress_probe; print("egress_probe", egress_probe.VALUE)'
`, egUpName)
		r = sb(t, append(append([]string{"exec"}, aArgs...), "--lang", "sh", "-c", script)...)
		wantStdout(t, r, "hello from upstream, host "+egUpName+"\nhello from upstream, host "+egUpName+"\ndenied http 403\ndenied https 403 exit 56\negress_probe 42\n")

		// busybox wget (another sandbox of the same scope, another image).
		needBusybox(t)
		r = sb(t, append(append([]string{"exec"}, aArgs...), "--session", "bb", "--image", busybox, "--lang", "sh", "-c", "wget -q -O - http://"+egUpName+"/hello")...)
		wantStdout(t, r, "hello from upstream, host "+egUpName+"\n")
		egCheckUpstream(t, f)
	})

	// Scope B's sandbox, and its address, for the lateral movement probes.
	r := sb(t, append(append([]string{"exec"}, egPolicyArgs(f, b)...), "-c", "true")...)
	wantCode(t, r, 0)
	bc := inspectSandbox(t, b, "")
	bIP := bc.NetworkSettings.Networks["docker-sandbox.net."+b].IPAddress
	ac := inspectSandbox(t, a, "")
	aNet, err := engine(t).NetworkInspect(context.Background(), "docker-sandbox.net."+a, network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	aSubnet := netip.MustParsePrefix(aNet.IPAM.Config[0].Subnet)
	aGateway := aNet.IPAM.Config[0].Gateway
	sidecar, err := engine(t).ContainerInspect(context.Background(), egSidecar)
	if err != nil || sidecar.NetworkSettings == nil || sidecar.NetworkSettings.Networks["docker-sandbox.net."+a] == nil {
		t.Fatalf("the sidecar %s is gone or not on scope %s's network: %v", egSidecar, a, err)
	}
	sidecarA := sidecar.NetworkSettings.Networks["docker-sandbox.net."+a].IPAddress
	bridge, _ := engine(t).NetworkInspect(context.Background(), "bridge", network.InspectOptions{})
	hostGateway := "172.17.0.1"
	if len(bridge.IPAM.Config) > 0 && bridge.IPAM.Config[0].Gateway != "" {
		hostGateway = bridge.IPAM.Config[0].Gateway
	}

	t.Run("network and dns", func(t *testing.T) {
		// The sandbox is on its scope's internal network only, and its
		// resolver is an address of that network nobody holds.
		if !aNet.Internal || aNet.Options["com.docker.network.bridge.inhibit_ipv4"] != "true" {
			t.Fatalf("scope network: internal %v, options %v", aNet.Internal, aNet.Options)
		}
		if got := fmt.Sprint(len(ac.NetworkSettings.Networks)); got != "1" || ac.NetworkSettings.Networks["docker-sandbox.net."+a] == nil {
			t.Fatalf("sandbox networks: %v", ac.NetworkSettings.Networks)
		}
		if len(ac.HostConfig.DNS) != 1 || !aSubnet.Contains(netip.MustParseAddr(ac.HostConfig.DNS[0])) {
			t.Fatalf("sandbox DNS %v is not a dead address of %s", ac.HostConfig.DNS, aSubnet)
		}
		for id, ep := range aNet.Containers {
			if strings.HasPrefix(ep.IPv4Address, ac.HostConfig.DNS[0]+"/") {
				t.Fatalf("container %s holds the sandbox's DNS address", id)
			}
		}
		for _, c := range []string{sidecar.ID, ac.ID} {
			if _, ok := aNet.Containers[c]; !ok {
				t.Fatalf("%s not on the scope network", c)
			}
		}
		if len(aNet.Containers) != 3 { // sidecar, the sandbox, its busybox session
			t.Fatalf("scope network holds %d containers, want the sidecar and the scope's two sandboxes", len(aNet.Containers))
		}
		res := egResults(t, aArgs, `
for name in ["example.com", "pypi.org", "docker-sandbox-egress.invalid"]:
    try:
        R[name] = {"ok": True, "addrs": str(socket.getaddrinfo(name, 443))}
    except Exception as e:
        R[name] = {"ok": False, "error": str(e)}
R["resolv"] = {"ok": True, "text": open("/etc/resolv.conf").read()}
env = dict((k, v) for k, v in os.environ.items() if "proxy" in k.lower())
R["env"] = {"ok": True, "keys": ",".join(sorted(env)), "no_proxy": env.get("NO_PROXY", "")}
`)
		for _, name := range []string{"example.com", "pypi.org", "docker-sandbox-egress.invalid"} {
			if res[name]["ok"] != false {
				t.Errorf("%s resolved in a proxy-mode sandbox: %v", name, res[name])
			}
		}
		if !strings.Contains(res["resolv"]["text"].(string), "nameserver 127.0.0.11") {
			t.Errorf("resolv.conf: %v", res["resolv"])
		}
		if res["env"]["keys"] != "HTTPS_PROXY,HTTP_PROXY,NO_PROXY,http_proxy,https_proxy,no_proxy" {
			t.Errorf("proxy variables: %v", res["env"])
		}
	})

	t.Run("hostile", func(t *testing.T) {
		// B listens on its own address; A must not reach it.
		listener := `
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 8000)); s.listen(16); s.settimeout(1)
end = time.time() + 90
while time.time() < end:
    try:
        c, peer = s.accept()
    except socket.timeout:
        continue
    data = c.recv(16)
    print("PEER", peer[0], data.decode(errors="replace"), flush=True)
    if data == b"quit":
        break
    c.sendall(b"pong"); c.close()
`
		var wg sync.WaitGroup
		var lres result
		var lerr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			lres, lerr = sbConcurrent(t.TempDir(), 2*time.Minute, append(append([]string{"exec"}, egPolicyArgs(f, b)...), "--lang", "python", "-c", listener)...)
		}()
		ping := fmt.Sprintf(`
import socket
try:
    s = socket.create_connection((%q, 8000), timeout=2); s.sendall(b"ping"); print(s.recv(4).decode())
except Exception as e:
    print("no listener:", e)
`, bIP)
		poll(t, 30*time.Second, func() error {
			r := sb(t, append(append([]string{"exec"}, egPolicyArgs(f, b)...), "--lang", "python", "-c", ping)...)
			if strings.TrimSpace(r.Stdout) != "pong" {
				return fmt.Errorf("B's listener: %s", r)
			}
			return nil
		})

		res := egResults(t, aArgs, fmt.Sprintf(`
B, GW, HOSTGW, SIDE, SIDEOUT, OUTGW, UP = %q, %q, %q, %q, %q, %q, %q
for t in ["127.0.0.1:443", "[::1]:443", "[::ffff:127.0.0.1]:443", "0.0.0.0:443", "127.0.0.1:3128"]:
    R["connect " + t] = connect(t)
for u in ["http://2130706433/", "http://0x7f000001/", "http://0177.0.0.1/", "http://127.1/"]:
    R["get " + u] = get(u)
for p in [22, 25, 6379]:
    R["connect port %%d" %% p] = connect("%[8]s:%%d" %% p)
R["connect evil"] = connect("evil.test:443")
R["connect evil host header"] = connect("evil.test:443", host="%[8]s:443")
R["get userinfo"] = get("http://%[8]s@evil.test/")
R["get fragment"] = get("http://evil.test#@%[8]s/")
R["get ftp"] = get("ftp://%[8]s/")
R["get gopher"] = get("gopher://%[8]s:70/")
R["get file"] = get("file:///etc/passwd")
R["connect other scope"] = connect(B + ":8000")
R["connect sidecar scope address"] = connect(SIDE + ":3128")
R["connect sidecar outbound address"] = connect(SIDEOUT + ":3128")
R["connect outbound gateway"] = connect(OUTGW + ":80")
R["connect host gateway"] = connect(HOSTGW + ":2375")
R["connect scope gateway"] = connect(GW + ":80")
R["origin form"] = raw("GET / HTTP/1.1\r\nHost: %%s:3128\r\n\r\n" %% SIDE)
R["no credentials"] = connect("%[8]s:443", auth=False)
R["wrong token"] = connect("%[8]s:443", auth="Basic " + base64.b64encode(b"%[9]s:" + P.password.encode()).decode())
R["http2 preface"] = raw("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", auth=False)
R["half close"] = get("http://%[8]s/hello", half_close=True)
R["allowed"] = connect("%[8]s:443")
import concurrent.futures
targets = {"direct other scope": (B, 8000), "direct scope gateway": (GW, 80), "direct host gateway": (HOSTGW, 2375),
           "direct upstream": (UP, 80), "direct sidecar ssh": (SIDE, 22), "direct sidecar 8080": (SIDE, 8080)}
with concurrent.futures.ThreadPoolExecutor(len(targets)) as ex:
    futs = dict((name, ex.submit(direct, h, p)) for name, (h, p) in targets.items())
for name, fu in futs.items():
    R[name] = {"result": fu.result()}
`, bIP, aGateway, hostGateway, sidecarA, f.sidecarOut, f.outGateway, f.upIP, egUpName, b))

		want := map[string][2]any{ // status, code
			"connect 127.0.0.1:443": {403, "address_denied"}, "connect [::1]:443": {403, "address_denied"},
			"connect [::ffff:127.0.0.1]:443": {403, "address_denied"}, "connect 0.0.0.0:443": {403, "address_denied"},
			"connect 127.0.0.1:3128":           {403, "address_denied"},
			"get http://2130706433/":           {403, "bad_request"},
			"get http://0x7f000001/":           {403, "bad_request"},
			"get http://0177.0.0.1/":           {403, "bad_request"},
			"get http://127.1/":                {403, "bad_request"},
			"connect port 22":                  {403, "port_not_allowed"},
			"connect port 25":                  {403, "port_not_allowed"},
			"connect port 6379":                {403, "port_not_allowed"},
			"connect evil":                     {403, "host_not_allowed"},
			"connect evil host header":         {403, "host_not_allowed"},
			"get userinfo":                     {403, "bad_request"},
			"get ftp":                          {403, "scheme_not_allowed"},
			"get gopher":                       {403, "scheme_not_allowed"},
			"connect other scope":              {403, "address_range_denied"},
			"connect sidecar scope address":    {403, "address_range_denied"},
			"connect sidecar outbound address": {403, "proxy_address_denied"},
			"connect outbound gateway":         {403, "address_range_denied"},
			"connect host gateway":             {403, ""}, // private, or a gateway: never dialled
			"connect scope gateway":            {403, "address_range_denied"},
			"origin form":                      {400, "not_a_proxy_request"},
			"no credentials":                   {407, "auth_required"},
			"wrong token":                      {403, "bad_credentials"},
			"half close":                       {200, ""},
			"allowed":                          {200, ""},
		}
		for k, w := range want {
			got := res[k]
			if got == nil {
				t.Errorf("%s: no result", k)
				continue
			}
			if fmt.Sprint(got["status"]) != fmt.Sprint(w[0]) || (w[1] != "" && got["code"] != w[1]) {
				t.Errorf("%s: got %v %v, want %v %v (%v)", k, got["status"], got["code"], w[0], w[1], got["body"])
			}
		}
		for _, k := range []string{"get fragment", "get file", "http2 preface"} {
			if s := fmt.Sprint(res[k]["status"]); s == "200" || s == "302" {
				t.Errorf("%s allowed: %v", k, res[k])
			}
		}
		if !strings.Contains(fmt.Sprint(res["half close"]["body"]), "hello from upstream") {
			t.Errorf("half-closed client got no answer: %v", res["half close"])
		}
		for _, k := range []string{"direct other scope", "direct scope gateway", "direct host gateway", "direct upstream", "direct sidecar ssh", "direct sidecar 8080"} {
			if got := fmt.Sprint(res[k]["result"]); got == "connected" {
				t.Errorf("%s: a direct connection got through", k)
			}
		}

		// B's listener saw only B itself; the upstream saw only the sidecar,
		// and no canary port was touched.
		r := sb(t, append(append([]string{"exec"}, egPolicyArgs(f, b)...), "--lang", "python", "-c",
			fmt.Sprintf(`import socket; s = socket.create_connection((%q, 8000), timeout=5); s.sendall(b"quit")`, bIP))...)
		wantCode(t, r, 0)
		wg.Wait()
		if lerr != nil {
			t.Fatal(lerr)
		}
		for _, line := range strings.Split(strings.TrimSpace(lres.Stdout), "\n") {
			if !strings.HasPrefix(line, "PEER "+bIP+" ") {
				t.Errorf("B's listener was reached from elsewhere: %q", line)
			}
		}
		egCheckUpstream(t, f)
	})

	t.Run("redirect passes unchanged", func(t *testing.T) {
		res := egResults(t, aArgs, `R["redirect"] = get("http://`+egUpName+`/redirect")`)
		got := res["redirect"]
		if fmt.Sprint(got["status"]) != "302" || !strings.Contains(fmt.Sprint(got["body"]), "Location: http://169.254.169.254/latest/meta-data/") {
			t.Fatalf("redirect: %v", got)
		}
	})

	t.Run("policy change without re-creating", func(t *testing.T) {
		before := inspectSandbox(t, a, "").ID
		wantCode(t, sb(t, "egress", "policy", a, "--allow", "other.test"), 0)
		res := egResults(t, []string{"-s", a, "--network", "proxy"}, `R["now"] = get("http://`+egUpName+`/hello")`)
		if fmt.Sprint(res["now"]["status"]) != "403" || res["now"]["code"] != "host_not_allowed" {
			t.Fatalf("after narrowing the policy: %v", res["now"])
		}
		r := sb(t, "egress", "policy", a, "--format", "json")
		var p struct {
			Allow      []string `json:"allow"`
			AllowCIDRs []string `json:"allow_cidrs"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &p); err != nil || fmt.Sprint(p.Allow) != "[other.test]" || len(p.AllowCIDRs) != 0 {
			t.Fatalf("policy: %v %s", err, r)
		}
		wantCode(t, sb(t, "egress", "policy", a, "--allow", egUpName, "--allow-cidr", f.outSubnet.String()), 0)
		res = egResults(t, []string{"-s", a, "--network", "proxy"}, `R["again"] = get("http://`+egUpName+`/hello")`)
		if fmt.Sprint(res["again"]["status"]) != "200" {
			t.Fatalf("after restoring the policy: %v", res["again"])
		}
		if after := inspectSandbox(t, a, "").ID; after != before {
			t.Fatal("the sandbox was re-created")
		}
		r = sb(t, "egress", "policy", "nosuch-"+randID(3), "--format", "json")
		wantCode(t, r, 125)
		if decodeErr(t, r).Error.Code != "not_found" {
			t.Fatalf("policy of an unknown scope: %s", r)
		}
	})

	t.Run("logs", func(t *testing.T) {
		r := sb(t, "egress", "logs", "--scope", a, "--format", "json")
		wantCode(t, r, 0)
		var allow, deny int
		for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
			var rec struct {
				Time       time.Time `json:"time"`
				Scope      string    `json:"scope"`
				Method     string    `json:"method"`
				Host       string    `json:"host"`
				Port       int       `json:"port"`
				IP         string    `json:"ip"`
				PrivateIPs []string  `json:"private_ips"`
				Decision   string    `json:"decision"`
				Code       string    `json:"code"`
				Reason     string    `json:"reason"`
				Status     int       `json:"status"`
				BytesOut   int64     `json:"bytes_out"`
				BytesIn    int64     `json:"bytes_in"`
				DurationMS float64   `json:"duration_ms"`
				Client     string    `json:"client"`
			}
			dec := json.NewDecoder(strings.NewReader(line))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&rec); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if rec.Scope != a || rec.Time.IsZero() || rec.Method == "" || rec.Reason == "" || rec.Client == "" {
				t.Fatalf("incomplete record %+v", rec)
			}
			switch {
			case rec.Decision == "allow" && rec.Host == egUpName && rec.IP == f.upIP && rec.BytesIn > 0 && rec.Status == 200:
				allow++
			case rec.Decision == "deny" && rec.Host == "evil.test" && rec.Code == "host_not_allowed" && rec.Status == 403:
				deny++
			}
		}
		if allow == 0 || deny == 0 {
			t.Fatalf("want allowed requests to %s and denied ones to evil.test, got %d and %d:\n%s", egUpName, allow, deny, r.Stdout)
		}
		r = sb(t, "egress", "logs", "--scope", a, "--summary", "--format", "json")
		wantCode(t, r, 0)
		var s struct {
			Allowed []struct {
				Host  string `json:"host"`
				Port  int    `json:"port"`
				Count int    `json:"count"`
			} `json:"allowed"`
			Denied []struct {
				Host  string   `json:"host"`
				Codes []string `json:"codes"`
			} `json:"denied"`
			Suggested map[string]string `json:"suggested"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &s); err != nil {
			t.Fatalf("summary: %v\n%s", err, r)
		}
		hosts := map[string]bool{}
		for _, e := range s.Allowed {
			hosts[fmt.Sprintf("%s:%d", e.Host, e.Port)] = true
		}
		if !hosts[egUpName+":80"] || !hosts[egUpName+":443"] || len(s.Denied) == 0 {
			t.Fatalf("summary: %+v", s)
		}
		if !strings.Contains(s.Suggested[a], "--allow "+egUpName) {
			t.Fatalf("suggested policy %q", s.Suggested[a])
		}
		wantCode(t, sb(t, "egress", "logs", "--scope", a, "--summary"), 0)

		// -f: a new decision shows up while it runs.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// The plugin itself (standalone), so that the interrupt reaches it.
		cmd := osexec.CommandContext(ctx, pluginBin, "egress", "logs", "-f", "--tail", "0", "--scope", a, "--format", "json")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 16)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		marker := "follow-" + randID(3) + ".test"
		deadline := time.After(30 * time.Second)
		got := false
		for !got {
			egResults(t, []string{"-s", a, "--network", "proxy"}, `R["x"] = connect("`+marker+`:443")`)
			select {
			case l := <-lines:
				got = strings.Contains(l, marker)
			case <-time.After(2 * time.Second): // -f may have started after the request: ask again
			case <-deadline:
				t.Fatal("logs -f showed no new decision")
			}
		}
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})

	t.Run("status", func(t *testing.T) {
		r := sb(t, "egress", "status", "--format", "json")
		wantCode(t, r, 0)
		var st struct {
			Running         bool   `json:"running"`
			OutboundNetwork string `json:"outbound_network"`
			SubnetPool      string `json:"subnet_pool"`
			Networks        []struct {
				Scope     string `json:"scope"`
				Subnet    string `json:"subnet"`
				Proxy     string `json:"proxy"`
				Sandboxes int    `json:"sandboxes"`
				Connected bool   `json:"sidecar_connected"`
			} `json:"networks"`
			Policies []struct {
				Scope string   `json:"scope"`
				Allow []string `json:"allow"`
			} `json:"policies"`
			Counters struct {
				Allowed int64 `json:"allowed"`
				Denied  int64 `json:"denied"`
			} `json:"counters"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
			t.Fatalf("%v\n%s", err, r)
		}
		nets := map[string]bool{}
		for _, n := range st.Networks {
			if n.Scope == a || n.Scope == b {
				if !n.Connected || n.Sandboxes == 0 || !strings.HasSuffix(n.Proxy, ":3128") {
					t.Errorf("network %+v", n)
				}
				nets[n.Scope] = true
			}
		}
		pols := map[string]bool{}
		for _, p := range st.Policies {
			pols[p.Scope] = true
		}
		if !st.Running || st.OutboundNetwork != f.outNet || !nets[a] || !nets[b] || !pols[a] || !pols[b] {
			t.Fatalf("status: %+v", st)
		}
		// The counters are written every 2 seconds.
		poll(t, 10*time.Second, func() error {
			r := sb(t, "egress", "status", "--format", "{{.counters.allowed}} {{.counters.denied}}")
			var al, de int
			if _, err := fmt.Sscan(r.Stdout, &al, &de); err != nil || al == 0 || de == 0 {
				return fmt.Errorf("counters %q", r.Stdout)
			}
			return nil
		})
		if r := sb(t, "egress", "status"); r.Code != 0 || !strings.Contains(r.Stdout, a) {
			t.Fatalf("human status:\n%s", r)
		}
	})

	t.Run("failed first exec leaves no network", func(t *testing.T) {
		s := newScope(t)
		r := sb(t, "exec", "-s", s, "--allow", egUpName, "--runtime", "nonexistent-runtime", "--format", "json", "-c", "true")
		wantCode(t, r, 125)
		if decodeErr(t, r).Error.Code != "runtime_unavailable" {
			t.Fatalf("%s", r)
		}
		if _, err := engine(t).NetworkInspect(context.Background(), "docker-sandbox.net."+s, network.InspectOptions{}); err == nil {
			t.Fatal("the failed call left its scope network behind")
		}
		if cs, _ := objects(t, s); cs != 0 {
			t.Fatalf("the failed call left %d containers", cs)
		}
	})

	t.Run("rm takes the scope network", func(t *testing.T) {
		s := newScope(t)
		wantCode(t, sb(t, append(append([]string{"exec"}, egPolicyArgs(f, s)...), "--session", "x", "-c", "true")...), 0)
		wantCode(t, sb(t, append(append([]string{"exec"}, egPolicyArgs(f, s)...), "-c", "true")...), 0)
		netName := "docker-sandbox.net." + s
		if _, err := engine(t).NetworkInspect(context.Background(), netName, network.InspectOptions{}); err != nil {
			t.Fatalf("no scope network after a proxy-mode exec: %v", err)
		}
		// Removing a session keeps it (the scope's other sandbox uses it).
		wantCode(t, sb(t, "rm", s+"/x"), 0)
		if _, err := engine(t).NetworkInspect(context.Background(), netName, network.InspectOptions{}); err != nil {
			t.Fatalf("rm of a session removed the scope's network: %v", err)
		}
		wantCode(t, sb(t, "rm", s), 0)
		if _, err := engine(t).NetworkInspect(context.Background(), netName, network.InspectOptions{}); err == nil {
			t.Fatal("rm of the scope left its network")
		}
		sc, err := engine(t).ContainerInspect(context.Background(), egSidecar)
		if err != nil || !sc.State.Running || sc.NetworkSettings.Networks[netName] != nil {
			t.Fatalf("sidecar after rm: running %v, still on %s: %v", err == nil && sc.State.Running, netName, err)
		}
		// The scope works again after.
		wantStdout(t, sb(t, append(append([]string{"exec"}, egPolicyArgs(f, s)...), "-c", "curl -sS http://"+egUpName+"/hello")...),
			"hello from upstream, host "+egUpName+"\n")
	})

	t.Run("stop, then exec starts it again", func(t *testing.T) {
		r := sb(t, "egress", "stop", "--format", "json")
		wantCode(t, r, 0)
		if !strings.Contains(r.Stdout, `"stopped":true`) {
			t.Fatalf("stop: %s", r)
		}
		c, err := engine(t).ContainerInspect(context.Background(), egSidecar)
		if err != nil || c.State.Running {
			t.Fatalf("sidecar after stop: running %v, %v", c.State != nil && c.State.Running, err)
		}
		// A proxy-mode exec brings it back with its settings.
		res := egResults(t, []string{"-s", a, "--network", "proxy"}, `R["back"] = get("http://`+egUpName+`/hello")`)
		if fmt.Sprint(res["back"]["status"]) != "200" {
			t.Fatalf("after stop and exec: %v", res["back"])
		}
		c, err = engine(t).ContainerInspect(context.Background(), egSidecar)
		if err != nil || !c.State.Running || c.Config.Labels["com.docker.sandbox.egress.outbound-network"] != f.outNet {
			t.Fatalf("sidecar after exec: %v", err)
		}
		egCheckUpstream(t, f)
	})

	t.Run("stop, then a plain start keeps the settings", func(t *testing.T) {
		// The air-gapped settings (an internal outbound network, no DNS, a
		// static host) survive a stop, a removal of the container, and a
		// start without flags; other settings are refused either way.
		status := func() (st struct {
			State           string   `json:"state"`
			OutboundNetwork string   `json:"outbound_network"`
			Hosts           []string `json:"hosts"`
			NoDNS           bool     `json:"no_dns"`
		}) {
			t.Helper()
			r := sb(t, "egress", "status", "--format", "json")
			wantCode(t, r, 0)
			if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
				t.Fatalf("%v\n%s", err, r)
			}
			return st
		}
		wantHosts := egUpName + "=" + f.upIP + " " + egDenyName + "=" + f.upIP
		for _, stop := range [][]string{{"egress", "stop"}, {"egress", "stop", "--rm"}} {
			wantCode(t, sb(t, stop...), 0)
			// Other settings while stopped or removed: refused, nothing made.
			r := sb(t, "egress", "start", "--outbound-network", "bridge", "--format", "json")
			wantCode(t, r, 125)
			if e := decodeErr(t, r); e.Error.Code != "egress_mismatch" || !strings.Contains(e.Error.Message, f.outNet) {
				t.Fatalf("after %v, start with other settings: %+v", stop, e)
			}
			if st := status(); st.State == "running" {
				t.Fatalf("after %v, a refused start started the sidecar", stop)
			}
			wantCode(t, sb(t, "egress", "start"), 0)
			st := status()
			if st.State != "running" || st.OutboundNetwork != f.outNet || !st.NoDNS || strings.Join(st.Hosts, " ") != wantHosts {
				t.Fatalf("after %v and a plain start: %+v", stop, st)
			}
			c, err := engine(t).ContainerInspect(context.Background(), egSidecar)
			if err != nil || len(c.NetworkSettings.Networks) == 0 || c.NetworkSettings.Networks["bridge"] != nil || c.NetworkSettings.Networks[f.outNet] == nil {
				t.Fatalf("after %v and a plain start, the sidecar's networks: %v", stop, err)
			}
		}
		// A proxy-mode exec after a removal brings it back as configured too.
		wantCode(t, sb(t, "egress", "stop", "--rm"), 0)
		res := egResults(t, []string{"-s", a, "--network", "proxy"}, `R["back"] = get("http://`+egUpName+`/hello")`)
		if fmt.Sprint(res["back"]["status"]) != "200" {
			t.Fatalf("exec after stop --rm: %v", res["back"])
		}
		if st := status(); st.OutboundNetwork != f.outNet || !st.NoDNS {
			t.Fatalf("exec after stop --rm made a sidecar with other settings: %+v", st)
		}
		egCheckUpstream(t, f)
	})

	t.Run("learn then enforce", func(t *testing.T) {
		// Learn: any host, and the upstream's private address. Then the
		// summary's command, applied alone, lets the same requests through
		// (HTTP and HTTPS) and nothing else.
		s := newScope(t)
		learn := []string{"-s", s, "--allow", "*", "--allow-cidr", f.upIP + "/32"}
		replay := `
R["http"] = get("http://` + egUpName + `/hello")
R["https"] = connect("` + egUpName + `:443")
`
		res := egResults(t, learn, replay)
		if fmt.Sprint(res["http"]["status"]) != "200" || fmt.Sprint(res["https"]["status"]) != "200" {
			t.Fatalf("learning: %v", res)
		}
		var sum struct {
			Suggested map[string]string `json:"suggested"`
		}
		poll(t, 10*time.Second, func() error { // the log is written within 50 ms
			r := sb(t, "egress", "logs", "--scope", s, "--summary", "--format", "json")
			if err := json.Unmarshal([]byte(r.Stdout), &sum); err != nil || !strings.Contains(sum.Suggested[s], "443") {
				return fmt.Errorf("summary: %v %s", err, r)
			}
			return nil
		})
		cmd := sum.Suggested[s]
		want := "docker sandbox egress policy " + s + " --allow " + egUpName + " --allow-port 80 --allow-port 443 --allow-cidr " + f.upIP + "/32"
		if cmd != want {
			t.Fatalf("suggested %q, want %q", cmd, want)
		}
		args := strings.Fields(strings.TrimPrefix(cmd, "docker sandbox "))
		for i, a := range args {
			args[i] = strings.Trim(a, "'")
		}
		wantCode(t, sb(t, args...), 0)
		res = egResults(t, []string{"-s", s, "--network", "proxy"}, replay+`
R["other port"] = connect("`+egUpName+`:8443")
R["other host"] = connect("evil.test:443")
`)
		for k, w := range map[string]string{"http": "200", "https": "200", "other port": "403", "other host": "403"} {
			if got := fmt.Sprint(res[k]["status"]); got != w {
				t.Errorf("enforcing, %s: %v, want %s", k, res[k], w)
			}
		}
		egCheckUpstream(t, f)
	})

	t.Run("deny beats allow", func(t *testing.T) {
		// --allow '*' --deny NAME: requests to NAME are refused
		// (host_denied) and not a byte reaches the upstream; the same
		// upstream under another name passes. The policy shows the deny;
		// the summary suggests only what was used.
		s := newScope(t)
		args := []string{"-s", s, "--allow", "*", "--allow-cidr", f.upIP + "/32", "--deny", egDenyName}
		tok := randID(6)
		conns := func() (n int) {
			for _, l := range strings.Split(egUpstreamLog(t, f), "\n") {
				if strings.HasPrefix(l, "CONN ") || strings.HasPrefix(l, "REQ ") {
					n++
				}
			}
			return n
		}
		before := conns()
		res := egResults(t, args, `
R["http"] = get("http://`+egDenyName+`/hello?t=deny-`+tok+`", host="`+egDenyName+`")
R["https"] = connect("`+egDenyName+`:443")
`)
		for _, k := range []string{"http", "https"} {
			if fmt.Sprint(res[k]["status"]) != "403" || res[k]["code"] != "host_denied" {
				t.Errorf("denied name, %s: %v, want 403 host_denied", k, res[k])
			}
		}
		if log := egUpstreamLog(t, f); strings.Contains(log, "deny-"+tok) || conns() != before {
			t.Fatalf("a request to the denied name reached the upstream:\n%s", log)
		}
		res = egResults(t, args, `
R["http"] = get("http://`+egUpName+`/hello?t=allow-`+tok+`", host="`+egUpName+`")
R["https"] = connect("`+egUpName+`:443")
`)
		for _, k := range []string{"http", "https"} {
			if fmt.Sprint(res[k]["status"]) != "200" {
				t.Errorf("the other name, %s: %v, want 200", k, res[k])
			}
		}
		poll(t, 10*time.Second, func() error {
			if !strings.Contains(egUpstreamLog(t, f), "allow-"+tok) {
				return fmt.Errorf("the allowed request did not reach the upstream")
			}
			return nil
		})
		if strings.Contains(egUpstreamLog(t, f), "deny-"+tok) {
			t.Fatal("the denied request reached the upstream")
		}
		r := sb(t, "egress", "policy", s, "--format", "json")
		wantCode(t, r, 0)
		var pol struct {
			Allow []string `json:"allow"`
			Deny  []string `json:"deny"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &pol); err != nil || strings.Join(pol.Allow, ",") != "*" || strings.Join(pol.Deny, ",") != egDenyName {
			t.Fatalf("policy: %+v %v\n%s", pol, err, r)
		}
		if r := sb(t, "egress", "policy", s); !strings.Contains(r.Stdout, "deny:   "+egDenyName+"\n") {
			t.Fatalf("policy text: %s", r)
		}
		var sum struct {
			Suggested map[string]string `json:"suggested"`
		}
		poll(t, 10*time.Second, func() error { // the log is written within 50 ms
			r := sb(t, "egress", "logs", "--scope", s, "--summary", "--format", "json")
			if err := json.Unmarshal([]byte(r.Stdout), &sum); err != nil || !strings.Contains(sum.Suggested[s], "443") {
				return fmt.Errorf("summary: %v %s", err, r)
			}
			return nil
		})
		want := "docker sandbox egress policy " + s + " --allow " + egUpName + " --allow-port 80 --allow-port 443 --allow-cidr " + f.upIP + "/32"
		if sum.Suggested[s] != want {
			t.Fatalf("suggested %q, want %q", sum.Suggested[s], want)
		}
		egCheckUpstream(t, f)
	})

	t.Run("sandbox strings quoted in logs", func(t *testing.T) {
		// Targets and a user name carrying terminal escapes (C1 CSI, a
		// bidi override, an OSC title sequence) reach the log as they
		// are (JSON), and the human outputs show them quoted.
		s := newScope(t)
		res := egResults(t, []string{"-s", s, "--allow", egUpName}, `
R["c1"] = connect("\u009b31mX.test:443", host="x.test")
R["bidi"] = get("http://\u202eevil.test/")
R["osc"] = connect("\x1b]0;PWNED\x07.test:443")
R["user"] = connect("x.test:443", auth="Basic " + base64.b64encode("\u009b2J\u202e:x".encode()).decode())
`)
		for k, v := range res {
			if fmt.Sprint(v["status"]) == "200" {
				t.Fatalf("%s allowed: %v", k, v)
			}
		}
		var js string
		poll(t, 10*time.Second, func() error {
			js = sb(t, "egress", "logs", "--format", "json").Stdout
			if !strings.Contains(js, "\u009b31mX.test") {
				return fmt.Errorf("the C1 target is not in the log")
			}
			return nil
		})
		if !strings.Contains(js, "\u202eevil.test") {
			t.Fatalf("the bidi target is not in the JSON log as it came")
		}
		for _, args := range [][]string{{"egress", "logs"}, {"egress", "logs", "--summary"}, {"egress", "logs", "--scope", s}} {
			r := sb(t, args...)
			wantCode(t, r, 0)
			for _, bad := range []string{"\x1b", "\u009b", "\u202e", "\x07"} {
				if strings.Contains(r.Stdout, bad) || strings.Contains(r.Stderr, bad) {
					t.Errorf("%v printed %q raw", args, bad)
				}
			}
			if !strings.Contains(r.Stdout, `\u202e`) && !strings.Contains(r.Stdout, `\u009b`) {
				t.Errorf("%v does not show the quoted targets:\n%s", args, r.Stdout)
			}
		}
		if r := sb(t, "egress", "status"); strings.ContainsAny(r.Stdout, "\x1b\u009b\u202e\x07") {
			t.Errorf("status printed a control character raw")
		}
	})

	t.Run("many scopes", func(t *testing.T) {
		// More scope networks than the engine's default address pools hold
		// (31 here), through the code exec uses (without the policy step); each gets its own subnet
		// of the pool and the sidecar at its fixed address.
		const n = 34
		m := &egress.Manager{Engine: engine(t), Version: "test"}
		prefix := "egmany" + randID(3) + "-"
		var wg sync.WaitGroup
		errs := make(chan error, n)
		sem := make(chan struct{}, 4)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				if _, _, _, err := m.EnsureNetwork(context.Background(), fmt.Sprintf("%s%02d", prefix, i)); err != nil {
					errs <- err
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		nets, err := engine(t).NetworkList(context.Background(), network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "com.docker.sandbox.kind=egress-network"))})
		if err != nil {
			t.Fatal(err)
		}
		sc, err := engine(t).ContainerInspect(context.Background(), egSidecar)
		if err != nil {
			t.Fatal(err)
		}
		pool := netip.MustParsePrefix("10.213.0.0/16")
		subnets := map[netip.Prefix]string{}
		got := 0
		for _, nw := range nets {
			if !strings.HasPrefix(nw.Name, "docker-sandbox.net."+prefix) {
				continue
			}
			got++
			p := netip.MustParsePrefix(nw.IPAM.Config[0].Subnet)
			if !pool.Contains(p.Addr()) || p.Bits() != 26 || !nw.Internal {
				t.Errorf("%s: subnet %s internal %v", nw.Name, p, nw.Internal)
			}
			if other, dup := subnets[p]; dup {
				t.Errorf("%s and %s share %s", nw.Name, other, p)
			}
			subnets[p] = nw.Name
			ep := sc.NetworkSettings.Networks[nw.Name]
			if ep == nil || ep.IPAddress != p.Addr().Next().Next().String() {
				t.Errorf("sidecar on %s: %+v", nw.Name, ep)
			}
		}
		if got != n {
			t.Fatalf("%d scope networks, want %d", got, n)
		}
	})
}

// Flags are checked before anything is created.
func TestEgressBadFlags(t *testing.T) {
	needE2E(t)
	s := newScope(t)
	for _, c := range []struct {
		args  []string
		code  string
		words []string
	}{
		{[]string{"exec", "-s", s, "--allow", "a/b", "-c", "true"}, "bad_flag", []string{"a/b"}},
		{[]string{"exec", "-s", s, "--allow", "**", "-c", "true"}, "bad_flag", []string{"**"}},
		{[]string{"exec", "-s", s, "--allow", "bücher.example", "-c", "true"}, "bad_flag", []string{"punycode"}},
		{[]string{"exec", "-s", s, "--allow-port", "70000", "-c", "true"}, "bad_flag", []string{"70000"}},
		{[]string{"exec", "-s", s, "--allow-cidr", "10.0.0.0/33", "-c", "true"}, "bad_flag", []string{"10.0.0.0/33"}},
		{[]string{"exec", "-s", s, "--network", "none", "--allow", "pypi.org", "-c", "true"}, "bad_flag", []string{"--network proxy"}},
		{[]string{"exec", "-s", s, "--network", "host", "-c", "true"}, "bad_flag", []string{"host"}},
		{[]string{"exec", "-s", s, "--network", "container:x", "-c", "true"}, "bad_flag", []string{"container:x"}},
		{[]string{"egress", "policy", "bad/scope"}, "bad_name", []string{"bad/scope"}},
		{[]string{"egress", "policy", s, "--clear", "--allow", "x.test"}, "bad_flag", []string{"--clear"}},
		{[]string{"egress", "start", "--subnet-pool", "10.213.0.0/24"}, "bad_flag", []string{"200"}},
		{[]string{"egress", "start", "--subnet-size", "30"}, "bad_flag", []string{"/30"}},
		{[]string{"egress", "start", "--add-host", "noaddress"}, "bad_flag", []string{"noaddress"}},
		{[]string{"egress", "logs", "--summary", "-f"}, "bad_flag", []string{"--summary"}},
	} {
		r := sb(t, append(c.args, "--format", "json")...)
		wantCode(t, r, 125)
		e := decodeErr(t, r)
		if e.Error.Code != c.code {
			t.Errorf("%v: code %s, want %s (%s)", c.args, e.Error.Code, c.code, e.Error.Message)
		}
		for _, w := range c.words {
			if !strings.Contains(e.Error.Message, w) {
				t.Errorf("%v: message %q does not mention %q", c.args, e.Error.Message, w)
			}
		}
	}
	if cs, _ := objects(t, s); cs != 0 {
		t.Fatalf("a refused call created %d containers", cs)
	}
	if _, err := engine(t).NetworkInspect(context.Background(), "docker-sandbox.net."+s, network.InspectOptions{}); err == nil {
		t.Fatal("a refused call created the scope's network")
	}
}
