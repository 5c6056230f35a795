package config

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// keyTable is the one list of configuration keys. Environment variables,
// files, flags (Set, AddFlags and SetFlags), defaults, the listing (Entries)
// and the trust rules of project files all go through it, in this order.
// Adding a key is one line here plus the field in Config; the line must
// state the key's trust rule (see trust.go): what an untrusted project file
// may do with it. A key with a command-line flag says so on its line
// (withFlag: the verbs whose group it is in get the flag, see flags.go).
var keyTable = []keyDesc{
	newKey("default_scope", stringKind, "default", validName, func(c *Config) *string { return &c.DefaultScope }, trustedOnly[string]()),
	newKey("default_lang", stringKind, "", validLang, func(c *Config) *string { return &c.DefaultLang }, anyValue[string]()),
	newKey("image", stringKind, "", anyString, func(c *Config) *string { return &c.Image }, trustedOnly[string]()).
		withFlag(FlagsSandbox, "image", "", "Image to run in (default: the built-in runtime image)"),
	newKey("runtime_base", stringKind, "debian:bookworm-slim", nonEmpty, func(c *Config) *string { return &c.RuntimeBase }, trustedOnly[string]()).
		withFlag(FlagsBuild, "base", "", "Base image of the runtime image (default: config runtime_base)"),
	newKey("timeout", durationKind, 60*time.Second, above(time.Duration(0), math.MaxInt64, formatDuration), func(c *Config) *time.Duration { return &c.Timeout }, lowerOnly[time.Duration]()).
		withFlag(FlagsRun, "timeout", "", "Kill the program after this long (default 60s; at most config max_timeout, 1h by default: a larger value is refused)"),
	newKey("max_timeout", durationKind, time.Hour, above(time.Duration(0), 24*time.Hour, formatDuration), func(c *Config) *time.Duration { return &c.MaxTimeout }, lowerOnly[time.Duration]()),
	newKey("memory", sizeKind, GiB, between(6*MiB, math.MaxInt64, formatSize), func(c *Config) *int64 { return &c.Memory }, lowerOnly[int64]()).
		withFlag(FlagsSandbox, "memory", "m", "Memory limit, swap included (default 1g)"),
	newKey("max_memory", sizeKind, 16*GiB, between(6*MiB, math.MaxInt64, formatSize), func(c *Config) *int64 { return &c.MaxMemory }, lowerOnly[int64]()),
	newKey("cpus", floatKind, 1.0, above(0.0, 64, formatFloat), func(c *Config) *float64 { return &c.CPUs }, lowerOnly[float64]()).
		withFlag(FlagsSandbox, "cpus", "", "Number of CPUs (default 1)"),
	newKey("pids", int64Kind, 256, between(16, 32768, formatInt[int64]), func(c *Config) *int64 { return &c.Pids }, lowerOnly[int64]()).
		withFlag(FlagsSandbox, "pids", "", "Process limit (default 256)"),
	newKey("max_output", sizeKind, MiB, between(1, GiB, formatSize), func(c *Config) *int64 { return &c.MaxOutput }, lowerOnly[int64]()).
		withFlag(FlagsRun, "max-output", "", "Cap on each of stdout and stderr (default 1MiB)"),
	newKey("idle_ttl", durationKind, 10*time.Minute, between(time.Duration(0), 30*24*time.Hour, formatDuration), func(c *Config) *time.Duration { return &c.IdleTTL }, lowerZeroUnlimited[time.Duration]()).
		withFlag(FlagsSandbox, "idle-ttl", "", "Remove the sandbox's container after this long idle (default 10m, 0 = never)"),
	newKey("max_lifetime", durationKind, time.Duration(0), between(time.Duration(0), 365*24*time.Hour, formatDuration), func(c *Config) *time.Duration { return &c.MaxLifetime }, lowerZeroUnlimited[time.Duration]()).
		withFlag(FlagsSandbox, "max-lifetime", "", "Remove the sandbox's container at this age, even while busy (default 0 = never; data stays)"),
	newKey("disk", sizeKind, 10*GiB, between(0, math.MaxInt64, formatSize), func(c *Config) *int64 { return &c.Disk }, lowerZeroUnlimited[int64]()).
		withFlag(FlagsSandbox, "disk", "", "Limit of what /opt/workspace and /opt/user may hold together (default 10GiB, 0 = none)"),
	newKey("network", stringKind, "none", nonEmpty, func(c *Config) *string { return &c.Network }, noneOrTrusted()).
		withFlag(FlagsSandbox, "network", "", "Network: none (default), proxy (only through the egress proxy, under the scope's allowlist), or a Docker network's name"),
	newKey("runtime", stringKind, "", anyString, func(c *Config) *string { return &c.Runtime }, trustedOnly[string]()).
		withFlag(FlagsSandbox, "runtime", "", "Container runtime, e.g. runsc (must be registered on the engine)"),
	newKey("nofile", int64Kind, 1024, between(64, 1048576, formatInt[int64]), func(c *Config) *int64 { return &c.Nofile }, lowerOnly[int64]()).
		withFlag(FlagsSandbox, "nofile", "", "Open-files limit (RLIMIT_NOFILE) of the sandbox's processes (default 1024)"),
	newKey("tmp_size", sizeKind, 512*MiB, between(MiB, 16*GiB, formatSize), func(c *Config) *int64 { return &c.TmpSize }, lowerOnly[int64]()).
		withFlag(FlagsSandbox, "tmp-size", "", "Size of the /tmp tmpfs (default 512MiB)"),
	newKey("exec_channel", boolKind, true, anyBool, func(c *Config) *bool { return &c.ExecChannel }, trustedOnly[bool]()),
	newKey("copy_frozen", boolKind, false, anyBool, func(c *Config) *bool { return &c.CopyFrozen }, trustedOnly[bool]()),
	newKey("copy_local", boolKind, true, anyBool, func(c *Config) *bool { return &c.CopyLocal }, trustedOnly[bool]()),
	newKey("max_sandboxes", intKind, 50, between(1, 10000, formatInt[int]), func(c *Config) *int { return &c.MaxSandboxes }, lowerOnly[int]()),
	newKey("copy_max_size", sizeKind, 2*GiB, between(1, math.MaxInt64, formatSize), func(c *Config) *int64 { return &c.CopyMaxSize }, lowerOnly[int64]()).
		withFlag(FlagsCopy, "max-size", "", "Stop the copy when its files add up to more than this (default: copy_max_size, 2GiB)"),
	newKey("copy_max_file_size", sizeKind, 0, between(0, math.MaxInt64, formatSize), func(c *Config) *int64 { return &c.CopyMaxFileSize }, lowerZeroUnlimited[int64]()).
		withFlag(FlagsCopy, "max-file-size", "", "Stop the copy at a file larger than this (default: copy_max_file_size, else --max-size)"),
	newKey("copy_max_entries", int64Kind, 1_000_000, between(1, 1<<40, formatInt[int64]), func(c *Config) *int64 { return &c.CopyMaxEntries }, lowerOnly[int64]()).
		withFlag(FlagsCopy, "max-entries", "", "Stop the copy at more entries (files, folders, links) than this (default: copy_max_entries, 1000000)").
		withFlagType("int64"),
	// The audit trail (see the audit package): an untrusted project file
	// may turn it on, never off, and may not move, shorten or thin it.
	newKey("audit", boolKind, true, func(bool) *problem { return nil }, func(c *Config) *bool { return &c.Audit }, onOnly()),
	newKey("audit_dir", stringKind, "", absPathOrEmpty, func(c *Config) *string { return &c.AuditDir }, trustedOnly[string]()),
	newKey("audit_retention_days", intKind, 30, between(0, 36500, formatInt[int]), func(c *Config) *int { return &c.AuditRetentionDays }, trustedOnly[int]()),
	newKey("audit_max_code", sizeKind, 64*KiB, between(0, 16*MiB, formatSize), func(c *Config) *int64 { return &c.AuditMaxCode }, trustedOnly[int64]()),
	newKey("audit_max_output", sizeKind, 16*KiB, between(0, MiB, formatSize), func(c *Config) *int64 { return &c.AuditMaxOutput }, trustedOnly[int64]()),
	newKey("kernel", boolKind, false, anyBool, func(c *Config) *bool { return &c.Kernel }, anyValue[bool]()).
		withFlag(FlagsRun, "kernel", "", "Run the code in the sandbox's long-lived kernel of its language (python, node): state persists between calls, the last expression's value is printed").
		withBoolFlag(),
	newKey("kernel_reset", boolKind, false, anyBool, func(c *Config) *bool { return &c.KernelReset }, anyValue[bool]()).
		withFlag(FlagsRun, "kernel-reset", "", "Restart the kernel (its state is lost) before the code; implies --kernel").
		withBoolFlag(),
}

