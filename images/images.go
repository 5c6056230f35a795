// Package images builds and finds the images sandboxes use: the helper image
// (FROM scratch: the embedded in-container helper plus folders owned by
// 65532 that seed new volumes) and the default runtime image (python3, node,
// bash, coreutils, ca-certificates) built from runtime/Dockerfile on a
// configurable base. Tags are pinned to the plugin's version, never latest.
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
	"github.com/moby/term"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// The helper binaries, built by scripts/build.sh into bin/ (which git keeps
// with a README only, so that a fresh clone compiles).
//
//go:embed bin
var helperFS embed.FS

//go:embed runtime/Dockerfile
var runtimeFS embed.FS

// Engine is the part of the Engine API this package uses.
type Engine interface {
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	ImageImport(ctx context.Context, source image.ImportSource, ref string, options image.ImportOptions) (io.ReadCloser, error)
	ImageBuild(ctx context.Context, buildContext io.Reader, options build.ImageBuildOptions) (build.ImageBuildResponse, error)
	ImagePull(ctx context.Context, ref string, options image.PullOptions) (io.ReadCloser, error)
	ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error)
}

// Names of the images.
const (
	HelperRepo  = "docker-sandbox-helper"
	RuntimeRepo = "docker-sandbox-runtime"
	// DefaultBase is the runtime image's base unless configured.
	DefaultBase = "debian:bookworm-slim"
)

// LabelImage marks the plugin's images (helper or runtime). Images do not
// carry com.docker.sandbox.managed: containers inherit image labels, and a
// user's own `docker run` of the runtime image is not the plugin's.
const LabelImage = core.LabelPrefix + "image-kind"

// Arches the plugin embeds a helper for.
var Arches = []string{"amd64", "arm64"}

// HelperBinary returns the embedded helper for a GOARCH name.
func HelperBinary(arch string) ([]byte, error) {
	b, err := helperFS.ReadFile("bin/sandbox-helper-linux-" + normArch(arch))
	if err != nil {
		if _, e := helperFS.ReadFile("bin/sandbox-helper-linux-amd64"); e != nil {
			return nil, core.Errorf(core.CodeInternal, "this plugin was built without its in-container helper: build it with scripts/build.sh (or install it with scripts/install.sh)")
		}
		return nil, core.Errorf(core.CodeBadImage, "no sandbox helper for architecture %q (this plugin carries %s)", arch, strings.Join(Arches, ", "))
	}
	return b, nil
}

func normArch(a string) string { return core.NormArch(a) }

