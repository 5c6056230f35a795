// Package testenv decides every skip of the project's tests: outside CI a
// test that lacks something on the machine skips and says what; under CI
// (CI set, as scripts/test.sh and .ci/run set it) the same call fails the
// test, so a CI run never passes by skipping. Standard library only.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// InCI reports whether the tests run under CI.
func InCI() bool { return os.Getenv("CI") != "" }

// Skip skips t with the reason outside CI, and fails it under CI.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("cannot run under CI: %s", msg)
	}
	t.Skip(msg)
}
