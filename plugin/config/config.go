// Package config loads the effective configuration of docker sandbox and
// remembers where each value came from.
//
// Layers, from lowest to highest precedence:
//
//   - defaults (the key table in keys.go);
//   - the user file, <docker config dir>/sandbox/config.toml;
//   - the project file, .docker-sandbox.toml, the nearest one found by
//     walking up from the working directory, stopping at the repository
//     root (a folder with a .git entry), at $HOME, and before a folder that
//     other users may write to (such as /tmp); see FindProjectFile. Unless
//     trusted, its values apply only where they narrow the layers below
//     (see trust.go);
//   - the environment, DOCKER_SANDBOX_<KEY> (DOCKER_SANDBOX_TIMEOUT=30s);
//     an empty variable counts as unset;
//   - flags: the key table declares them (AddFlags, by verb group) and
//     SetFlags applies those given; [Config.Set] sets one.
//
// Load applies the first four. Missing files are fine; a syntax error, an
// unknown key or a bad value is an [*Error] whose message names the file,
// the line and the key, or the environment variable, or the flag.
//
// Sizes are integers of bytes or strings such as "512m", "1g", "1GiB" (see
// [ParseSize]); durations are Go duration strings such as "90s" or "1h30m"
// (see [ParseDuration]).
//
// Files may also hold per-scope egress policies:
//
//	[scope.ci-job]
//	allow = ["pypi.org", "*.pythonhosted.org"]
//	allow_ports = [443]
//	allow_cidrs = ["10.1.0.0/16"]
//	deny = ["*.internal.example"]
//
// A key of a scope table in the project file replaces the same key of the
// same scope in the user file; the other keys are kept.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
)

// File names and the environment prefix.
const (
	// UserDir and UserFileName: the user file is
	// <docker config dir>/UserDir/UserFileName.
	UserDir      = "sandbox"
	UserFileName = "config.toml"
	// ProjectFileName is the project file looked up from the working
	// directory up (see FindProjectFile).
	ProjectFileName = ".docker-sandbox.toml"
	// EnvPrefix starts every environment variable read by Load.
	EnvPrefix = "DOCKER_SANDBOX_"
)

// Source kinds.
const (
	KindDefault = "default"
	KindUser    = "user"
	KindProject = "project"
	KindEnv     = "env"
	KindFlag    = "flag"
)

// Error codes, for the JSON error object and exit code 125.
const (
	CodeBadConfig = "bad_config"
	CodeBadFlag   = "bad_flag"
)

// Source is where a value came from.
type Source struct {
	Kind string // KindDefault, KindUser, KindProject, KindEnv or KindFlag
	File string // the file, for KindUser and KindProject
	Line int    // the line in File, 1-based; 0 if unknown
	// Name is the environment variable (KindEnv) or the flag (KindFlag).
	// For KindDefault it is empty, or the key that capped the default (a
	// default timeout of 60s becomes 30s with max_timeout = "30s").
	Name string
}

// String renders the source: "default", "user file /p/config.toml:3",
// "project file /p/.docker-sandbox.toml:5", "env DOCKER_SANDBOX_TIMEOUT",
// "flag --timeout".
func (s Source) String() string {
	switch s.Kind {
	case KindDefault, "":
		if s.Name != "" {
			return "default (capped by " + s.Name + ")"
		}
		return KindDefault
	case KindUser, KindProject:
		if s.Line > 0 {
			return fmt.Sprintf("%s file %s:%d", s.Kind, s.File, s.Line)
		}
		return fmt.Sprintf("%s file %s", s.Kind, s.File)
	case KindEnv:
		return "env " + s.Name
	case KindFlag:
		return "flag " + flagDisplay(s.Name)
	}
	return s.Kind
}

func (s Source) rank() int {
	switch s.Kind {
	case KindUser:
		return 1
	case KindProject:
		return 2
	case KindEnv:
		return 3
	case KindFlag:
		return 4
	}
	return 0
}