var helperIDOnce = sync.OnceValue(func() string {
	// scripts/build.sh writes the binaries' digest next to them, so that a
	// warm exec does not hash 4 MiB on every call.
	if id, err := helperFS.ReadFile("bin/helper.id"); err == nil && len(bytes.TrimSpace(id)) >= 12 {
		return string(bytes.TrimSpace(id))[:12]
	}
	h := sha256.New()
	for _, a := range Arches {
		b, _ := HelperBinary(a)
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
})

// HelperID identifies the embedded helper binaries.
func HelperID() string { return helperIDOnce() }

// Builder makes the images present on an engine.
type Builder struct {
	Engine  Engine
	Version string
	// Base is the runtime image's base ("" = DefaultBase).
	Base string
	// Progress receives build progress (stderr).
	Progress io.Writer
}

// helperLayout versions the helper image's layer (its folders, owners and
// modes) apart from the helper binaries' hash: a change to the layout gets
// new image tags and volume names, so an image or volume made by the old
// layout is never taken for the new one.
const helperLayout = "l2"

// layoutOf names the layout variant: "x" has the helper execute-only (the
// sandbox's user can run it but not read it, so the kernel makes every
// helper process non-dumpable from its execve); "r" has it readable, for
// runtimes that cannot start a binary they may not read (gVisor's runsc):
// there the helper makes itself non-dumpable as its first act.
func layoutOf(readable bool) string {
	if readable {
		return helperLayout + "r"
	}
	return helperLayout + "x"
}

// HelperRef is the helper image's reference for an architecture.
func (b *Builder) HelperRef(arch string, readable bool) string {
	return fmt.Sprintf("%s:%s-%s%s-%s", HelperRepo, b.Version, HelperID(), layoutOf(readable), normArch(arch))
}

// HelperVolume is the name of the volume carrying the helper for arch.
func (b *Builder) HelperVolume(arch string, readable bool) string {
	return core.PluginObjectName(fmt.Sprintf("helper.%s.%s%s.%s", b.Version, HelperID(), layoutOf(readable), normArch(arch)))
}

func (b *Builder) base() string {
	if b.Base == "" {
		return DefaultBase
	}
	return b.Base
}

// RuntimeRef is the built-in runtime image's reference: the plugin's version
// and a digest of the base and the Dockerfile, so that another base or a
// changed Dockerfile builds a new image instead of reusing a stale one.
func (b *Builder) RuntimeRef() string {
	df, _ := runtimeFS.ReadFile("runtime/Dockerfile")
	h := sha256.New()
	h.Write([]byte(b.base()))
	h.Write([]byte{0})
	h.Write(df)
	return RuntimeRepo + ":" + b.Version + "-" + hex.EncodeToString(h.Sum(nil))[:8]
}

// EnsureHelper implements exec.Images.
func (b *Builder) EnsureHelper(ctx context.Context, arch string, readable bool) (string, string, error) {
	ref := b.HelperRef(arch, readable)
	if _, err := b.Engine.ImageInspect(ctx, ref); err == nil {
		return ref, b.HelperVolume(arch, readable), nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", "", core.EngineError(err, "cannot inspect the helper image")
	}
	if err := b.BuildHelper(ctx, arch, readable); err != nil {
		return "", "", err
	}
	return ref, b.HelperVolume(arch, readable), nil
}

// BuildHelper imports the helper image for arch: a single layer made from a
// tar (the same as FROM scratch + COPY --chown), no registry, no builder.
func (b *Builder) BuildHelper(ctx context.Context, arch string, readable bool) error {
	bin, err := HelperBinary(arch)
	if err != nil {
		return err
	}
	layer, err := helperLayer(bin, readable)
	if err != nil {
		return err
	}
	rc, err := b.Engine.ImageImport(ctx, image.ImportSource{Source: bytes.NewReader(layer), SourceName: "-"}, b.HelperRef(arch, readable), image.ImportOptions{
		Platform: "linux/" + normArch(arch),
		Changes: []string{
			"LABEL " + LabelImage + "=helper " + core.LabelVersion + "=" + b.Version,
			"ENTRYPOINT [\"" + core.HelperPath + "\"]",
		},
	})
	if err != nil {
		return core.EngineError(err, "cannot import the helper image")
	}
	defer rc.Close()
	if err := jsonmessage.DisplayJSONMessagesStream(rc, io.Discard, 0, false, nil); err != nil {
		return core.Wrap(core.CodeImageBuildFailed, err, "importing the helper image failed")
	}
	return nil
}

// helperLayer is the helper image's only layer.
func helperLayer(bin []byte, readable bool) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := time.Unix(0, 0)
	dir := func(name string, uid int, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: uid, Gid: uid, ModTime: mt})
	}
	for _, d := range []struct {
		name string
		uid  int
		mode int64
	}{{"opt/", 0, 0o755}, {"opt/sandbox/", 0, 0o755}, {"opt/workspace/", 65532, 0o755}, {"opt/user/", 65532, 0o755}, {"tmp/", 0, 0o1777}} {
		if err := dir(d.name, d.uid, d.mode); err != nil {
			return nil, err
		}
	}
	// Execute-only where the runtime allows (see layoutOf): the sandbox's
	// uid can run the helper but not read it, so the kernel makes every
	// helper process non-dumpable from its very execve (no window before
	// its own prctl in which sandboxed code could ptrace it or open its
	// /proc/PID/fd).
	mode := int64(0o111)
	if readable {
		mode = 0o555
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "opt/sandbox/sandbox-helper", Mode: mode, Size: int64(len(bin)), ModTime: mt}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// EnsureImage implements exec.Images: the built-in runtime image is built
// when missing; any other image is pulled when missing.
func (b *Builder) EnsureImage(ctx context.Context, ref string) (image.InspectResponse, error) {
	img, err := b.Engine.ImageInspect(ctx, ref)
	if err == nil {
		return img, nil
	}
	if !cerrdefs.IsNotFound(err) {
		return img, core.EngineError(err, "cannot inspect image "+ref)
	}
	if ref == b.RuntimeRef() {
		fmt.Fprintf(b.progress(), "docker sandbox: building the runtime image %s from %s (first use)\n", ref, b.base())
		if err := b.BuildRuntime(ctx); err != nil {
			return img, err
		}
	} else {
		if err := b.pull(ctx, ref); err != nil {
			return img, err
		}
	}
	img, err = b.Engine.ImageInspect(ctx, ref)
	if err != nil {
		return img, core.EngineError(err, "cannot inspect image "+ref)
	}
	return img, nil
}

