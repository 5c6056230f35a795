package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

// fakeLister is the sandbox manager as ls sees it.
type fakeLister struct {
	rows []*sbexec.Sandbox
	err  error
	got  []sbexec.ListOptions
}

func (f *fakeLister) List(ctx context.Context, o sbexec.ListOptions) ([]*sbexec.Sandbox, error) {
	f.got = append(f.got, o)
	return f.rows, f.err
}

func lsRows(now time.Time) []*sbexec.Sandbox {
	used := now.Add(-3 * time.Minute)
	size := int64(2 << 20)
	return []*sbexec.Sandbox{
		{Scope: "u1", State: sbexec.StateIdle, Container: "3f2a9c1b0d4e", Image: "img:1", Network: "none",
			Created: now.Add(-time.Hour), LastUsed: &used, IdleTTL: "10m0s", Volumes: []string{"docker-sandbox-u1.user"}, Size: &size},
		{Scope: "u1", Session: "chat", State: sbexec.StateRunning, Container: "aaaaaaaaaaaa", Image: "img:1", Network: "none",
			Created: now.Add(-time.Minute), LastUsed: &now, IdleTTL: "0s", Volumes: []string{"docker-sandbox-u1.chat.ws"}},
		{Scope: "u2", State: sbexec.StateExpired, Created: now.Add(-48 * time.Hour), Volumes: []string{"docker-sandbox-u2.user"}},
	}
}

