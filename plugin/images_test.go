package plugin

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/system"
	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/images"
)

type fakeImageLister struct {
	list []images.Summary
	err  error
}

func (f fakeImageLister) List(ctx context.Context) ([]images.Summary, error) { return f.list, f.err }

func TestImagesLsFormats(t *testing.T) {
	list := []images.Summary{
		{Repository: "docker-sandbox-helper", Tag: "0.1.0-d0dfa27341f2-amd64", ID: "0123456789ab", Kind: "helper", Size: 3 << 20, Created: "2026-03-01T12:00:00Z"},
		{Repository: "docker-sandbox-runtime", Tag: "0.1.0-151b5233", ID: "ba9876543210", Kind: "runtime", Size: 300 << 20, Created: "2026-03-01T12:01:00Z"},
	}
	for _, tc := range []struct {
		format string
		quiet  bool
		want   string
	}{
		{want: `
REPOSITORY               TAG                        IMAGE ID       KIND      CREATED                SIZE
docker-sandbox-helper    0.1.0-d0dfa27341f2-amd64   0123456789ab   helper    2026-03-01T12:00:00Z   3.146MB
docker-sandbox-runtime   0.1.0-151b5233             ba9876543210   runtime   2026-03-01T12:01:00Z   314.6MB
`},
		{quiet: true, want: `
docker-sandbox-helper:0.1.0-d0dfa27341f2-amd64
docker-sandbox-runtime:0.1.0-151b5233
`},
		// json: one array, the documented schema (also with -q).
		{format: "json", quiet: true, want: `
[{"repository":"docker-sandbox-helper","tag":"0.1.0-d0dfa27341f2-amd64","id":"0123456789ab","kind":"helper","size":3145728,"created":"2026-03-01T12:00:00Z"},{"repository":"docker-sandbox-runtime","tag":"0.1.0-151b5233","id":"ba9876543210","kind":"runtime","size":314572800,"created":"2026-03-01T12:01:00Z"}]
`},
		{format: "{{.kind}} {{.size}} {{.Size}}", want: `
helper 3145728 3.146MB
runtime 314572800 314.6MB
`},
		{format: `table {{.Kind}}\t{{.repository}}`, want: `
KIND      REPOSITORY
helper    docker-sandbox-helper
runtime   docker-sandbox-runtime
`},
	} {
		var out bytes.Buffer
		if err := runImagesLs(context.Background(), fakeImageLister{list: list}, &out, imagesLsOptions{format: tc.format, quiet: tc.quiet}); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(strings.TrimPrefix(tc.want, "\n"), out.String()); d != "" {
			t.Errorf("format %q quiet %v (-want +got):\n%s", tc.format, tc.quiet, d)
		}
	}
	// No images: an empty array, not null; the table's header.
	for format, want := range map[string]string{"json": "[]\n", "": "REPOSITORY   TAG       IMAGE ID   KIND      CREATED   SIZE\n"} {
		var out bytes.Buffer
		if err := runImagesLs(context.Background(), fakeImageLister{}, &out, imagesLsOptions{format: format}); err != nil || out.String() != want {
			t.Errorf("no images, %q: %v %q", format, err, out.String())
		}
	}
	e := core.Errorf(core.CodeEngineUnreachable, "cannot list images")
	var out bytes.Buffer
	if err := runImagesLs(context.Background(), fakeImageLister{err: e}, &out, imagesLsOptions{}); err != e || out.Len() != 0 {
		t.Errorf("list error: %v %q", err, out.String())
	}
}

// fakeImageBuilder records what images build asks.
type fakeImageBuilder struct {
	calls      []string
	helperErr  error
	runtimeErr error
}

func (f *fakeImageBuilder) EnsureHelper(ctx context.Context, arch string, readable bool) (string, string, error) {
	f.calls = append(f.calls, "helper "+arch+" "+map[bool]string{true: "readable", false: "exec-only"}[readable])
	return "", "", f.helperErr
}
func (f *fakeImageBuilder) BuildRuntime(ctx context.Context) error {
	f.calls = append(f.calls, "runtime")
	return f.runtimeErr
}
func (f *fakeImageBuilder) HelperRef(arch string, readable bool) string { return "helper:" + arch }
func (f *fakeImageBuilder) RuntimeRef() string                          { return "runtime:1" }

type fakeInfo struct {
	info system.Info
	err  error
}

func (f fakeInfo) Info(ctx context.Context) (system.Info, error) { return f.info, f.err }

func TestImagesBuildRun(t *testing.T) {
	info := system.Info{Architecture: "arm64", DefaultRuntime: "runc"}
	for format, want := range map[string]string{
		"":               "helper:arm64\nruntime:1\n",
		"json":           `{"base":"debian:x","helper":"helper:arm64","runtime":"runtime:1"}` + "\n",
		"{{.runtime}}":   "runtime:1\n",
		"{{json .base}}": `"debian:x"` + "\n",
	} {
		b := &fakeImageBuilder{}
		var out bytes.Buffer
		if err := runImagesBuild(context.Background(), fakeInfo{info: info}, b, &out, "debian:x", imagesBuildOptions{format: format}); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, out.String()); d != "" {
			t.Errorf("%q: %s", format, d)
		}
		if d := cmp.Diff([]string{"helper arm64 readable", "runtime"}, b.calls); d != "" {
			t.Errorf("calls: %s", d)
		}
	}
	// The engine unreachable: its error, nothing built.
	b := &fakeImageBuilder{}
	err := runImagesBuild(context.Background(), fakeInfo{err: errors.New("dial unix: connection refused")}, b, &bytes.Buffer{}, "", imagesBuildOptions{})
	if err == nil || len(b.calls) != 0 {
		t.Errorf("engine error: %v, calls %v", err, b.calls)
	}
	// The helper failing: the runtime is not built, nothing printed.
	b = &fakeImageBuilder{helperErr: core.Errorf(core.CodeImageMissing, "no")}
	var out bytes.Buffer
	if err := runImagesBuild(context.Background(), fakeInfo{info: info}, b, &out, "", imagesBuildOptions{}); err != b.helperErr || len(b.calls) != 1 || out.Len() != 0 {
		t.Errorf("helper error: %v, calls %v, printed %q", err, b.calls, out.String())
	}
}
