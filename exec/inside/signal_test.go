package inside

import "testing"

// TestFlagValue: how PID 1 reads a wrapper's --token, --timeout and its
// own --spec/--target from a command line: arguments after "--" are the
// program's and never count.
func TestFlagValue(t *testing.T) {
	cases := map[string]string{
		"/opt/sandbox/sandbox-helper\x00run\x00--token\x00abc\x00--\x00x":                                "abc",
		"/opt/sandbox/sandbox-helper\x00run\x00--token=abc\x00--":                                        "abc",
		"/opt/sandbox/sandbox-helper\x00run\x00-token\x00abc":                                            "abc",
		"/opt/sandbox/sandbox-helper\x00run\x00--token\x00old\x00--token\x00abc\x00--\x00--token\x00zzz": "abc",
		"/opt/sandbox/sandbox-helper\x00run\x00--\x00--token\x00abc":                                     "",
		"/opt/sandbox/sandbox-helper\x00run\x00--token":                                                  "",
	}
	for in, want := range cases {
		got, ok := flagValue(splitCmdline([]byte(in+"\x00")), "token")
		if got != want || ok != (want != "") {
			t.Errorf("%q: flagValue = %q, %v; want %q", in, got, ok, want)
		}
	}
	if helperSubcommand(splitCmdline([]byte("python3\x00run\x00"))) != "" || helperSubcommand(splitCmdline([]byte("/x/sandbox-helper\x00fs\x00"))) != "fs" {
		t.Error("helperSubcommand")
	}
}
