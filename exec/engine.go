package exec

import (
	"context"
	"io"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/exec/helpercall"
)

// Engine is the part of the Engine API this package uses.
type Engine interface {
	helpercall.Engine // exec create, attach, inspect
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, container string, options container.StartOptions) error
	// The first run of a sandbox goes through its attach (firstAttach).
	ContainerAttach(ctx context.Context, container string, options container.AttachOptions) (types.HijackedResponse, error)
	ContainerRemove(ctx context.Context, container string, options container.RemoveOptions) error
	ContainerInspect(ctx context.Context, container string) (container.InspectResponse, error)
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	VolumeInspect(ctx context.Context, volumeID string) (volume.Volume, error)
	VolumeList(ctx context.Context, options volume.ListOptions) (volume.ListResponse, error)
	VolumeRemove(ctx context.Context, volumeID string, force bool) error
	Info(ctx context.Context) (system.Info, error)
	// On a create: which engine (Podman's, see podman.go), and its volumes.
	ServerVersion(ctx context.Context) (types.Version, error)
	VolumeCreate(ctx context.Context, options volume.CreateOptions) (volume.Volume, error)
	// The lifecycle commands (ls, inspect, stop, rm, prune).
	ContainerLogs(ctx context.Context, container string, options container.LogsOptions) (io.ReadCloser, error)
	ContainerWait(ctx context.Context, container string, condition container.WaitCondition) (<-chan container.WaitResponse, <-chan error)
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkInspect(ctx context.Context, network string, options network.InspectOptions) (network.Inspect, error)
	NetworkRemove(ctx context.Context, network string) error
	NetworkDisconnect(ctx context.Context, network, container string, force bool) error
	Events(ctx context.Context, options events.ListOptions) (<-chan events.Message, <-chan error)
}

var _ Engine = (*client.Client)(nil)

// scopeFilter selects the plugin's objects of one scope (and session).
func scopeFilter(t core.Target, kind string) filters.Args {
	f := filters.NewArgs(filters.Arg("label", core.LabelManaged+"=true"), filters.Arg("label", core.LabelScope+"="+t.Scope))
	if t.Session != "" {
		f.Add("label", core.LabelSession+"="+t.Session)
	}
	if kind != "" {
		f.Add("label", core.LabelKind+"="+kind)
	}
	return f
}

func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }
func isConflict(err error) bool { return cerrdefs.IsConflict(err) }

// isNotRunning reports the engine's "container ... is not running" (and
// "is restarting"/"is paused") answer to an exec create.
func isNotRunning(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "is not running") || strings.Contains(s, "is restarting") || strings.Contains(s, "is paused") ||
		strings.Contains(s, "removal of container") || strings.Contains(s, "is marked for removal") || strings.Contains(s, "is dead")
}
