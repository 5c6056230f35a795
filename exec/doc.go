// Package exec owns the per-scope sandbox containers and runs code in them.
//
// One container exists per (scope, session). The first call creates it
// (seeding its volumes from the helper image), later calls reuse it through
// the Engine API's exec endpoints. Every program runs under the in-container
// helper (cmd/sandbox-helper; its code is package inside), which enforces the timeout and output caps and
// reports how the program ended over the wire protocol (package wire).
//
// The package talks to the engine through the narrow Engine interface so that
// its logic can be tested with a fake; the same paths are exercised against a
// real engine by the end-to-end tests.
package exec
