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
