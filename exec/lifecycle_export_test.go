package exec

// The names and kinds of the plugin's objects that other packages make, for
// TestOwnNamesMatchTheirMakers (package exec_test, which can import them).
const (
	ScopeNetPrefixForTest    = scopeNetPrefix
	KindScopeNetworkForTest  = kindScopeNetwork
	HelperVolumeStartForTest = helperVolumeStart
)
