package core

import "os"

// Labels put on everything the plugin creates.
const (
	LabelPrefix  = "com.docker.sandbox."
	LabelManaged = LabelPrefix + "managed"
	LabelScope   = LabelPrefix + "scope"
	LabelSession = LabelPrefix + "session"
	LabelKind    = LabelPrefix + "kind"
	LabelVersion = LabelPrefix + "version"
	LabelSpec    = LabelPrefix + "spec"
	LabelIdleTTL = LabelPrefix + "idle-ttl"
	LabelNetwork = LabelPrefix + "network"
	LabelImage   = LabelPrefix + "image"
	LabelRuntime = LabelPrefix + "runtime"
	LabelTestRun = LabelPrefix + "test-run"
)

// Kinds of objects (LabelKind).
const (
	KindSandbox   = "sandbox"
	KindUser      = "user"
	KindWorkspace = "workspace"
	KindHelper    = "helper"
	KindSeeder    = "seeder"
	// KindProbe is the short-lived container `prune --older-than` runs to
	// read when the data of expired sandboxes was last written.
	KindProbe = "probe"
)

// BaseLabels returns the labels every object carries. DOCKER_SANDBOX_TEST_RUN
// adds a label the test suite uses to find and remove what one run created.
func BaseLabels(kind string) map[string]string {
	l := map[string]string{LabelManaged: "true", LabelKind: kind}
	if id := os.Getenv("DOCKER_SANDBOX_TEST_RUN"); id != "" {
		l[LabelTestRun] = id
	}
	return l
}

// PlainVolume reports whether a volume's driver and driver options are
// those of every volume the plugin makes: the engine's local driver and no
// options. Labels can be copied; a volume whose options bind a host folder
// or mount an NFS export, or that another driver serves, is not the
// plugin's whatever its name and labels say (a sandbox would hand that
// folder to its code; the helper volume's content runs as every sandbox's
// PID 1). An empty driver is what a test's fake engine reports.
func PlainVolume(driver string, options map[string]string) bool {
	return (driver == "local" || driver == "") && len(options) == 0
}