func TestLsFormats(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		format string
		size   bool
		quiet  bool
		want   string
	}{
		{format: "", want: `
SCOPE     SESSION   STATE               IMAGE     NETWORK   RUNTIME   CREATED              LAST USED       IDLE TTL
u1        -         idle                img:1     none      default   About an hour ago    3 minutes ago   10m0s
u1        chat      running             img:1     none      default   About a minute ago   now             never
u2        -         expired-with-data   -         -         -         2 days ago           -               -
`},
		{format: "table", size: true, want: `
SCOPE     SESSION   STATE               IMAGE     NETWORK   RUNTIME   CREATED              LAST USED       IDLE TTL   SIZE
u1        -         idle                img:1     none      default   About an hour ago    3 minutes ago   10m0s      2.097MB
u1        chat      running             img:1     none      default   About a minute ago   now             never      -
u2        -         expired-with-data   -         -         -         2 days ago           -               -          -
`},
		// JSON field names: the values of --format json.
		{format: "table {{.scope}}\t{{.session}}\t{{.size}}\t{{.last_used}}", want: `
SCOPE     SESSION   SIZE         LAST USED
u1                  2097152      2026-03-01T11:57:00Z
u1        chat      <no value>   2026-03-01T12:00:00Z
u2                  <no value>   <no value>
`},
		// The table's columns, as docker ps names them: the text it shows.
		{format: `table {{.Target}}\t{{.State}}\t{{.LastUsed}}\t{{.Container}}\t{{.Volumes}}`, want: `
TARGET    STATE               LAST USED       CONTAINER      VOLUMES
u1        idle                3 minutes ago   3f2a9c1b0d4e   docker-sandbox-u1.user
u1/chat   running             now             aaaaaaaaaaaa   docker-sandbox-u1.chat.ws
u2        expired-with-data   -               -              docker-sandbox-u2.user
`},
		// \t and \n as typed in a shell's single quotes, as docker ps takes them.
		{format: `table {{.scope}}\t{{.state}}`, want: `
SCOPE     STATE
u1        idle
u1        running
u2        expired-with-data
`},
		{format: `{{.scope}}\n{{.state}}`, want: `
u1
idle
u1
running
u2
expired-with-data
`},
		{format: "{{.scope}}/{{.state}}/{{len .volumes}}/{{.Session}}", want: `
u1/idle/1/-
u1/running/1/chat
u2/expired-with-data/1/-
`},
		{format: "json", want: `
{"scope":"u1","session":"","state":"idle","container":"3f2a9c1b0d4e","image":"img:1","network":"none","runtime":"","created":"2026-03-01T11:00:00Z","last_used":"2026-03-01T11:57:00Z","idle_ttl":"10m0s","channel":false,"volumes":["docker-sandbox-u1.user"],"size":2097152}
{"scope":"u1","session":"chat","state":"running","container":"aaaaaaaaaaaa","image":"img:1","network":"none","runtime":"","created":"2026-03-01T11:59:00Z","last_used":"2026-03-01T12:00:00Z","idle_ttl":"0s","channel":false,"volumes":["docker-sandbox-u1.chat.ws"],"size":null}
{"scope":"u2","session":"","state":"expired-with-data","container":"","image":"","network":"","runtime":"","created":"2026-02-27T12:00:00Z","last_used":null,"idle_ttl":"","channel":false,"volumes":["docker-sandbox-u2.user"],"size":null}
`},
		{quiet: true, want: "\nu1\nu1/chat\nu2\n"},
		{quiet: true, format: "table", want: "\nu1\nu1/chat\nu2\n"},
		// A template wins over -q, as with docker ps.
		{quiet: true, format: "{{.Scope}}", want: "\nu1\nu1\nu2\n"},
	} {
		f := &fakeLister{rows: lsRows(now)}
		var buf bytes.Buffer
		lo := sbexec.ListOptions{Now: now, Size: tc.size}
		if err := runLs(context.Background(), f, &buf, lo, lsOptions{format: tc.format, size: tc.size, quiet: tc.quiet}); err != nil {
			t.Fatalf("%q: %v", tc.format, err)
		}
		if d := cmp.Diff(strings.TrimPrefix(tc.want, "\n"), buf.String()); d != "" {
			t.Errorf("format %q (-want +got):\n%s", tc.format, d)
		}
		if d := cmp.Diff([]sbexec.ListOptions{lo}, f.got); d != "" {
			t.Errorf("list options (-want +got):\n%s", d)
		}
	}
	// No rows: the table's header alone; JSON nothing.
	for format, want := range map[string]string{"": "SCOPE     SESSION   STATE     IMAGE     NETWORK   RUNTIME   CREATED   LAST USED   IDLE TTL\n", "json": "", "{{.scope}}": ""} {
		var buf bytes.Buffer
		if err := runLs(context.Background(), &fakeLister{}, &buf, sbexec.ListOptions{Now: now}, lsOptions{format: format}); err != nil || buf.String() != want {
			t.Errorf("no rows, format %q: %v %q, want %q", format, err, buf.String(), want)
		}
	}
	// A bad template is a bad flag, and prints nothing.
	for _, bad := range []string{"{{.nope", "table {{.scope}", "{{.scope.x}}", "{{template \"x\"}}"} {
		var buf bytes.Buffer
		err := runLs(context.Background(), &fakeLister{rows: lsRows(now)}, &buf, sbexec.ListOptions{Now: now}, lsOptions{format: bad})
		if err == nil || core.AsError(err).Code != core.CodeBadFlag || buf.Len() != 0 {
			t.Errorf("template %q: %v, printed %q", bad, err, buf.String())
		}
	}
	// The manager's error is ls's, and nothing is printed.
	var buf bytes.Buffer
	e := core.Errorf(core.CodeEngineUnreachable, "no engine")
	if err := runLs(context.Background(), &fakeLister{err: e}, &buf, sbexec.ListOptions{Now: now}, lsOptions{}); err != e || buf.Len() != 0 {
		t.Errorf("list error: %v, printed %q", err, buf.String())
	}
}

// The flags become the manager's list options: filters parsed, and
// state=expired-with-data implies -a.
func TestLsListOptions(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		o    lsOptions
		want sbexec.ListOptions
		err  string
	}{
		{o: lsOptions{}, want: sbexec.ListOptions{Now: now}},
		{o: lsOptions{all: true, size: true}, want: sbexec.ListOptions{All: true, Size: true, Now: now}},
		{o: lsOptions{filters: []string{"scope=u1", "session=", "state=idle", "label=a=b"}},
			want: sbexec.ListOptions{Now: now, Filter: sbexec.Filter{Scopes: []string{"u1"}, Sessions: []string{""}, States: []string{"idle"}, Labels: []string{"a=b"}}}},
		{o: lsOptions{filters: []string{"state=expired-with-data"}},
			want: sbexec.ListOptions{All: true, Now: now, Filter: sbexec.Filter{States: []string{"expired-with-data"}}}},
		{o: lsOptions{filters: []string{"colour=red"}}, err: "colour"},
		{o: lsOptions{filters: []string{"scope=../x"}}, err: "scope"},
	} {
		got, err := tc.o.listOptions(now)
		if tc.err != "" {
			if err == nil || core.AsError(err).Code != core.CodeBadFlag || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want bad_flag naming %s", tc.o.filters, err, tc.err)
			}
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.o, d)
		}
	}
}
