package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/docker/docker/client"
)

// podmanAPI reads Podman's own inspect of a container (exec.PodmanInspector)
// through the CLI's connection to the engine: the namespace modes that
// Podman's Docker-compatible inspect does not report. Only asked when the
// engine is Podman.
type podmanAPI struct{ cli client.APIClient }

func (p podmanAPI) PodmanNamespaces(ctx context.Context, id string) (cgroup, ipc string, err error) {
	c, ok := p.cli.(*client.Client)
	if !ok {
		return "", "", fmt.Errorf("no HTTP connection to the engine")
	}
	// The client's transport dials the engine's socket (or ssh) whatever
	// the URL's host; tcp:// hosts are reached by name.
	scheme, host := "http", client.DummyHost
	if h := c.DaemonHost(); strings.HasPrefix(h, "tcp://") {
		host = strings.TrimPrefix(h, "tcp://")
		if t, ok := c.HTTPClient().Transport.(*http.Transport); ok && t.TLSClientConfig != nil {
			scheme = "https"
		}
	}
	u := scheme + "://" + host + "/v4.0.0/libpod/containers/" + url.PathEscape(id) + "/json"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", "", err
	}
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return "", "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("GET /libpod/containers/%s/json: %s", id, resp.Status)
	}
	var v struct {
		HostConfig struct {
			CgroupMode string
			IpcMode    string
		}
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return "", "", fmt.Errorf("GET /libpod/containers/%s/json: %w", id, err)
	}
	return v.HostConfig.CgroupMode, v.HostConfig.IpcMode, nil
}
