// Package pluginmeta is the plugin's metadata, what `docker-sandbox
// docker-cli-plugin-metadata` prints, and the fast path that prints it.
//
// The Docker CLI runs that call on every `docker --help` and before every
// `docker sandbox ...`. Answered by the cobra tree, it pays the package
// initialisation of everything the plugin links (gRPC, OpenTelemetry,
// protobuf, regular expressions): 4 to 5 times a stdlib-only plugin's
// answer. This package's init answers it first and exits: Go initialises
// packages in import-path order among those whose imports are initialised
// (the spec, "Package initialization"), and this package imports only os,
// so it runs before every github.com/docker/..., golang.org/...,
// google.golang.org/... and go.opentelemetry.io/... package
// (TestFastPathRunsFirst checks that on the built binary). It imports
// nothing else: a new import could only move it later.
package pluginmeta

import "os"

// Version is the plugin's version, set at build time from VERSION
// (-ldflags -X .../internal/pluginmeta.Version=...).
var Version = "0.1.0"

// The metadata's fixed fields.
const (
	SchemaVersion    = "0.1.0"
	Vendor           = "docker-sandbox project" // scripts/install.sh recognises a plugin of ours by it
	ShortDescription = "Run untrusted code in hardened, per-scope sandboxes"
	URL              = "https://github.com/docker-sandbox/docker-sandbox"
)

// Command is the docker CLI's metadata call (docker/cli's
// metadata.MetadataSubcommandName).
const Command = "docker-cli-plugin-metadata"

func init() {
	if len(os.Args) == 2 && os.Args[1] == Command {
		if _, err := os.Stdout.Write(JSON()); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// JSON is the metadata as docker/cli's plugin.RunPlugin prints it (a
// json.Encoder without HTML escaping, indented by five spaces), byte for
// byte (TestJSONMatchesRunPlugin).
func JSON() []byte {
	b := []byte("{\n")
	for i, kv := range [][2]string{
		{"SchemaVersion", SchemaVersion}, {"Vendor", Vendor}, {"Version", Version},
		{"ShortDescription", ShortDescription}, {"URL", URL},
	} {
		if i > 0 {
			b = append(b, ",\n"...)
		}
		b = append(b, `     "`...)
		b = append(b, kv[0]...)
		b = append(b, `": `...)
		b = appendString(b, kv[1])
	}
	return append(b, "\n}\n"...)
}

// appendString appends s as a JSON string as encoding/json writes it with
// HTML escaping off: quotes, backslashes and control characters escaped,
// invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i, r := range s {
		switch {
		case r == 0xfffd && (len(s) < i+3 || s[i:i+3] != "\ufffd"): // an invalid byte
			b = append(b, `\ufffd`...)
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r < 0x20 || r == 0x2028 || r == 0x2029:
			b = append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
		default:
			b = append(b, string(r)...)
		}
	}
	return append(b, '"')
}
