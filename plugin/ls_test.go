package plugin

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

func TestLsFormats(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	used := now.Add(-3 * time.Minute)
	size := int64(2 << 20)
	rows := []*sbexec.Sandbox{
		{Scope: "u1", State: sbexec.StateIdle, Container: "3f2a9c1b0d4e", Image: "img:1", Network: "none",
			Created: now.Add(-time.Hour), LastUsed: &used, IdleTTL: "10m0s", Volumes: []string{"docker-sandbox-u1.user"}, Size: &size},
		{Scope: "u1", Session: "chat", State: sbexec.StateRunning, Container: "aaaaaaaaaaaa", Image: "img:1", Network: "none",
			Created: now.Add(-time.Minute), LastUsed: &now, IdleTTL: "0s", Volumes: []string{"docker-sandbox-u1.chat.ws"}},
		{Scope: "u2", State: sbexec.StateExpired, Created: now.Add(-48 * time.Hour), Volumes: []string{"docker-sandbox-u2.user"}},
	}
	for _, tc := range []struct {
		format string
		size   bool
		want   string
	}{
		{format: "", want: `
SCOPE   SESSION   STATE               IMAGE   NETWORK   RUNTIME   CREATED              LAST USED       IDLE TTL
u1      -         idle                img:1   none      default   About an hour ago    3 minutes ago   10m0s
u1      chat      running             img:1   none      default   About a minute ago   now             never
u2      -         expired-with-data   -       -         -         2 days ago           -               -
`},
		{format: "table {{.scope}}\t{{.session}}\t{{.size}}", want: `
SCOPE   SESSION   SIZE
u1                2097152
u1      chat      <no value>
u2                <no value>
`},
		// \t and \n as typed in a shell's single quotes, as docker ps takes them.
		{format: `table {{.scope}}\t{{.state}}`, want: `
SCOPE   STATE
u1      idle
u1      running
u2      expired-with-data
`},
		{format: `{{.scope}}\n{{.state}}`, want: `
u1
idle
u1
running
u2
expired-with-data
`},
		{format: "{{.scope}}/{{.state}}/{{len .volumes}}", want: `
u1/idle/1
u1/running/1
u2/expired-with-data/1
`},
		{format: "json", want: `
{"scope":"u1","session":"","state":"idle","container":"3f2a9c1b0d4e","image":"img:1","network":"none","runtime":"","created":"2026-03-01T11:00:00Z","last_used":"2026-03-01T11:57:00Z","idle_ttl":"10m0s","volumes":["docker-sandbox-u1.user"],"size":2097152}
{"scope":"u1","session":"chat","state":"running","container":"aaaaaaaaaaaa","image":"img:1","network":"none","runtime":"","created":"2026-03-01T11:59:00Z","last_used":"2026-03-01T12:00:00Z","idle_ttl":"0s","volumes":["docker-sandbox-u1.chat.ws"],"size":null}
{"scope":"u2","session":"","state":"expired-with-data","container":"","image":"","network":"","runtime":"","created":"2026-02-27T12:00:00Z","last_used":null,"idle_ttl":"","volumes":["docker-sandbox-u2.user"],"size":null}
`},
	} {
		var buf bytes.Buffer
		if err := lcWriteRows(&buf, tc.format, rows, now, tc.size); err != nil {
			t.Fatalf("%q: %v", tc.format, err)
		}
		if d := cmp.Diff(strings.TrimPrefix(tc.want, "\n"), buf.String()); d != "" {
			t.Errorf("format %q (-want +got):\n%s", tc.format, d)
		}
	}
	var buf bytes.Buffer
	if err := lcWriteRows(&buf, "{{.nope", rows, now, false); err == nil || core.AsError(err).Code != core.CodeBadFlag {
		t.Errorf("a bad template: %v", err)
	}
}
