package main

import (
	"bytes"
	"testing"
)

func TestIsRunWithToken(t *testing.T) {
	split := func(s string) [][]byte { return bytes.Split([]byte(s), []byte{0}) }
	cases := map[string]bool{
		"/opt/sandbox/sandbox-helper\x00run\x00--token\x00abc\x00--\x00x": true,
		"/opt/sandbox/sandbox-helper\x00run\x00--token=abc\x00--":         true,
		"/opt/sandbox/sandbox-helper\x00run\x00--token\x00abd\x00--":      false,
		"/opt/sandbox/sandbox-helper\x00run\x00--\x00--token\x00abc":      false, // a program argument, not ours
		"/opt/sandbox/sandbox-helper\x00signal\x00--token\x00abc":         false,
		"python3\x00run\x00--token\x00abc":                                false,
		"sandbox-helper":                                                  false,
	}
	for in, want := range cases {
		if got := isRunWithToken(split(in), "abc"); got != want {
			t.Errorf("%q: %v", in, got)
		}
	}
}
