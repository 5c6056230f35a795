package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker/cli/cli"
	"github.com/docker/cli/cli/command"
	cliconfig "github.com/docker/cli/cli/config"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/docker-sandbox/docker-sandbox/audit"
	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
	"github.com/docker-sandbox/docker-sandbox/files"
	"github.com/docker-sandbox/docker-sandbox/files/tarsafe"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

// The audit trail's hooks. A verb that runs or moves something makes an
// auditor when it starts (no I/O), wraps the program's output writers
// with tee (a capped copy for the record), and once its outcome is known
// makes one call of record. Recording never changes the command's result:
// a failure to write is one warning line on standard error.
//
//	a := newAuditor(dockerCli, c)
//	stdout, outCap := a.tee(dockerCli.Out())
//	... run ...
//	a.record(audit.Record{Scope: ..., Command: "exec", ...}, outCap, nil)
//
// A kernel call or an MCP tool call does the same: execRecord builds an
// exec's record from its result (then Command "exec --kernel", or "mcp
// run_code" with MCPClient set, and KernelRestarted / StatusKernelRestarted
// for a kernel that lost its state); a long-lived server makes one auditor
// per call (newAuditor does no I/O). Every MCP tool's record, the file
// tools' too ("mcp write_file", ...), has MCPClient set.

// auditor records one command (or one call of a long-lived server) in the
// audit trail.
type auditor struct {
	w       *audit.Writer // nil: auditing is off
	errOut  io.Writer
	context string
	engine  string
	start   time.Time
	warned  bool // a failure to write was told: once per command
}

// auditDir is where the trail is written: audit_dir, else
// <docker config dir>/sandbox/audit.
func auditDir(c *config.Config) string {
	if c.AuditDir != "" {
		return c.AuditDir
	}
	return filepath.Join(cliconfig.Dir(), config.UserDir, "audit")
}

// newAuditor starts the record of a command under configuration c (nil:
// the defaults). It does no I/O.
func newAuditor(dockerCli command.Cli, c *config.Config) *auditor {
	if c == nil {
		c = config.Default()
	}
	a := &auditor{errOut: dockerCli.Err(), start: time.Now().UTC()}
	if !c.Audit {
		return a
	}
	a.w = &audit.Writer{Dir: auditDir(c), MaxCode: int(c.AuditMaxCode), MaxOutput: int(c.AuditMaxOutput), RetentionDays: c.AuditRetentionDays}
	a.context = dockerCli.CurrentContext()
	a.engine = engineEndpoint(dockerCli).Host
	return a
}

// on reports whether the command is recorded.
func (a *auditor) on() bool { return a != nil && a.w != nil }

// maxCode is the cap on the code a record keeps.
func (a *auditor) maxCode() int {
	if !a.on() {
		return 0
	}
	return a.w.MaxCode
}

// tee wraps w so that the record keeps the first audit_max_output bytes of
// what passes; when auditing is off, w itself (and a nil capture).
func (a *auditor) tee(w io.Writer) (io.Writer, *audit.Capture) {
	if !a.on() {
		return w, nil
	}
	c := audit.NewCapture(w, a.w.MaxOutput)
	return c, c
}

// record completes rec (its time: the command's start unless set; the
// context and engine; the duration, the status from the exit code unless
// set; the captured output) and appends it. A failure to write is one
// warning line on standard error (once per auditor, however many records
// it writes); the command goes on as if recorded.
func (a *auditor) record(rec audit.Record, stdout, stderr *audit.Capture) {
	if !a.on() {
		return
	}
	if rec.Time.IsZero() {
		rec.Time = a.start
	}
	rec.Context, rec.Engine = a.context, a.engine
	rec.SetOutput(stdout, stderr)
	rec.Finish(time.Now())
	if err := a.w.Append(rec); err != nil && !a.warned {
		a.warned = true
		fmt.Fprintf(a.errOut, "docker sandbox: warning: the audit trail was not written (%s); the command's result is unchanged\n", core.TermText(err.Error()))
	}
}

