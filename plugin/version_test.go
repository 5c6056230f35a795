package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/docker/cli/cli"
	"github.com/docker/docker/api/types"
	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/images"
)

type fakeVersionClient struct {
	v     types.Version
	err   error
	calls []string
}

func (f *fakeVersionClient) ServerVersion(ctx context.Context) (types.Version, error) {
	f.calls = append(f.calls, "ServerVersion")
	return f.v, f.err
}

func (f *fakeVersionClient) ClientVersion() string {
	f.calls = append(f.calls, "ClientVersion")
	return "1.41"
}

func TestVersion(t *testing.T) {
	sv := types.Version{Version: "20.10.24", APIVersion: "1.41", MinAPIVersion: "1.12", Os: "linux", Arch: "amd64"}
	plugin := fmt.Sprintf("Plugin:\n Version:     %s\n Helper:      %s\n Go version:  %s\n OS/Arch:     %s/%s\n", Version, images.HelperID(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, tc := range []struct {
		format string
		err    error
		want   string
		exit   int
	}{
		{want: plugin + "Context:       ctx (unix:///x.sock)\nEngine:\n Version:     20.10.24\n API version: 1.41 (client 1.41, minimum 1.12)\n OS/Arch:     linux/amd64\n"},
		{format: "{{.engine.api_version}} {{.context}}", want: "1.41 ctx\n"},
		{format: "json", want: fmt.Sprintf(`{"plugin":{"version":%q,"helper_id":%q,"go":%q,"os":%q,"arch":%q},"context":"ctx","host":"unix:///x.sock","transport":"unix","client_api_version":"1.41","engine":{"version":"20.10.24","api_version":"1.41","min_api_version":"1.12","os":"linux","arch":"amd64"}}`+"\n",
			Version, images.HelperID(), runtime.Version(), runtime.GOOS, runtime.GOARCH)},
		// No engine: the plugin's part, and the error (exit 125).
		{err: errors.New("Cannot connect to the Docker daemon at unix:///x.sock. Is the docker daemon running?"), exit: 125,
			want: plugin + "Context:       ctx (unix:///x.sock)\n"},
		{format: "{{.engine}} {{.error.code}}", err: errors.New("Cannot connect to the Docker daemon at unix:///x.sock. Is the docker daemon running?"), exit: 125,
			want: "<no value> engine_unreachable\n"},
	} {
		c := &fakeVersionClient{v: sv, err: tc.err}
		var out bytes.Buffer
		err := runVersion(context.Background(), c, &out, "ctx", "unix:///x.sock", versionOptions{format: tc.format})
		if d := cmp.Diff(tc.want, out.String()); d != "" {
			t.Errorf("format %q (-want +got):\n%s", tc.format, d)
		}
		if st, _ := err.(cli.StatusError); (err != nil || tc.exit != 0) && st.StatusCode != tc.exit {
			t.Errorf("format %q: %#v, want exit %d", tc.format, err, tc.exit)
		}
		// The client's API version is read once it negotiated.
		if d := cmp.Diff([]string{"ServerVersion", "ClientVersion"}, c.calls); d != "" {
			t.Errorf("calls: %s", d)
		}
	}
	// JSON with no engine: engine null, the error object.
	var out bytes.Buffer
	_ = runVersion(context.Background(), &fakeVersionClient{err: errors.New("Cannot connect to the Docker daemon")}, &out, "ctx", "h", versionOptions{format: "json"})
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v["engine"] != nil || v["error"].(map[string]any)["code"] != "engine_unreachable" {
		t.Errorf("%v: %s", err, out.String())
	}
	// A bad template: bad_flag, exit 125.
	out.Reset()
	err := runVersion(context.Background(), &fakeVersionClient{v: sv}, &out, "ctx", "h", versionOptions{format: "{{.engine"})
	if st, ok := err.(cli.StatusError); !ok || st.StatusCode != 125 || out.Len() != 0 {
		t.Errorf("bad template: %#v %q", err, out.String())
	}
}

func TestVersionTransport(t *testing.T) {
	for host, want := range map[string]string{
		"unix:///var/run/docker.sock":    "unix",
		"tcp://127.0.0.1:2375":           "tcp",
		"ssh://user@127.0.0.1:2222":      "ssh",
		"SSH://user@host/run/d.sock":     "ssh",
		"npipe:////./pipe/docker_engine": "npipe",
		"fd://":                          "fd",
		"":                               "",
		"no-scheme":                      "",
	} {
		if got := transportOf(host); got != want {
			t.Errorf("transportOf(%q) = %q, want %q", host, got, want)
		}
	}
	// The JSON form carries it next to the context and the host.
	var out bytes.Buffer
	if err := runVersion(context.Background(), &fakeVersionClient{}, &out, "sbx-ssh", "ssh://u@127.0.0.1:2222", versionOptions{format: "{{.context}} {{.host}} {{.transport}}"}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "sbx-ssh ssh://u@127.0.0.1:2222 ssh\n" {
		t.Errorf("got %q", got)
	}
}
