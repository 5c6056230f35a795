package images

import (
	"archive/tar"
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHelperLayer(t *testing.T) {
	for _, readable := range []bool{false, true} {
		testHelperLayer(t, readable)
	}
}

func testHelperLayer(t *testing.T, readable bool) {
	layer, err := helperLayer([]byte("BIN"), readable)
	if err != nil {
		t.Fatal(err)
	}
	mode := int64(0o111) // execute-only: runc starts it, the sandbox's user cannot read it
	if readable {
		mode = 0o555
	}
	type entry struct {
		Name     string
		Uid, Gid int
		Mode     int64
		Body     string
	}
	var got []entry
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got = append(got, entry{h.Name, h.Uid, h.Gid, h.Mode, string(b)})
	}
	want := []entry{
		{"opt/", 0, 0, 0o755, ""},
		{"opt/sandbox/", 0, 0, 0o755, ""},
		{"opt/workspace/", 65532, 65532, 0o755, ""},
		{"opt/user/", 65532, 65532, 0o755, ""},
		{"tmp/", 0, 0, 0o1777, ""},
		// Read-only and root-owned: sandboxed code cannot replace it.
		{"opt/sandbox/sandbox-helper", 0, 0, mode, "BIN"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("helper layer (-want +got):\n%s", diff)
	}
}

func TestRefs(t *testing.T) {
	b := &Builder{Version: "0.1.0"}
	def := b.RuntimeRef()
	if !strings.HasPrefix(def, "docker-sandbox-runtime:0.1.0-") || strings.Contains(def, "latest") {
		t.Fatalf("runtime ref %s", def)
	}
	other := (&Builder{Version: "0.1.0", Base: "docker-sandbox-base:bookworm"}).RuntimeRef()
	if other == def {
		t.Fatal("another base must give another runtime tag")
	}
	if (&Builder{Version: "0.1.0", Base: DefaultBase}).RuntimeRef() != def {
		t.Fatal("the default base named explicitly must give the same tag")
	}
	if got := b.HelperRef("x86_64", false); got != "docker-sandbox-helper:0.1.0-"+HelperID()+"l2x-amd64" || b.HelperRef("amd64", true) == got {
		t.Fatalf("helper ref %s", got)
	}
	if b.HelperVolume("aarch64", true) != "docker-sandbox.helper.0.1.0."+HelperID()+"l2r.arm64" || b.HelperVolume("arm64", false) == b.HelperVolume("arm64", true) {
		t.Fatalf("helper volume %s", b.HelperVolume("aarch64", true))
	}
	for _, a := range []string{"amd64", "arm64", "x86_64", "aarch64"} {
		if bin, err := HelperBinary(a); err != nil || len(bin) < 1000 {
			t.Errorf("HelperBinary(%s): %d bytes, %v", a, len(bin), err)
		}
	}
	if _, err := HelperBinary("s390x"); err == nil {
		t.Error("s390x has no helper")
	}
}
