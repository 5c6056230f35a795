package plugin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
)

func TestImagesLs(t *testing.T) {
	needE2E(t)
	scope := newScope(t)
	wantCode(t, sb(t, "exec", "-s", scope, "-c", "true"), 0) // both images exist now
	r := sb(t, "images", "ls", "--format", "json")
	wantCode(t, r, 0)
	var list []struct {
		Repository, Tag, Kind string
	}
	if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil {
		t.Fatalf("%v: %s", err, r)
	}
	kinds := map[string]bool{}
	for _, im := range list {
		kinds[im.Kind] = true
		if im.Tag == "latest" || !strings.HasPrefix(im.Tag, "0.") {
			t.Errorf("tag %s:%s is not pinned to the plugin's version", im.Repository, im.Tag)
		}
	}
	if !kinds["helper"] || !kinds["runtime"] {
		t.Fatalf("images ls lacks the helper or runtime image: %s", r.Stdout)
	}
	r = sb(t, "images", "ls")
	if !strings.Contains(r.Stdout, "docker-sandbox-helper") || !strings.Contains(r.Stdout, "REPOSITORY") {
		t.Fatalf("table: %s", r)
	}
}

// A missing runtime image is built on first use, with progress on stderr;
// the helper image is FROM scratch: one layer, no shell.
func TestImagesBuiltOnFirstUse(t *testing.T) {
	needE2E(t)
	ctx := context.Background()
	cli := engine(t)
	base := "docker-sandbox-test-base:" + randID(4)
	// A base of its own gives a runtime tag of its own, which cannot exist yet.
	if err := cli.ImageTag(ctx, envOr("DOCKER_SANDBOX_RUNTIME_BASE", "docker-sandbox-base:bookworm"), base); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		imgs, _ := cli.ImageList(ctx, image.ListOptions{})
		for _, im := range imgs {
			if im.Labels["com.docker.sandbox.base"] == base {
				_, _ = cli.ImageRemove(ctx, im.ID, image.RemoveOptions{Force: true, PruneChildren: true})
			}
		}
		_, _ = cli.ImageRemove(ctx, base, image.RemoveOptions{})
	})
	scope := newScope(t)
	r := sbRun(t, run{env: []string{"DOCKER_SANDBOX_RUNTIME_BASE=" + base}, args: []string{"exec", "-s", scope, "--format", "json", "-c", "python3 -c 'print(6*7)'; node -e 'console.log(1)'; bash -c 'echo b'; ls /etc/ssl/certs | head -1 | wc -l"}})
	wantCode(t, r, 0)
	if !strings.Contains(r.Stderr, "building the runtime image") || !strings.Contains(r.Stderr, "Step") {
		t.Fatalf("no build progress on stderr: %s", r)
	}
	j := decodeExec(t, r)
	if j.Stdout != "42\n1\nb\n1\n" {
		t.Fatalf("runtime image lacks a tool: %+v", j)
	}
	img, err := cli.ImageInspect(ctx, j.Image)
	if err != nil {
		t.Fatal(err)
	}
	if img.Config.Labels["com.docker.sandbox.base"] != base || strings.HasSuffix(j.Image, ":latest") {
		t.Fatalf("runtime image %s labels %v", j.Image, img.Config.Labels)
	}
	// The second call does not build.
	r = sbRun(t, run{env: []string{"DOCKER_SANDBOX_RUNTIME_BASE=" + base}, args: []string{"exec", "-s", scope, "-c", "true"}})
	if strings.Contains(r.Stderr, "building") {
		t.Fatalf("built twice: %s", r)
	}
	// The helper image: a single layer from scratch.
	r = sb(t, "images", "ls", "--format", "json")
	var list []struct{ Repository, Tag, Kind string }
	_ = json.Unmarshal([]byte(r.Stdout), &list)
	for _, im := range list {
		if im.Kind != "helper" {
			continue
		}
		hi, err := cli.ImageInspect(ctx, im.Repository+":"+im.Tag)
		if err != nil {
			t.Fatal(err)
		}
		if len(hi.RootFS.Layers) != 1 {
			t.Errorf("helper image %s has %d layers, want 1 (FROM scratch)", im.Tag, len(hi.RootFS.Layers))
		}
	}
}

func envOr(k, def string) string {
	if v := lookupEnv(k); v != "" {
		return v
	}
	return def
}

// `images build` keeps a helper image whose tag exists (the tag names the
// binary's hash; an import would make a new image ID each time and leave
// the old one untagged), so builds leave the engine as they found it.
func TestImagesBuildLeavesNoUntagged(t *testing.T) {
	needE2E(t)
	helperID := func() string {
		t.Helper()
		f := filters.NewArgs(filters.Arg("label", "com.docker.sandbox.image-kind=helper"), filters.Arg("dangling", "false"))
		l, err := engine(t).ImageList(context.Background(), image.ListOptions{Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, im := range l {
			ids = append(ids, im.ID)
		}
		return strings.Join(ids, ",")
	}
	wantCode(t, sb(t, "images", "build"), 0)
	firstIDs := helperID()
	dangling := func() int {
		t.Helper()
		f := filters.NewArgs(filters.Arg("dangling", "true"), filters.Arg("label", "com.docker.sandbox.image-kind=helper"))
		l, err := engine(t).ImageList(context.Background(), image.ListOptions{Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	before := dangling()
	for i := 0; i < 2; i++ {
		wantCode(t, sb(t, "images", "build"), 0)
	}
	if n := dangling(); n != before {
		t.Fatalf("%d untagged helper images after two builds, %d before", n, before)
	}
	if ids := helperID(); ids != firstIDs {
		t.Fatalf("the helper images changed: %s, then %s", firstIDs, ids)
	}
}