func flagDisplay(name string) string {
	if name == "" || strings.HasPrefix(name, "-") {
		return name
	}
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// Config is the effective configuration. Make one with Load or Default.
type Config struct {
	// Settings are the container settings (the keys of the FlagsSandbox
	// group: image, network, runtime, memory, cpus, pids, nofile, tmp_size,
	// disk, idle_ttl, max_lifetime), as a Spec embeds them.
	core.Settings

	DefaultScope string // default_scope
	DefaultLang  string // default_lang; "" means sh
	RuntimeBase  string // runtime_base: base image of the runtime image

	Timeout    time.Duration // timeout
	MaxTimeout time.Duration // max_timeout

	MaxMemory int64 // max_memory, bytes
	MaxOutput int64 // max_output, bytes per stream
	// Kernel runs exec's code in the sandbox's kernel of its language;
	// KernelReset restarts that kernel first (kernel, kernel_reset).
	Kernel      bool
	KernelReset bool

	MaxSandboxes int // max_sandboxes

	// ExecChannel: warm execs go through the sandbox's persistent exec
	// channel (exec_channel; package exec/channel).
	ExecChannel bool

	// CopyFrozen: a copy from a running sandbox (runc) to the host reads
	// through the engine's archive endpoint while the sandbox is paused,
	// where that is safe (copy_frozen; exec.FrozenReader). Off by default:
	// an engine exec started into the sandbox as it is paused can wedge it
	// (README, Files: cp and files).
	CopyFrozen bool

	// CopyLocal: a copy from a sandbox to the host, on an engine on this
	// machine (a unix socket), by a plugin running as root, reads the
	// sandbox's volume there (copy_local; files.LocalReader).
	CopyLocal bool

	// Caps of one cp or files call (host extraction and the helper's).
	CopyMaxSize     int64 // copy_max_size, bytes
	CopyMaxFileSize int64 // copy_max_file_size, bytes; 0: copy_max_size
	CopyMaxEntries  int64 // copy_max_entries

	// The audit trail.
	Audit              bool   // audit: on by default
	AuditDir           string // audit_dir; "": <docker config dir>/sandbox/audit
	AuditRetentionDays int    // audit_retention_days; 0: keep every day
	AuditMaxCode       int64  // audit_max_code, bytes of code kept per record
	AuditMaxOutput     int64  // audit_max_output, bytes kept of each stream

	// Scopes are the [scope.NAME] tables of both files, by scope name.
	Scopes map[string]ScopePolicy
	// Langs are the [lang.NAME] tables of the user file and a trusted
	// project file, by language name (see lang.go).
	Langs map[string]LangConfig

	// UserFile and ProjectFile are the files considered: UserFile even when
	// it does not exist, ProjectFile "" when none was found.
	UserFile, ProjectFile string
	// Project is the trust decision about ProjectFile (zero without one).
	Project ProjectTrust
	// Refused lists the values of an untrusted project file that were
	// ignored, in file order.
	Refused []Refusal

	sources map[string]Source // by key; absent means default
	raw     map[string]string // the text of env and flag values, by key
}

// ScopePolicy is one [scope.NAME] table.
type ScopePolicy struct {
	Allow      []string // host patterns: "pypi.org", "*.example.com", "*"
	AllowPorts []int    // ports, 1-65535
	AllowCIDRs []string // canonical prefixes ("10.0.0.0/8"); a bare address becomes /32 or /128
	Deny       []string // host patterns refused even when Allow or AllowCIDRs match
	// Source is the file and line of the scope's table in the highest
	// precedence file that sets it.
	Source Source
}

// LoadOptions are the inputs of Load.
type LoadOptions struct {
	// DockerConfigDir is $DOCKER_CONFIG or ~/.docker; "" skips the user file.
	DockerConfigDir string
	// WorkDir is where the project file search starts; "" means the
	// current directory.
	WorkDir string
	// LookupEnv reads the environment; nil means os.LookupEnv. HOME is read
	// through it (the project file search stops there).
	LookupEnv func(string) (string, bool)
}

// Error is a configuration error: a bad file, value, variable or flag.
type Error struct {
	Code   string // CodeBadConfig, or CodeBadFlag for flags
	Key    string // the key, "scope.NAME.KEY" in scope tables; "" for file-level errors
	Source Source // where the bad value came from
	Msg    string // the whole message
	Err    error  // the underlying error, if any (I/O, TOML syntax)
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Default returns the configuration made of defaults only.
func Default() *Config {
	c := &Config{Scopes: map[string]ScopePolicy{}}
	c.init()
	for _, d := range keyTable {
		d.reset(c)
	}
	return c
}

func (c *Config) init() {
	if c.sources == nil {
		c.sources = map[string]Source{}
	}
	if c.raw == nil {
		c.raw = map[string]string{}
	}
	if c.Scopes == nil {
		c.Scopes = map[string]ScopePolicy{}
	}
}

// UserFilePath returns the user file for a Docker config directory.
func UserFilePath(dockerConfigDir string) string {
	return filepath.Join(dockerConfigDir, UserDir, UserFileName)
}

// FindProjectFile returns the nearest ProjectFileName in dir or one of its
// parents, or "" if there is none. The search stops after the repository
// root (the first folder holding a .git entry), after home (the user's home
// folder; "" for none), and before a folder that other users may write to
// (mode o+w, such as /tmp), whose files anyone could have put there.
func FindProjectFile(dir, home string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	homeReal := ""
	if home != "" {
		home = filepath.Clean(home)
		homeReal, _ = filepath.EvalSymlinks(home)
	}
	for {
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm()&0o002 != 0 {
			return "", nil
		}
		p := filepath.Join(dir, ProjectFileName)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return "", nil
		}
		if home != "" && dir == home {
			return "", nil
		}
		if homeReal != "" {
			if real, err := filepath.EvalSymlinks(dir); err == nil && real == homeReal {
				return "", nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", nil
		}
		dir = parent
	}
}

// Load reads defaults, the user file, the project file and the environment,
// and checks the limits between keys (see Validate).
func Load(o LoadOptions) (*Config, error) {
	c := Default()
	lookup := o.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if o.DockerConfigDir != "" {
		c.UserFile = UserFilePath(o.DockerConfigDir)
		data, err := os.ReadFile(c.UserFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, &Error{Code: CodeBadConfig, Source: Source{Kind: KindUser, File: c.UserFile},
				Msg: fmt.Sprintf("config: cannot read user file: %v", err), Err: err}
		default:
			if err := c.applyFile(KindUser, c.UserFile, data, nil); err != nil {
				return nil, err
			}
		}
	}
	wd := o.WorkDir
	if wd == "" {
		var err error
		if wd, err = os.Getwd(); err != nil {
			return nil, &Error{Code: CodeBadConfig, Msg: "config: cannot find the project file: " + err.Error(), Err: err}
		}
	}
	home, _ := lookup("HOME")
	pf, err := FindProjectFile(wd, home)
	if err != nil {
		return nil, &Error{Code: CodeBadConfig, Msg: "config: cannot find the project file: " + err.Error(), Err: err}
	}
	if pf != "" {
		if err := c.applyProject(o, lookup, pf); err != nil {
			return nil, err
		}
	}
	for _, d := range keyTable {
		name := EnvVar(d.name)
		v, ok := lookup(name)
		if !ok || v == "" {
			continue
		}
		src := Source{Kind: KindEnv, Name: name}
		if p := d.fromText(c, v); p != nil {
			return nil, valueError(d.name, src, strconvQuote(v), p)
		}
		c.sources[d.name] = src
		c.raw[d.name] = v
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

// valueError builds the error for a bad value of key from src. subject is
// the value as it should appear in the message.
func valueError(key string, src Source, subject string, p *problem) *Error {
	e := &Error{Code: CodeBadConfig, Key: key, Source: src}
	switch src.Kind {
	case KindFlag:
		e.Code = CodeBadFlag
		e.Msg = fmt.Sprintf("invalid value %s for %s: %s", subject, flagDisplay(src.Name), p.flagPred())
		return e
	case KindEnv:
		e.Msg = fmt.Sprintf("config: env %s: %s %s", src.Name, subject, p.pred)
		return e
	case KindUser, KindProject:
		e.Msg = fmt.Sprintf("config: %s: key %q: ", fileLoc(src), key)
	default:
		e.Msg = fmt.Sprintf("config: default of key %q: ", key)
	}
	if p.bare {
		e.Msg += p.pred
	} else {
		e.Msg += subject + " " + p.pred
	}
	return e
}

func fileLoc(src Source) string {
	if src.Line > 0 {
		return fmt.Sprintf("%s:%d", src.File, src.Line)
	}
	return src.File
}

// applyProject reads the project file pf, decides whether it is trusted,
// and applies it over c: all of it when trusted, else only what narrows the
// layers below (see trust.go).
func (c *Config) applyProject(o LoadOptions, lookup func(string) (string, bool), pf string) error {
	c.ProjectFile = pf
	src := Source{Kind: KindProject, File: pf}
	data, sum, err := ReadProjectFile(pf)
	if err != nil {
		return &Error{Code: CodeBadConfig, Source: src,
			Msg: fmt.Sprintf("config: cannot read project file: %v", err), Err: err}
	}
	key, err := TrustKey(pf)
	if err != nil {
		return &Error{Code: CodeBadConfig, Source: src, Msg: fmt.Sprintf("config: project file %s: %v", pf, err), Err: err}
	}
	byEnv, err := trustFromEnv(lookup)
	if err != nil {
		return err
	}
	var recs []TrustRecord
	if o.DockerConfigDir != "" {
		tf := TrustFilePath(o.DockerConfigDir)
		if recs, err = LoadTrust(tf); err != nil {
			return &Error{Code: CodeBadConfig, Source: Source{Kind: KindUser, File: tf},
				Msg: "config: trust file " + err.Error(), Err: err}
		}
	}
	c.Project = decideTrust(pf, key, sum, byEnv, recs)
	var base *Config
	if !c.Project.Trusted {
		// What the user file and the defaults give, defaults already
		// capped by the user's maxima (an inconsistent user file is
		// reported by the final Validate).
		base = c.clone()
		_ = base.Validate()
	}
	return c.applyFile(KindProject, pf, data, base)
}

// clone copies c deeply enough to compare and restore values.
func (c *Config) clone() *Config {
	n := *c
	n.sources = maps.Clone(c.sources)
	n.raw = maps.Clone(c.raw)
	n.Scopes = make(map[string]ScopePolicy, len(c.Scopes))
	for k, p := range c.Scopes {
		p.Allow, p.AllowPorts, p.AllowCIDRs, p.Deny = slices.Clone(p.Allow), slices.Clone(p.AllowPorts), slices.Clone(p.AllowCIDRs), slices.Clone(p.Deny)
		n.Scopes[k] = p
	}
	n.Langs = make(map[string]LangConfig, len(c.Langs))
	for k, l := range c.Langs {
		l.Interpreter, l.Extensions, l.Shebang = slices.Clone(l.Interpreter), slices.Clone(l.Extensions), slices.Clone(l.Shebang)
		n.Langs[k] = l
	}
	n.Refused = slices.Clone(c.Refused)
	return &n
}

// applyFile applies the text of one file over c. base is nil for a trusted
// file; for an untrusted project file it is the configuration below it, and
// each value is checked against base by its key's trust rule.
func (c *Config) applyFile(kind, path string, data []byte, base *Config) error {
	text := string(data)
	var m map[string]any
	md, err := toml.Decode(text, &m)
	if err != nil {
		src := Source{Kind: kind, File: path}
		msg := err.Error()
		var pe toml.ParseError
		var ppe *toml.ParseError
		if errors.As(err, &pe) || errors.As(err, &ppe) && ppe != nil {
			if ppe != nil {
				pe = *ppe
			}
			src.Line = pe.Position.Line
			msg = pe.Message
		}
		return &Error{Code: CodeBadConfig, Source: src,
			Msg: fmt.Sprintf("config: %s: syntax error: %s", fileLoc(src), msg), Err: err}
	}
	f := &fileApply{c: c, kind: kind, path: path, root: m, lines: keyLines(text), scopes: map[string]bool{}, base: base}
	done := map[string]bool{}
	for _, k := range md.Keys() {
		k = f.unit(k)
		id := strings.Join(k, "\x00")
		if done[id] {
			continue
		}
		done[id] = true
		if err := f.apply(k); err != nil {
			return err
		}
	}
	return nil
}

// fileApply applies the keys of one decoded file.
type fileApply struct {
	c      *Config
	kind   string
	path   string
	root   map[string]any
	lines  lineMap
	scopes map[string]bool // scope tables already seen in this file
	base   *Config         // nil, or the layers below an untrusted file
}

// refuse records an ignored value of an untrusted file.
func (f *fileApply) refuse(k []string, p *problem) {
	f.c.Refused = append(f.c.Refused, Refusal{Key: displayKey(k), Value: tomlText(f.value(k)), Source: f.src(k), Reason: p.pred})
}

// tomlText renders a decoded TOML value as it would be written.
func tomlText(v any) string {
	if a, ok := v.([]any); ok {
		parts := make([]string, len(a))
		for i, e := range a {
			parts[i] = tomlValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return tomlValue(v)
}

// unit reduces a key path to the part this package checks as one: the
// top-level key, or up to scope.NAME.KEY. Deeper keys are reported at it.
func (f *fileApply) unit(k toml.Key) []string {
	n := 1
	if k[0] == scopeTable || k[0] == langTable {
		n = 3
	}
	if len(k) < n {
		n = len(k)
	}
	return k[:n]
}

func (f *fileApply) src(k []string) Source {
	return Source{Kind: f.kind, File: f.path, Line: f.lines.lineOf(k)}
}

func (f *fileApply) value(k []string) any {
	var v any = f.root
	for _, p := range k {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func displayKey(k []string) string { return toml.Key(k).String() }

func (f *fileApply) fail(k []string, subject string, p *problem) error {
	e := valueError(displayKey(k), f.src(k), subject, p)
	return e
}

func (f *fileApply) apply(k []string) error {
	if k[0] == langTable {
		return f.applyLang(k)
	}
	if k[0] != scopeTable {
		d := lookupKey(k[0])
		if d == nil {
			return f.unknown(k, knownTopKeys(), k[0])
		}
		v := f.value(k)
		if p := d.fromTOML(f.c, v); p != nil {
			return f.fail(k, tomlValue(v), p)
		}
		if f.base != nil {
			if p := d.narrows(f.c, f.base); p != nil {
				f.refuse(k, p)
				d.set(f.c, d.get(f.base))
				if s, ok := f.base.sources[d.name]; ok {
					f.c.sources[d.name] = s
				} else {
					delete(f.c.sources, d.name)
				}
				return nil
			}
		}
		f.c.sources[d.name] = f.src(k)
		delete(f.c.raw, d.name)
		return nil
	}
	if _, ok := f.value(k[:1]).(map[string]any); !ok {
		return f.fail(k[:1], "", wrongType("a table of scopes ([scope.NAME])", f.value(k[:1])))
	}
	if len(k) == 1 {
		return nil
	}
	name := k[1]
	if err := f.scope(k[:2]); err != nil {
		return err
	}
	if len(k) == 2 {
		return nil
	}
	pol := f.c.Scopes[name]
	var below ScopePolicy // what the layers below grant the scope
	if f.base != nil {
		below = f.base.Scopes[name]
	}
	v := f.value(k)
	var p *problem
	why := ""
	switch k[2] {
	case "allow":
		pol.Allow, p = stringList(v, checkHostPattern)
		why = coverHosts(below.Allow, pol.Allow)
	case "allow_ports":
		pol.AllowPorts, p = portList(v)
		why = coverPorts(below.AllowPorts, pol.AllowPorts)
	case "allow_cidrs":
		var cidrs []string
		cidrs, p = stringList(v, checkCIDR)
		for i, s := range cidrs {
			cidrs[i] = canonicalCIDR(s)
		}
		pol.AllowCIDRs = cidrs
		why = coverCIDRs(below.AllowCIDRs, pol.AllowCIDRs)
	case "deny":
		pol.Deny, p = stringList(v, checkHostPattern)
		why = keepsDenied(below.Deny, pol.Deny)
	default:
		return f.unknown(k, scopeKeys, k[2])
	}
	if p != nil {
		return f.fail(k, "", p)
	}
	if f.base != nil {
		if why != "" {
			f.refuse(k, &problem{pred: why + ": an untrusted project file may only narrow a scope's egress"})
			return nil
		}
		// The table's source is this file once one of its keys is taken.
		pol.Source = f.src(k[:2])
	}
	f.c.Scopes[name] = pol
	return nil
}

// entry is the policy as Entries shows it.
func (p ScopePolicy) entry() map[string]any {
	m := map[string]any{"allow": nonNil(p.Allow), "allow_ports": nonNil(p.AllowPorts), "allow_cidrs": nonNil(p.AllowCIDRs)}
	if len(p.Deny) > 0 {
		m["deny"] = p.Deny
	}
	return m
}

// keepsDenied says why a project file's deny list proj does not refuse
// every host the layers below deny (below), or "".
func keepsDenied(below, proj []string) string {
	var ps []string
	for _, s := range proj {
		if p, err := policy.ParsePattern(s); err == nil {
			ps = append(ps, p.String())
		}
	}
	for _, s := range below {
		if p, err := policy.ParsePattern(s); err == nil && !patternCovered(p.String(), ps) {
			return fmt.Sprintf("stops denying %s, which the user file denies this scope", p)
		}
	}
	return ""
}

// scope checks the table scope.NAME and records its source, once per file.
func (f *fileApply) scope(k []string) error {
	name := k[1]
	if f.scopes[name] {
		return nil
	}
	if p := validName(name); p != nil {
		return f.fail(k, fmt.Sprintf("%q", name), p)
	}
	if _, ok := f.value(k).(map[string]any); !ok {
		return f.fail(k, "", wrongType("a table", f.value(k)))
	}
	f.scopes[name] = true
	if f.base != nil {
		return nil // see apply: an untrusted table counts only by its keys
	}
	pol := f.c.Scopes[name]
	pol.Source = f.src(k)
	f.c.Scopes[name] = pol
	return nil
}

func (f *fileApply) unknown(k []string, known []string, name string) error {
	msg := fmt.Sprintf("unknown key (known keys: %s)", strings.Join(known, ", "))
	if s := closest(name, known); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return f.fail(k, "", &problem{pred: msg, bare: true})
}

func knownTopKeys() []string {
	return append(Keys(), scopeTable+".NAME", langTable+".NAME")
}

// closest returns the known key within edit distance 2 of name, if any.
func closest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func stringList(v any, check func(string) *problem) ([]string, *problem) {
	arr, ok := v.([]any)
	if !ok {
		return nil, wrongType("an array of strings", v)
	}
	out := make([]string, 0, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, &problem{pred: fmt.Sprintf("element %d must be a string, not %s", i+1, tomlTypeName(e)), bare: true}
		}
		if p := check(s); p != nil {
			return nil, &problem{pred: fmt.Sprintf("element %d: %q %s", i+1, s, p.pred), bare: true}
		}
		out = append(out, s)
	}
	return out, nil
}

func portList(v any) ([]int, *problem) {
	arr, ok := v.([]any)
	if !ok {
		return nil, wrongType("an array of port numbers", v)
	}
	out := make([]int, 0, len(arr))
	for i, e := range arr {
		n, ok := e.(int64)
		if !ok {
			return nil, &problem{pred: fmt.Sprintf("element %d must be an integer, not %s", i+1, tomlTypeName(e)), bare: true}
		}
		if n < 1 || n > 65535 {
			return nil, &problem{pred: fmt.Sprintf("element %d: %d is not a port (use 1 to 65535)", i+1, n), bare: true}
		}
		out = append(out, int(n))
	}
	return out, nil
}

// checkHostPattern refuses what can never be a host pattern; the egress
// package parses the rest.
func checkHostPattern(s string) *problem {
	bad := &problem{pred: "is not a host pattern (use e.g. pypi.org, *.example.com, *)"}
	if s == "" || strings.ContainsAny(s, " \t\r\n/") {
		return bad
	}
	if s == "*" {
		return nil
	}
	if strings.Contains(strings.TrimPrefix(s, "*."), "*") {
		return bad
	}
	return nil
}

func checkCIDR(s string) *problem {
	if _, err := netip.ParsePrefix(s); err == nil {
		return nil
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return nil
	}
	return &problem{pred: "is not a CIDR prefix (use e.g. 10.0.0.0/8)"}
}

func canonicalCIDR(s string) string {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked().String()
	}
	a, _ := netip.ParseAddr(s)
	return netip.PrefixFrom(a, a.BitLen()).String()
}

// Source returns where the value of key came from. For "scope.NAME" it is
// the scope policy's source. An unknown key gives the zero Source.
func (c *Config) Source(key string) Source {
	if name, ok := strings.CutPrefix(key, scopeTable+"."); ok {
		return c.Scopes[name].Source
	}
	if lookupKey(key) == nil {
		return Source{}
	}
	if s, ok := c.sources[key]; ok {
		return s
	}
	return Source{Kind: KindDefault}
}

// Set applies a flag value to key, given as text and parsed and checked as in
// files, and records Source{Kind: "flag", Name: flagName}. flagName is the
// flag as the user typed it ("--timeout" or "timeout"); "" derives it from
// the key. The limits between keys are checked by Validate.
func (c *Config) Set(key, value, flagName string) error {
	if flagName == "" {
		flagName = "--" + strings.ReplaceAll(key, "_", "-")
	}
	src := Source{Kind: KindFlag, Name: flagName}
	d := lookupKey(key)
	if d == nil {
		return &Error{Code: CodeBadFlag, Key: key, Source: src,
			Msg: fmt.Sprintf("%s: unknown configuration key %q (known keys: %s)", flagDisplay(flagName), key, strings.Join(Keys(), ", "))}
	}
	c.init()
	if p := d.fromText(c, value); p != nil {
		return valueError(key, src, strconvQuote(value), p)
	}
	c.sources[key] = src
	c.raw[key] = value
	return nil
}

// Validate checks the limits between keys: timeout <= max_timeout and
// memory <= max_memory. A default that exceeds a configured maximum is
// lowered to it (its source says "default (capped by max_timeout)"); a value
// that was set is an error. The error is reported at whichever of the two
// values was set by the higher precedence layer (the limited key on a tie),
// naming the source of the other; its Code is CodeBadFlag when that is a flag.
func (c *Config) Validate() error {
	c.init()
	if err := c.validateLangs(); err != nil {
		return err
	}
	for _, r := range crossRules {
		lim, max := lookupKey(r.key), lookupKey(r.max)
		ls, ms := c.Source(r.key), c.Source(r.max)
		mv := asInt64(max.get(c))
		if ls.Kind == KindDefault {
			if asInt64(lim.def) > mv {
				lim.set(c, max.get(c))
				c.sources[r.key] = Source{Kind: KindDefault, Name: r.max}
			} else {
				lim.reset(c)
				delete(c.sources, r.key)
			}
			continue
		}
		if asInt64(lim.get(c)) <= mv {
			continue
		}
		if ms.rank() > ls.rank() {
			return c.limitError(max, ms, fmt.Sprintf("must be at least %s %s (%s)", r.key, lim.show(c), ls))
		}
		return c.limitError(lim, ls, fmt.Sprintf("must be at most %s %s (%s)", r.max, max.show(c), ms))
	}
	return nil
}

func (c *Config) limitError(d *keyDesc, src Source, pred string) error {
	subject := d.show(c)
	if raw, ok := c.raw[d.name]; ok && (src.Kind == KindEnv || src.Kind == KindFlag) {
		subject = strconvQuote(raw)
	}
	return valueError(d.name, src, subject, &problem{pred: pred})
}

func asInt64(v any) int64 {
	switch x := v.(type) {
	case time.Duration:
		return int64(x)
	case int64:
		return x
	case int:
		return int64(x)
	}
	panic(fmt.Sprintf("config: cross rule on %T", v))
}

// Entry is one line of the effective configuration.
type Entry struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Source string `json:"source"`
	// Untrusted is set for a value taken from an untrusted project file
	// (its trust rule accepted it: it narrows).
	Untrusted bool `json:"untrusted,omitempty"`
}

// Entries lists the effective configuration in key-table order: durations
// as strings (time.Duration.String, "1m0s"), sizes as integers of bytes.
// Scope policies follow, sorted by name, as "scope.NAME" with a value of
// {"allow": [...], "allow_ports": [...], "allow_cidrs": [...]} and, when
// the table has one, "deny": [...].
func (c *Config) Entries() []Entry {
	out := make([]Entry, 0, len(keyTable)+len(c.Scopes))
	for _, d := range keyTable {
		src := c.Source(d.name)
		out = append(out, Entry{Key: d.name, Value: d.entry(c), Source: src.String(), Untrusted: c.untrusted(src)})
	}
	for _, n := range slices.Sorted(maps.Keys(c.Scopes)) {
		p := c.Scopes[n]
		out = append(out, Entry{
			Key:       scopeTable + "." + n,
			Value:     p.entry(),
			Source:    p.Source.String(),
			Untrusted: c.untrusted(p.Source),
		})
	}
	for _, n := range c.LangNames() {
		l := c.Langs[n]
		out = append(out, Entry{Key: langTable + "." + n, Value: l.entry(), Source: l.Source.String()})
	}
	return out
}

// untrusted reports whether src is the project file and it is not trusted.
func (c *Config) untrusted(src Source) bool {
	return src.Kind == KindProject && !c.Project.Trusted
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return slices.Clone(s)
}
