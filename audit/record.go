// Package audit is the client's audit trail: one JSON line per command
// that runs or moves something (exec, cp, files put/rm, egress policy, rm,
// shell, and the kernel calls and MCP tool calls built on them), appended
// to DIR/YYYYMMDD/SCOPE.jsonl (the UTC date of the record).
//
// A verb fills a Record once its outcome is known and hands it to
// Writer.Append. Output is recorded through Capture, a tee that keeps at
// most its cap. Reading (Read, Follow) and retention (Prune) go by the
// folder names alone: only an entry whose name is exactly an 8-digit date
// is a day.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Defaults of the configuration keys audit_max_code and audit_max_output.
const (
	DefaultMaxCode   = 64 << 10
	DefaultMaxOutput = 16 << 10
)

// Statuses of a Record.
const (
	StatusOK              = "ok"               // ran, exit 0
	StatusExited          = "exited"           // ran, exit code not 0
	StatusTimedOut        = "timed_out"        // killed at its timeout
	StatusOOMKilled       = "oom_killed"       // killed: out of memory
	StatusSignaled        = "signaled"         // killed by a signal (Signal says which)
	StatusKernelRestarted = "kernel_restarted" // a kernel call lost its state
	StatusInterrupted     = "interrupted"      // Ctrl-C / SIGTERM on the client
	StatusError           = "error"            // the command failed (ErrorCode says why)
)

// Record is one line of the audit trail. Names in it (Scope, Session)
// come from validated names; Args, Code and the output are recorded as
// given (a reader quotes them for a terminal).
type Record struct {
	Time    time.Time `json:"time"`              // when the command started (UTC)
	Context string    `json:"context,omitempty"` // the Docker context's name
	Engine  string    `json:"engine,omitempty"`  // its endpoint (unix:///var/run/docker.sock, ssh://...)
	Scope   string    `json:"scope"`
	Session string    `json:"session,omitempty"`
	// Command is the verb: "exec", "cp", "files put", "files rm",
	// "egress policy", "rm", "shell" (and "exec --kernel", "mcp TOOL").
	Command string `json:"command"`
	// MCPClient is the MCP client's name, for MCP tool calls.
	MCPClient string `json:"mcp_client,omitempty"`
	Lang      string `json:"lang,omitempty"`
	// Code is the code run, at most the writer's MaxCode bytes
	// (CodeTruncated); CodeSHA256 and CodeBytes are of the whole code.
	Code          string `json:"code,omitempty"`
	CodeSHA256    string `json:"code_sha256,omitempty"`
	CodeBytes     int64  `json:"code_bytes,omitempty"`
	CodeTruncated bool   `json:"code_truncated,omitempty"`
	// Args are the program's arguments (exec), or the command's operands
	// (cp: SRC DST; files: PATH; rm: SCOPE[/SESSION]; egress policy: the
	// rules).
	Args []string `json:"args,omitempty"`
	// EnvNames are the names of the environment variables given to the
	// program, never their values.
	EnvNames []string `json:"env_names,omitempty"`
	ExitCode int      `json:"exit_code"`
	// Status is one of the Status* constants.
	Status    string `json:"status"`
	Signal    string `json:"signal,omitempty"`
	ErrorCode string `json:"error_code,omitempty"`
	Error     string `json:"error,omitempty"`
	// KernelRestarted: a kernel call whose kernel was restarted (its
	// state is lost).
	KernelRestarted bool  `json:"kernel_restarted,omitempty"`
	DurationMS      int64 `json:"duration_ms"`
	// BytesIn went into the sandbox (code, standard input, files copied
	// in); BytesOut came out (output, files copied out).
	BytesIn  int64 `json:"bytes_in"`
	BytesOut int64 `json:"bytes_out"`
	// Stdout and Stderr are the first bytes of each stream, at most the
	// writer's MaxOutput (…Truncated when there was more).
	Stdout          string `json:"stdout,omitempty"`
	Stderr          string `json:"stderr,omitempty"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
}

// SetCode records code: its SHA-256 and size, and its first max bytes
// (max < 0: all of it); a cut inside a UTF-8 character is moved back.
func (r *Record) SetCode(code []byte, max int) {
	sum := sha256.Sum256(code)
	r.CodeSHA256 = hex.EncodeToString(sum[:])
	r.CodeBytes = int64(len(code))
	r.Code, r.CodeTruncated = capText(code, max)
}

// SetEnv records the names of env (KEY=VALUE entries), sorted, without
// their values.
func (r *Record) SetEnv(env []string) {
	names := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	slices.Sort(names)
	r.EnvNames = slices.Compact(names)
}

// SetOutput records the captured streams (either may be nil).
func (r *Record) SetOutput(stdout, stderr *Capture) {
	if stdout != nil {
		r.Stdout, r.StdoutTruncated = stdout.Text()
		r.BytesOut += stdout.Total()
	}
	if stderr != nil {
		r.Stderr, r.StderrTruncated = stderr.Text()
		r.BytesOut += stderr.Total()
	}
}

// Finish sets the duration from Time to now, and the status from the
// exit code when none was set.
func (r *Record) Finish(now time.Time) {
	r.DurationMS = now.Sub(r.Time).Milliseconds()
	if r.Status == "" {
		r.Status = StatusOK
		if r.ExitCode != 0 {
			r.Status = StatusExited
		}
	}
}

// capText is the first max bytes of b as text (max < 0: all), without a
// character cut in two at the end, and whether anything was left out.
func capText(b []byte, max int) (string, bool) {
	if max < 0 || len(b) <= max {
		return string(b), false
	}
	return string(trimPartialRune(b[:max])), true
}

// trimPartialRune drops an incomplete UTF-8 character at the end of b (a
// cut inside one).
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}