// recordEach records several records of one command (a copy between two
// scopes is in the files of both).
func (a *auditor) recordEach(recs []audit.Record, stdout, stderr *audit.Capture) {
	for _, r := range recs {
		a.record(r, stdout, stderr)
	}
}

// auditConfig is the configuration of the verbs that read none for their
// own work (rm): a configuration that does not load never stops them, and
// is audited under the defaults.
func auditConfig() *config.Config {
	c, err := loadConfigQuiet()
	if err != nil {
		return config.Default()
	}
	return c
}

// auditError sets rec's status from the error a command ended with.
func auditError(rec *audit.Record, err error) {
	if err == nil {
		return
	}
	e := core.AsError(err)
	rec.Status, rec.ErrorCode, rec.Error = audit.StatusError, e.Code, e.Message
	if e.Code == "interrupted" {
		rec.Status = audit.StatusInterrupted
	}
	if rec.ExitCode == 0 {
		rec.ExitCode = e.Exit
	}
}

// The audit verb.

type auditOptions struct {
	scope  string
	since  string
	follow bool
	format string
}

// auditSource is what the audit verb asks of the trail.
type auditSource interface {
	Read(each func(audit.Record) error) error
	Follow(ctx context.Context, each func(audit.Record) error) error
}

func newAuditCommand(dockerCli command.Cli) *cobra.Command {
	var o auditOptions
	cmd := &cobra.Command{
		Use:   "audit [OPTIONS]",
		Short: "Show the audit trail: one record per command that ran or moved something",
		Long: `Show the audit trail: one record per exec, cp, files put/rm, egress policy
change, rm and shell, written on this client to
${DOCKER_CONFIG:-~/.docker}/sandbox/audit/YYYYMMDD/SCOPE.jsonl (config audit_dir).`,
		Example: `  docker sandbox audit --scope ci-job --since 1h
  docker sandbox audit -f
  docker sandbox audit --format json | jq 'select(.exit_code != 0)'
  docker sandbox audit --format 'table {{.Time}}\t{{.Command}}\t{{.Code}}'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := dockerCli.Out()
			f, err := o.filter(time.Now())
			if err != nil {
				return fail(out, o.format, err)
			}
			c, err := loadConfig()
			if err != nil {
				return fail(out, o.format, err)
			}
			ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			return fail(out, o.format, runAudit(ctx, &audit.Reader{Dir: auditDir(c), Filter: f}, out, o))
		},
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.SetFlagErrorFunc(flagError)
	f := cmd.Flags()
	f.StringVarP(&o.scope, "scope", "s", "", "Only this scope's records")
	f.StringVar(&o.since, "since", "", "Only records from this time on: a duration before now (90m, 2h, 7d) or a time (2026-12-01, 2026-12-01T10:00:00Z)")
	f.BoolVarP(&o.follow, "follow", "f", false, "Keep printing new records")
	f.StringVar(&o.format, "format", "", "Output format: table, json (one object per line), table TEMPLATE, or a Go template; fields: the JSON names ({{.exit_code}}) or the table's columns ({{.Exit}})")
	return cmd
}

// filter checks the flags and makes the reader's filter.
func (o auditOptions) filter(now time.Time) (audit.Filter, error) {
	var f audit.Filter
	if o.scope != "" {
		if err := core.ValidateName("scope", o.scope); err != nil {
			return f, err
		}
		f.Scope = o.scope
	}
	if o.since != "" {
		t, err := parseSince(o.since, now)
		if err != nil {
			return f, err
		}
		f.Since = t
	}
	return f, nil
}

// parseSince reads --since: a duration before now (Go's, or whole days
// "7d"), or a time (RFC 3339, or a date or date and time in local time).
func parseSince(s string, now time.Time) (time.Time, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if d, err := strconv.Atoi(n); err == nil && d >= 0 {
			return now.AddDate(0, 0, -d), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, core.Errorf(core.CodeBadFlag, "invalid --since %q: give a duration before now (90m, 2h, 7d) or a time (2026-12-01, 2026-12-01T10:00:00Z)", s)
}

// runAudit prints the records (-f: then the new ones, until ctx ends,
// which is not an error). JSON is one record per line, as written.
func runAudit(ctx context.Context, src auditSource, out io.Writer, o auditOptions) error {
	var rows *listStream[audit.Record]
	if !isJSON(o.format) {
		var err error
		if rows, err = auditFormat.stream(out, o.format, o.follow); err != nil {
			return err
		}
	}
	each := func(r audit.Record) error {
		if rows == nil {
			return writeJSON(out, r)
		}
		return rows.row(r)
	}
	var err error
	if o.follow {
		err = src.Follow(ctx, each)
	} else {
		err = src.Read(each)
	}
	if rows != nil {
		if ferr := rows.end(err == nil); err == nil {
			err = ferr
		}
	}
	return err
}

// auditFormat is how audit prints a record. Arguments, code and errors
// are whatever a command was given or a sandbox said: quoted.
var auditFormat = listFormat[audit.Record]{
	columns: []column[audit.Record]{
		{"Time", "TIME", func(r audit.Record) string { return r.Time.Local().Format(time.RFC3339) }},
		{"Context", "CONTEXT", func(r audit.Record) string { return core.TermText(dash(r.Context)) }},
		{"Scope", "SCOPE", func(r audit.Record) string { return core.TermText(r.Scope) }},
		{"Session", "SESSION", func(r audit.Record) string { return core.TermText(dash(r.Session)) }},
		{"Command", "COMMAND", func(r audit.Record) string { return core.TermText(r.Command) }},
		{"Lang", "LANG", func(r audit.Record) string { return core.TermText(dash(r.Lang)) }},
		{"Exit", "EXIT", func(r audit.Record) string { return strconv.Itoa(r.ExitCode) }},
		{"Status", "STATUS", func(r audit.Record) string { return core.TermText(r.Status) }},
		{"Duration", "DURATION", func(r audit.Record) string { return (time.Duration(r.DurationMS) * time.Millisecond).String() }},
		{"What", "WHAT", func(r audit.Record) string { return core.TermText(auditWhat(r)) }},
	},
	table: `table {{.Time}}\t{{.Scope}}\t{{.Session}}\t{{.Command}}\t{{.Lang}}\t{{.Exit}}\t{{.Status}}\t{{.Duration}}\t{{.What}}`,
}

// auditWhat is a record in a few words: the start of its code's first
// line, else its operands.
func auditWhat(r audit.Record) string {
	s := strings.Join(r.Args, " ")
	if r.Code != "" {
		s, _, _ = strings.Cut(strings.TrimSpace(r.Code), "\n")
	}
	if r := []rune(s); len(r) > 40 {
		s = string(r[:37]) + "..."
	}
	return dash(s)
}

// execRecord is the record of an exec: what ran, with what, and how it
// ended (runErr: the call's error; interrupted: Ctrl-C).
func execRecord(t core.Target, lang string, code []byte, maxCode int, args, env []string, stdinBytes int64, res sbexec.Result, runErr error, interrupted bool) audit.Record {
	st := res.Status
	rec := audit.Record{Scope: t.Scope, Session: t.Session, Command: "exec", Lang: lang, Args: args,
		ExitCode: st.ExitCode, BytesIn: int64(len(code)) + stdinBytes}
	rec.SetCode(code, maxCode)
	rec.SetEnv(env)
	switch {
	case interrupted:
		rec.Status, rec.ErrorCode, rec.ExitCode = audit.StatusInterrupted, "interrupted", 130
	case runErr != nil:
		auditError(&rec, runErr)
	case st.TimedOut:
		rec.Status = audit.StatusTimedOut
	case st.OOMKilled:
		rec.Status = audit.StatusOOMKilled
	case st.ErrorCode != "":
		rec.Status, rec.ErrorCode, rec.Error = audit.StatusError, st.ErrorCode, st.Error
	case st.Signal != 0:
		rec.Status = audit.StatusSignaled
	}
	if st.Signal != 0 {
		rec.Signal = signalName(st.Signal)
	}
	return rec
}

// kernelRecord marks an exec's record as a kernel call (exec --kernel):
// its command, and whether its kernel was restarted (state lost).
func kernelRecord(rec *audit.Record, st wire.RunStatus, reset bool) {
	rec.Command = "exec --kernel"
	if reset {
		rec.Command = "exec --kernel-reset"
	}
	rec.KernelRestarted = st.KernelRestarted || st.StateLost
	if rec.Status == "" && st.StateLost {
		rec.Status = audit.StatusKernelRestarted
	}
}

// recordingCopier keeps the result of the copy it passes on, for the
// record.
type recordingCopier struct {
	sandboxCopier
	res *tarsafe.Result
}

func (c *recordingCopier) Copy(ctx context.Context, src, dst files.Location, stdin io.Reader, stdout io.Writer) (*tarsafe.Result, error) {
	res, err := c.sandboxCopier.Copy(ctx, src, dst, stdin, stdout)
	c.res = res
	return res, err
}

// cpRecords are the records of a copy: one in the file of each scope it
// read from or wrote to (BytesIn: into a sandbox, BytesOut: out of one).
func cpRecords(a cpArgs, res *tarsafe.Result, err error) []audit.Record {
	var n int64
	if res != nil {
		n = res.Bytes
	}
	var out []audit.Record
	for _, l := range []files.Location{a.dst, a.src} {
		if l.Kind != files.Sandbox || slices.ContainsFunc(out, func(r audit.Record) bool { return r.Scope == l.Target.Scope }) {
			continue
		}
		r := audit.Record{Scope: l.Target.Scope, Session: l.Target.Session, Command: "cp", Args: []string{a.srcArg, a.dstArg}}
		if a.dst.Kind == files.Sandbox {
			r.BytesIn = n
		}
		if a.src.Kind == files.Sandbox {
			r.BytesOut = n
		}
		auditError(&r, err)
		out = append(out, r)
	}
	return out
}

// filesRecord is the record of files put or files rm.
func filesRecord(command string, loc files.Location, in int64, err error) audit.Record {
	r := audit.Record{Scope: loc.Target.Scope, Session: loc.Target.Session, Command: command, Args: []string{loc.Path}, BytesIn: in}
	auditError(&r, err)
	return r
}

// flagsRecord is the record of a command on a scope whose operands are
// its flags (egress policy): the flags given, as --name=value.
func flagsRecord(command, scope string, fs *pflag.FlagSet, err error) audit.Record {
	r := audit.Record{Scope: scope, Command: command}
	fs.Visit(func(f *pflag.Flag) {
		if f.Name != "format" {
			r.Args = append(r.Args, "--"+f.Name+"="+f.Value.String())
		}
	})
	auditError(&r, err)
	return r
}

// auditedRemover records each sandbox rm removes (or fails to).
type auditedRemover struct {
	sandboxRemover
	au *auditor
}

func (m *auditedRemover) RemoveSandbox(ctx context.Context, t core.Target, force bool) (bool, error) {
	found, err := m.sandboxRemover.RemoveSandbox(ctx, t, force)
	if found || err != nil {
		r := audit.Record{Scope: t.Scope, Session: t.Session, Command: "rm", Args: []string{t.String()}}
		if force {
			r.Args = append([]string{"--force"}, r.Args...)
		}
		auditError(&r, err)
		m.au.record(r, nil, nil)
	}
	return found, err
}

// shellRecord is the record of a shell: its COMMAND when one was given,
// the names of its environment, and how it ended (the shell's exit status
// comes as a StatusError). What is typed in it is not recorded.
func shellRecord(t core.Target, command []string, given bool, env []string, err error) audit.Record {
	r := audit.Record{Scope: t.Scope, Session: t.Session, Command: "shell"}
	if given {
		r.Args = command
	}
	r.SetEnv(env)
	var st cli.StatusError
	if errors.As(err, &st) {
		r.ExitCode = st.StatusCode
		return r
	}
	auditError(&r, err)
	return r
}