// crossRules are the limits between keys, checked by Validate once every
// layer is applied: the value of key must not exceed the value of max. Both
// keys must have the same Go type (time.Duration or int64).
var crossRules = []struct{ key, max string }{
	{"timeout", "max_timeout"},
	{"memory", "max_memory"},
}

// scopeTable is the name of the table holding per-scope policies.
const scopeTable = "scope"

// scopeKeys are the keys of a [scope.NAME] table.
var scopeKeys = []string{"allow", "allow_ports", "allow_cidrs", "deny"}

// ScopeKeys are the keys of a [scope.NAME] table, in the order `config`
// shows them.
func ScopeKeys() []string { return slices.Clone(scopeKeys) }

// keyIndex maps a key name to its position in keyTable.
var keyIndex = func() map[string]int {
	m := make(map[string]int, len(keyTable))
	for i, d := range keyTable {
		m[d.name] = i
	}
	return m
}()

func lookupKey(name string) *keyDesc {
	if i, ok := keyIndex[name]; ok {
		return &keyTable[i]
	}
	return nil
}

// Keys returns the configuration key names in table order.
func Keys() []string {
	out := make([]string, len(keyTable))
	for i, d := range keyTable {
		out[i] = d.name
	}
	return out
}

// EnvVar returns the environment variable for a key: DOCKER_SANDBOX_ and the
// key in upper case (DOCKER_SANDBOX_TIMEOUT for "timeout").
func EnvVar(key string) string { return EnvPrefix + strings.ToUpper(key) }

