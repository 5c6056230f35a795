package plugin

import (
	"testing"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

type fixedRuntime string

func (r fixedRuntime) RuntimeRef() string { return string(r) }

// Every container setting of the configuration (the keys of the
// config.FlagsSandbox group) reaches the Spec: another value gives another
// Spec hash, so a sandbox made with one value is not joined with another.
// A new container setting fails here until it is a field of core.Settings
// that the Spec's hash covers, and is given a sample value below.
func TestSandboxSpecCoversSettings(t *testing.T) {
	samples := map[string]string{
		"image": "python:3.13-slim", "network": "proxy", "memory": "256m", "cpus": "0.5", "pids": "64",
		"nofile": "256", "tmp_size": "8m", "idle_ttl": "1m", "max_lifetime": "1h", "disk": "1g", "runtime": "runsc",
	}
	tg := core.Target{Scope: "u1"}
	base := sandboxSpec(config.Default(), fixedRuntime("rt:1"), tg)
	if base.Image != "rt:1" || base.Target != tg {
		t.Fatalf("default spec: %+v", base)
	}
	for _, key := range config.FlagKeys(config.FlagsSandbox) {
		v, ok := samples[key]
		if !ok {
			t.Errorf("container setting %q: make it a field of core.Settings, hash it in exec.Spec.Hash and add a sample value to this test", key)
			continue
		}
		c := config.Default()
		if err := c.Set(key, v, ""); err != nil {
			t.Fatal(err)
		}
		if got := sandboxSpec(c, fixedRuntime("rt:1"), tg); got.Hash() == base.Hash() {
			t.Errorf("%s = %s does not change the sandbox's Spec", key, v)
		}
	}
}