func (b *Builder) progress() io.Writer {
	if b.Progress == nil {
		return io.Discard
	}
	return b.Progress
}

func (b *Builder) display(rc io.Reader) error {
	out := b.progress()
	fd, isTerm := term.GetFdInfo(out)
	return jsonmessage.DisplayJSONMessagesStream(rc, out, fd, isTerm, nil)
}

func (b *Builder) pull(ctx context.Context, ref string) error {
	fmt.Fprintf(b.progress(), "docker sandbox: image %s is not on the engine; pulling it\n", ref)
	rc, err := b.Engine.ImagePull(ctx, ref, image.PullOptions{})
	if err == nil {
		defer rc.Close()
		err = b.display(rc)
	}
	if err != nil {
		if core.IsUnreachable(err) && !strings.Contains(err.Error(), "registry") {
			return core.EngineError(err, "")
		}
		return core.Wrap(core.CodeImageMissing, err, "image %s is not on the engine and could not be pulled (build or load it first, e.g. `docker load`)", ref)
	}
	return nil
}

// BuildRuntime builds the runtime image from the embedded Dockerfile with the
// configured base, showing the engine's progress.
func (b *Builder) BuildRuntime(ctx context.Context) error {
	df, err := runtimeFS.ReadFile("runtime/Dockerfile")
	if err != nil {
		return core.Wrap(core.CodeInternal, err, "embedded Dockerfile")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df)), ModTime: time.Unix(0, 0)})
	_, _ = tw.Write(df)
	_ = tw.Close()
	base := b.base()
	resp, err := b.Engine.ImageBuild(ctx, &buf, build.ImageBuildOptions{
		Tags:        []string{b.RuntimeRef()},
		BuildArgs:   map[string]*string{"BASE": &base},
		Remove:      true,
		ForceRemove: true,
		PullParent:  false,
		NetworkMode: "default",
		Labels: map[string]string{
			LabelImage: "runtime", core.LabelVersion: b.Version,
			core.LabelPrefix + "base": base,
		},
		Version: build.BuilderV1,
	})
	if err != nil {
		if core.IsUnreachable(err) {
			return core.EngineError(err, "")
		}
		return core.Wrap(core.CodeImageBuildFailed, err, "cannot build the runtime image %s", b.RuntimeRef())
	}
	defer resp.Body.Close()
	if err := b.display(resp.Body); err != nil {
		hint := ""
		if strings.Contains(err.Error(), "pull access denied") || strings.Contains(err.Error(), "not found") || strings.Contains(err.Error(), "no such host") {
			hint = fmt.Sprintf(" (is the base image %s on the engine? Without a registry, make one with scripts/offline-base.sh and set runtime_base)", base)
		}
		return core.Wrap(core.CodeImageBuildFailed, err, "building the runtime image %s from %s failed%s", b.RuntimeRef(), base, hint)
	}
	return nil
}

// Summary is one row of `images ls`.
type Summary struct {
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	Size       int64  `json:"size"`
	Created    string `json:"created"`
}

// List returns the plugin's images.
func (b *Builder) List(ctx context.Context) ([]Summary, error) {
	imgs, err := b.Engine.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelImage))})
	if err != nil {
		return nil, core.EngineError(err, "cannot list images")
	}
	var out []Summary
	for _, im := range imgs {
		for _, rt := range im.RepoTags {
			repo, tag, _ := strings.Cut(rt, ":")
			if repo != HelperRepo && repo != RuntimeRepo {
				continue
			}
			id := strings.TrimPrefix(im.ID, "sha256:")
			if len(id) > 12 {
				id = id[:12]
			}
			out = append(out, Summary{Repository: repo, Tag: tag, ID: id, Kind: im.Labels[LabelImage], Size: im.Size,
				Created: time.Unix(im.Created, 0).UTC().Format(time.RFC3339)})
		}
	}
	return out, nil
}
