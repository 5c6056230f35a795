package plugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/docker/cli/cli"
	"github.com/spf13/cobra"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/files/fsproto"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
)

// hostileNames are names a sandbox (or an image) can give a file, a link
// target, a label or a message: a terminal title change (OSC ... BEL), a
// color (CSI), carriage return and newline, a right-to-left override, a C1
// CSI, invalid UTF-8, and a tab.
var hostileNames = []string{
	"\x1b]0;PWNED-TITLE\x07", "\x1b[31mred\x1b[0m", "over\rwrite", "two\nlines", "\u202Egnp.exe", "c1\u009b31m",
	"bad\xff\xfeutf8", "tab\there", "\x1bP+q\x1b\\", "del\x7f",
}

// rawControl returns a description of the first byte sequence of out that
// a terminal would act on (allowing the newlines that end lines), or "".
func rawControl(out []byte) string {
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRune(out[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			return fmt.Sprintf("invalid UTF-8 byte %#x at %d", out[i], i)
		case r == '\n':
		case r < 0x20 || r == 0x7f:
			return fmt.Sprintf("control byte %#x at %d", r, i)
		case r >= 0x80 && r <= 0x9f:
			return fmt.Sprintf("C1 control U+%04X at %d", r, i)
		case r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
			return fmt.Sprintf("bidi control U+%04X at %d", r, i)
		}
		i += n
	}
	return ""
}

func TestRawControl(t *testing.T) {
	for _, n := range hostileNames {
		if n != "two\nlines" && rawControl([]byte(n)) == "" {
			t.Errorf("rawControl misses %q", n)
		}
	}
	if got := rawControl([]byte("plain ünïcode, spaces\nand lines\n")); got != "" {
		t.Errorf("rawControl on clean text: %s", got)
	}
}

// TestTermQuoting: every human output that shows a name, a path, a link
// target, a type or a message from a sandbox carries no byte a terminal
// would act on, one line per item; JSON carries the exact original.
func TestTermQuoting(t *testing.T) {
	for _, name := range hostileNames {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			check := func(what string, out []byte, lines int) {
				t.Helper()
				if c := rawControl(out); c != "" {
					t.Errorf("%s: %s in %q", what, c, out)
				}
				if n := bytes.Count(out, []byte("\n")); n != lines {
					t.Errorf("%s: %d lines, want %d: %q", what, n, lines, out)
				}
			}
			// files ls: a file, a folder, a link and its target, a mode.
			var ls bytes.Buffer
			tw := tabwriter.NewWriter(&ls, 0, 4, 2, ' ', 0)
			for _, e := range []fsproto.Entry{
				{Name: name, Type: fsproto.TypeFile, Mode: "0644"},
				{Name: name, Type: fsproto.TypeDir, Mode: "0755"},
				{Name: name, Type: fsproto.TypeSymlink, Mode: "0777", LinkTarget: name},
				{Name: "m", Type: fsproto.TypeFile, Mode: name},
			} {
				if !utf8.ValidString(name) {
					e.NameBytes = []byte(e.Name)
					if e.LinkTarget != "" {
						e.LinkTargetBytes = []byte(e.LinkTarget)
					}
				}
				tw.Write([]byte(filesLsLine(e)))
			}
			tw.Flush()
			check("files ls", ls.Bytes(), 4)

			// cp's report of skipped and stripped entries.
			var rep bytes.Buffer
			res := &tarsafe.Result{Skipped: []tarsafe.Skipped{
				tarsafe.NewSkipped(name, "symlink", tarsafe.ReasonLinkAbsolute, "/x/"+name),
				tarsafe.NewSkipped("dev/"+name, name, name, ""),
			}, SkippedCount: 3, Stripped: []string{name}, StrippedCount: 1}
			printCopyReport(&rep, res)
			check("cp report", rep.Bytes(), 4)

			// An error message (a helper's, a path in an archive): human on
			// stderr, exact in JSON.
			var js bytes.Buffer
			err := fail(&js, "json", core.Errorf("path_escape", "%s: refused", name))
			st, ok := err.(cli.StatusError)
			if !ok {
				t.Fatalf("fail returned %T", err)
			}
			check("error", []byte(st.Status+"\n"), 1)
			var obj errorObject
			if err := json.Unmarshal(js.Bytes(), &obj); err != nil {
				t.Fatal(err)
			}
			// (JSON strings are UTF-8: encoding/json puts U+FFFD for
			// each invalid byte.)
			b, _ := json.Marshal(name + ": refused")
			var want string
			json.Unmarshal(b, &want)
			if obj.Error.Message != want {
				t.Errorf("JSON message %q, want %q", obj.Error.Message, want)
			}
			// A usage error keeps its hint on a line of its own.
			cmd := &cobra.Command{Use: "cp"}
			cmd.Flags().String("format", "", "")
			st = usageError(cmd, "bad argument %s", name).(cli.StatusError)
			check("usage error", []byte(st.Status+"\n"), 2)
			if !strings.HasSuffix(st.Status, "\nSee 'cp --help'.") {
				t.Errorf("usage error: %q", st.Status)
			}

			// ls: labels and image names can come from an image.
			var tbl bytes.Buffer
			now := time.Now()
			if err := lsFormat(now, false).write(&tbl, "", false, []*sbexec.Sandbox{{Scope: "u1", State: name, Image: name, Network: name, Runtime: name, IdleTTL: name, Created: now}}); err != nil {
				t.Fatal(err)
			}
			check("ls", tbl.Bytes(), 2)
		})
	}
}
