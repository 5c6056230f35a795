package plugin_test

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// scripts/install.sh refuses to replace a docker-sandbox plugin that is not
// ours (Docker Desktop ships its own `docker sandbox`) unless --force.
func TestInstallRefusesForeignPlugin(t *testing.T) {
	needE2E(t)
	cfg := t.TempDir()
	dest := filepath.Join(cfg, "cli-plugins", "docker-sandbox")
	_ = os.MkdirAll(filepath.Dir(dest), 0o755)
	foreign := "#!/bin/sh\nif [ \"$1\" = docker-cli-plugin-metadata ]; then echo '{\"SchemaVersion\":\"0.1.0\",\"Vendor\":\"Docker Inc.\",\"Version\":\"v0.6.0\"}'; fi\n"
	if err := os.WriteFile(dest, []byte(foreign), 0o755); err != nil {
		t.Fatal(err)
	}
	install := func(args ...string) (string, error) {
		cmd := osexec.Command("bash", append([]string{filepath.Join(repoRoot, "scripts", "install.sh")}, args...)...)
		cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+cfg, "DOCKER_SANDBOX_INSTALL_BIN="+pluginBin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := install()
	if err == nil {
		t.Fatalf("install replaced a foreign plugin without --force:\n%s", out)
	}
	if !strings.Contains(out, "--force") || !strings.Contains(out, "Docker Inc.") || !strings.Contains(out, dest) {
		t.Errorf("the refusal does not name the file, its vendor and --force:\n%s", out)
	}
	if b, _ := os.ReadFile(dest); string(b) != foreign {
		t.Fatalf("the foreign plugin was changed")
	}
	out, err = install("--force")
	if err != nil {
		t.Fatalf("install --force: %v\n%s", err, out)
	}
	md, err := osexec.Command(dest, "docker-cli-plugin-metadata").Output()
	if err != nil || !strings.Contains(string(md), `"docker-sandbox project"`) {
		t.Fatalf("after --force the plugin is not ours: %v %s", err, md)
	}
	// Ours is replaced without --force (an upgrade).
	if out, err := install(); err != nil {
		t.Fatalf("re-install over our own plugin: %v\n%s", err, out)
	}
}
