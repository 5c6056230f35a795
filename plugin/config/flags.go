package config

import (
	"slices"

	"github.com/spf13/pflag"
)

// FlagGroup names the verbs a key's flag belongs to: a verb declares the
// flags of its groups with AddFlags and applies them with SetFlags.
type FlagGroup string

// The flag groups.
const (
	// FlagsSandbox are the settings of a sandbox's container, fixed when it
	// is created (a later call asking for others gets sandbox_mismatch):
	// exec's --image, --memory, --cpus, ...
	FlagsSandbox FlagGroup = "sandbox"
	// FlagsRun are the settings of one exec run (--timeout, --max-output).
	FlagsRun FlagGroup = "run"
	// FlagsCopy are the caps of one cp (--max-size, ...).
	FlagsCopy FlagGroup = "copy"
	// FlagsBuild are the settings of images build (--base).
	FlagsBuild FlagGroup = "build"
)

// flagDesc is a key's command-line flag.
type flagDesc struct {
	group FlagGroup
	name  string // without dashes; "" for a key without a flag
	short string // one letter, or ""
	usage string
	typ   string // the value's type in the help ("string" when "")
	// boolean: --name alone means --name=true.
	boolean bool
}

// withFlag gives the key a flag: --name (and -short) on the verbs of group.
func (d keyDesc) withFlag(group FlagGroup, name, short, usage string) keyDesc {
	d.flag = flagDesc{group: group, name: name, short: short, usage: usage}
	return d
}

// withFlagType sets the type the help shows for the key's flag.
func (d keyDesc) withFlagType(typ string) keyDesc {
	d.flag.typ = typ
	return d
}

// withBoolFlag makes the key's flag a boolean one: --name alone sets true.
func (d keyDesc) withBoolFlag() keyDesc {
	d.flag.typ, d.flag.boolean = "bool", true
	return d
}

// flagKeyAnnotation marks a flag declared by AddFlags with its key, so that
// SetFlags never reads a flag of the same name that a verb declared itself.
const flagKeyAnnotation = "docker-sandbox/config-key"

// flagValue is the text of a key's flag, parsed and checked by SetFlags
// (as files and the environment are), not by the flag parser.
type flagValue struct {
	text string
	typ  string
}

func (v *flagValue) String() string     { return v.text }
func (v *flagValue) Set(s string) error { v.text = s; return nil }
func (v *flagValue) Type() string       { return v.typ }

// AddFlags declares on fs the flags of the keys in groups, in key-table
// order. Their values are text, checked when SetFlags applies them.
func AddFlags(fs *pflag.FlagSet, groups ...FlagGroup) {
	for _, d := range keyTable {
		if d.flag.name == "" || !slices.Contains(groups, d.flag.group) {
			continue
		}
		typ := d.flag.typ
		if typ == "" {
			typ = "string"
		}
		fl := fs.VarPF(&flagValue{typ: typ}, d.flag.name, d.flag.short, d.flag.usage)
		fl.Annotations = map[string][]string{flagKeyAnnotation: {d.name}}
		if d.flag.boolean {
			fl.NoOptDefVal = "true"
		}
	}
}

// FlagKeys lists the keys whose flags are in group, in key-table order.
func FlagKeys(group FlagGroup) []string {
	var out []string
	for _, d := range keyTable {
		if d.flag.name != "" && d.flag.group == group {
			out = append(out, d.name)
		}
	}
	return out
}

// FlagName returns the flag of key ("--tmp-size"), or "" if it has none.
func FlagName(key string) string {
	if d := lookupKey(key); d != nil && d.flag.name != "" {
		return "--" + d.flag.name
	}
	return ""
}

// SetFlags applies the flags AddFlags declared on fs that were given on the
// command line, with Set (an error names the flag, Code CodeBadFlag), then
// checks the limits between keys with Validate. fs nil applies none.
func (c *Config) SetFlags(fs *pflag.FlagSet) error {
	for _, d := range keyTable {
		if d.flag.name == "" || fs == nil {
			continue
		}
		fl := fs.Lookup(d.flag.name)
		if fl == nil || !fl.Changed || !slices.Contains(fl.Annotations[flagKeyAnnotation], d.name) {
			continue
		}
		if err := c.Set(d.name, fl.Value.String(), "--"+d.flag.name); err != nil {
			return err
		}
	}
	return c.Validate()
}