// problem is a bad value. pred is a predicate that reads after the value
// (`"12 parsecs"` + ` is not a size`); bare problems are whole sentences
// that do not name the value (wrong TOML types).
type problem struct {
	pred string
	bare bool
}

// flagPred is the predicate as it reads after "invalid value X for --flag: ".
func (p *problem) flagPred() string { return strings.TrimPrefix(p.pred, "is ") }

// keyDesc describes one key; newKey builds it from typed parts.
type keyDesc struct {
	name     string
	kind     string // "string", "duration", "size", "integer", "number"
	def      any
	fromText func(c *Config, s string) *problem // env and flags: parse, check, store
	fromTOML func(c *Config, v any) *problem    // files: decode, check, store
	reset    func(c *Config)                    // store the default
	get      func(c *Config) any
	set      func(c *Config, v any)
	show     func(c *Config) string // the value, for messages
	entry    func(c *Config) any    // the value, for Entries
	// trust names the key's rule for untrusted project files (RuleLower,
	// ...); narrows checks c's value against base's, the value from the
	// layers below the project file: nil if an untrusted project file may
	// set it.
	trust   string
	narrows func(c, base *Config) *problem
	// flag is the key's command-line flag; its name is "" for a key
	// without one.
	flag flagDesc
}

// kind is how values of one Go type are read and shown.
type kind[T any] struct {
	name   string
	parse  func(s string) (T, *problem) // from text
	decode func(v any) (T, *problem)    // from a decoded TOML value
	show   func(T) string
	entry  func(T) any
}

func newKey[T any](name string, k kind[T], def T, check func(T) *problem, field func(*Config) *T, rule trustRule[T]) keyDesc {
	store := func(c *Config, v T, p *problem) *problem {
		if p == nil {
			p = check(v)
		}
		if p == nil {
			*field(c) = v
		}
		return p
	}
	return keyDesc{
		name:     name,
		kind:     k.name,
		def:      def,
		fromText: func(c *Config, s string) *problem { v, p := k.parse(s); return store(c, v, p) },
		fromTOML: func(c *Config, x any) *problem { v, p := k.decode(x); return store(c, v, p) },
		reset:    func(c *Config) { *field(c) = def },
		get:      func(c *Config) any { return *field(c) },
		set:      func(c *Config, v any) { *field(c) = v.(T) },
		show:     func(c *Config) string { return k.show(*field(c)) },
		entry:    func(c *Config) any { return k.entry(*field(c)) },
		trust:    rule.name,
		narrows: func(c, base *Config) *problem {
			if rule.allows(*field(base), *field(c)) {
				return nil
			}
			return &problem{pred: rule.why(k.show(*field(base)))}
		},
	}
}

func identity[T any](v T) any { return v }

func wrongType(want string, v any) *problem {
	return &problem{pred: fmt.Sprintf("must be %s, not %s", want, tomlTypeName(v)), bare: true}
}

var stringKind = kind[string]{
	name:  "string",
	parse: func(s string) (string, *problem) { return s, nil },
	decode: func(v any) (string, *problem) {
		if s, ok := v.(string); ok {
			return s, nil
		}
		return "", wrongType("a string", v)
	},
	show:  strconv.Quote,
	entry: identity[string],
}

func anyBool(bool) *problem { return nil }

var durationKind = kind[time.Duration]{
	name:  "duration",
	parse: parseDurationSigned,
	decode: func(v any) (time.Duration, *problem) {
		switch x := v.(type) {
		case string:
			return parseDurationSigned(x)
		case int64:
			if x == 0 {
				return 0, nil
			}
			return 0, &problem{pred: `is not a duration: a unit is missing (use a string such as "90s", "10m", "1h30m")`}
		}
		return 0, wrongType(`a duration string such as "90s"`, v)
	},
	show:  formatDuration,
	entry: func(d time.Duration) any { return d.String() },
}

