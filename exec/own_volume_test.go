package exec

import (
	"testing"

	"github.com/docker/docker/api/types/volume"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// TestOwnVolumeDriverOptions: a volume with the
// name and labels of a sandbox's volume but a driver or driver options the
// plugin never uses (a bind of a host folder, an NFS export, a tmpfs) is
// not the plugin's volume: mounting it hands a host folder to sandboxed
// code. (ownTargetVolume and OwnVolume also check the driver and its options.)
func TestOwnVolumeDriverOptions(t *testing.T) {
	const name = "docker-sandbox-u1.user"
	target := core.Target{Scope: "u1"}
	if err := ownTargetVolume(volume.Volume{Name: name, Driver: "local", Labels: ownVolumeLabels(name)}, target); err != nil {
		t.Fatalf("the plugin's own volume is refused: %v", err)
	}
	for _, v := range []volume.Volume{
		{Name: name, Driver: "local", Labels: ownVolumeLabels(name), Options: map[string]string{"type": "none", "o": "bind", "device": "/"}},
		{Name: name, Driver: "local", Labels: ownVolumeLabels(name), Options: map[string]string{"type": "nfs", "o": "addr=127.0.0.1", "device": ":/export"}},
		{Name: name, Driver: "some-plugin/driver:latest", Labels: ownVolumeLabels(name)},
	} {
		if err := ownTargetVolume(v, target); err == nil {
			t.Errorf("volume %s (driver %s, options %v) is taken as the sandbox's own and would be mounted", v.Name, v.Driver, v.Options)
		}
	}
}

// TestOwnHelperVolumeDriverOptions: the same for the
// helper volume, whose content is PID 1's program in every sandbox.
func TestOwnHelperVolumeDriverOptions(t *testing.T) {
	const name = "docker-sandbox.helper.vol-amd64"
	if !ownHelperVolume(&volume.Volume{Name: name, Driver: "local", Labels: ownVolumeLabels(name)}) {
		t.Fatal("the plugin's own helper volume is refused")
	}
	v := volume.Volume{Name: name, Driver: "local", Labels: ownVolumeLabels(name), Options: map[string]string{"type": "none", "o": "bind", "device": "/tmp/elsewhere"}}
	if ownHelperVolume(&v) {
		t.Errorf("helper volume %s bound to %s is taken as the plugin's own: its content would run as every sandbox's PID 1", v.Name, v.Options["device"])
	}
}
