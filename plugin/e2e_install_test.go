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

// scripts/install.sh --bin-dir DIR also installs the standalone command as
// DIR/docker-sandbox (DIR relative to where it is called, created if
// missing); a docker-sandbox there that is not ours is refused unless
// --force, which keeps a copy.
func TestInstallBinDir(t *testing.T) {
	needE2E(t)
	cfg := t.TempDir()
	cwd := t.TempDir()
	install := func(args ...string) (string, error) {
		cmd := osexec.Command("bash", append([]string{filepath.Join(repoRoot, "scripts", "install.sh")}, args...)...)
		cmd.Dir = cwd
		cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+cfg, "DOCKER_SANDBOX_INSTALL_BIN="+pluginBin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := install("--bin-dir"); err == nil || !strings.Contains(out, "--bin-dir needs a folder") {
		t.Fatalf("--bin-dir without a folder: %v\n%s", err, out)
	}
	bin := filepath.Join(cwd, "tools", "bin", "docker-sandbox")
	out, err := install("--bin-dir", "tools/bin")
	if err != nil {
		t.Fatalf("install --bin-dir: %v\n%s", err, out)
	}
	if v, err := osexec.Command(bin, "version", "--format", "{{.plugin.version}}").Output(); err != nil || strings.TrimSpace(string(v)) == "" {
		t.Fatalf("the standalone command does not run: %v %s\n%s", err, v, out)
	}
	if fi, err := os.Lstat(filepath.Join(cfg, "cli-plugins", "docker-sandbox")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the plugin was not installed too: %v", err)
	}
	// Somebody else's docker-sandbox in the folder: left alone.
	foreign := "#!/bin/sh\necho not ours\n"
	if err := os.WriteFile(bin, []byte(foreign), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err = install("--bin-dir", filepath.Dir(bin))
	if err == nil || !strings.Contains(out, "refusing to replace "+bin) {
		t.Fatalf("install replaced a foreign %s without --force: %v\n%s", bin, err, out)
	}
	if b, _ := os.ReadFile(bin); string(b) != foreign {
		t.Fatalf("the foreign command was changed")
	}
	if out, err := install("--force", "--bin-dir", filepath.Dir(bin)); err != nil {
		t.Fatalf("install --force --bin-dir: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(cfg, "sandbox", "docker-sandbox.bin-replaced")); string(b) != foreign {
		t.Fatalf("--force kept no copy of the replaced command")
	}
	md, err := osexec.Command(bin, "docker-cli-plugin-metadata").Output()
	if err != nil || !strings.Contains(string(md), `"docker-sandbox project"`) {
		t.Fatalf("after --force the command is not ours: %v %s", err, md)
	}
}