var sizeKind = kind[int64]{
	name:  "size",
	parse: parseSizeSigned,
	decode: func(v any) (int64, *problem) {
		switch x := v.(type) {
		case string:
			return parseSizeSigned(x)
		case int64:
			return x, nil
		}
		return 0, wrongType(`a size (an integer of bytes, or a string such as "512m")`, v)
	},
	show:  formatSize,
	entry: identity[int64],
}

var int64Kind = kind[int64]{
	name: "integer",
	parse: func(s string) (int64, *problem) {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return 0, &problem{pred: "is not an integer"}
		}
		return n, nil
	},
	decode: func(v any) (int64, *problem) {
		if n, ok := v.(int64); ok {
			return n, nil
		}
		return 0, wrongType("an integer", v)
	},
	show:  formatInt[int64],
	entry: identity[int64],
}

var intKind = kind[int]{
	name: "integer",
	parse: func(s string) (int, *problem) {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 0)
		if err != nil {
			return 0, &problem{pred: "is not an integer"}
		}
		return int(n), nil
	},
	decode: func(v any) (int, *problem) {
		n, ok := v.(int64)
		if !ok {
			return 0, wrongType("an integer", v)
		}
		if int64(int(n)) != n {
			return 0, &problem{pred: "is too large"}
		}
		return int(n), nil
	},
	show:  formatInt[int],
	entry: identity[int],
}

var boolKind = kind[bool]{
	name: "boolean",
	parse: func(s string) (bool, *problem) {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true", "1", "yes", "on":
			return true, nil
		case "false", "0", "no", "off":
			return false, nil
		}
		return false, &problem{pred: "is not a boolean (use true or false)"}
	},
	decode: func(v any) (bool, *problem) {
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return false, wrongType("a boolean (true or false)", v)
	},
	show:  strconv.FormatBool,
	entry: identity[bool],
}

var floatKind = kind[float64]{
	name: "number",
	parse: func(s string) (float64, *problem) {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return 0, &problem{pred: "is not a number"}
		}
		return f, nil
	},
	decode: func(v any) (float64, *problem) {
		switch x := v.(type) {
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		}
		return 0, wrongType("a number", v)
	},
	show:  formatFloat,
	entry: identity[float64],
}

func formatInt[T int | int64](n T) string { return strconv.FormatInt(int64(n), 10) }
func formatFloat(f float64) string        { return strconv.FormatFloat(f, 'g', -1, 64) }

type number interface {
	~int | ~int64 | ~float64
}

// between accepts lo <= v <= hi.
func between[T number](lo, hi T, show func(T) string) func(T) *problem {
	return func(v T) *problem {
		switch {
		case !(v >= lo) && lo == 0:
			return &problem{pred: "must not be negative"}
		case !(v >= lo):
			return &problem{pred: "must be at least " + show(lo)}
		case !(v <= hi):
			return &problem{pred: "must be at most " + show(hi)}
		}
		return nil
	}
}

// above accepts lo < v <= hi.
func above[T number](lo, hi T, show func(T) string) func(T) *problem {
	return func(v T) *problem {
		switch {
		case !(v > lo) && lo == 0:
			return &problem{pred: "must be greater than 0"}
		case !(v > lo):
			return &problem{pred: "must be greater than " + show(lo)}
		case !(v <= hi):
			return &problem{pred: "must be at most " + show(hi)}
		}
		return nil
	}
}

func validName(s string) *problem {
	if !core.ValidName(s) {
		return &problem{pred: "is not a valid scope name (" + core.NameRule + ")"}
	}
	return nil
}

// Languages are the built-in values of default_lang ("" means sh); the
// name of a [lang.NAME] table of the configuration is one too.
var Languages = []string{"python", "node", "bash", "sh"}

// validLang accepts a built-in language or a name a [lang.NAME] table may
// have; that such a table exists is checked once every layer is read
// (validateLangs), since it may come from another file.
func validLang(s string) *problem {
	if s == "" || slices.Contains(Languages, s) || checkLangName(s) == nil {
		return nil
	}
	return &problem{pred: notALanguage}
}

const notALanguage = "is not a language (use python, node, bash, sh or the name of a [lang.NAME] table)"

func anyString(string) *problem { return nil }

// absPathOrEmpty accepts "" (the default place) or an absolute path.
func absPathOrEmpty(s string) *problem {
	if s != "" && !filepath.IsAbs(s) {
		return &problem{pred: "is not an absolute path"}
	}
	return nil
}

func nonEmpty(s string) *problem {
	if strings.TrimSpace(s) == "" {
		return &problem{pred: "must not be empty"}
	}
	return nil
}

// tomlTypeName names the TOML type of a decoded value, for messages.
func tomlTypeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	case nil:
		return "empty"
	}
	return "a date or time"
}

// tomlValue renders a decoded TOML scalar as it would be written, for
// messages.
func tomlValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case float64:
		return formatFloat(x)
	}
	return fmt.Sprint(v)
}
