package core

// Paths inside every sandbox.
const (
	WorkspaceDir = "/opt/workspace"
	UserDir      = "/opt/user"
	HelperDir    = "/opt/sandbox"
	HelperPath   = HelperDir + "/sandbox-helper"
	// SandboxUser is the only identity code runs as.
	SandboxUser = "65532:65532"
)

// HelperEnv overrides, for the helper's processes, variables an image may
// set that change how a Go program runs (its garbage collector, memory
// limit, crash output, runtime debug switches): the image decides nothing
// about the helper. The program run by an exec sees the same (empty) values.
var HelperEnv = []string{"GODEBUG=", "GOGC=", "GOMEMLIMIT=", "GOMAXPROCS=", "GOTRACEBACK=", "GORACE="}

// NormArch names an architecture as images do (amd64, arm64) whether it
// comes from an image or from `docker info` (x86_64, aarch64).
func NormArch(a string) string {
	switch a {
	case "x86_64", "":
		return "amd64"
	case "aarch64", "arm64/v8":
		return "arm64"
	}
	return a
}
