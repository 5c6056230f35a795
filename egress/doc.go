// Package egress will hold the per-scope egress policy, the IP rules, the
// sidecar proxy and its networks; see the egress issue. Until then sandboxes
// run with network none only.
package egress
