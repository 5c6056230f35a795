// Package files is the host side of `docker sandbox cp` and `docker sandbox
// files`: where a path is (ParseLocation: a host path, "-", or
// SCOPE[/SESSION]:PATH with the sandbox path rules), and moving files between
// the host and sandboxes (Copier) through the helper's confined file server
// (`sandbox-helper fs`, package fsserver) over exec, so that it works on any
// engine, remote ones included, and while a sandbox's root filesystem is
// read-only.
//
// Confinement holds in two places. Inside the sandbox, the helper opens
// every path through os.Root on /opt/workspace or /opt/user: a symbolic link
// that leads outside, at any depth of a path, is refused (path_escape). On
// the host, what a sandbox sends is treated as hostile: it is extracted
// through os.Root on the destination the user named (package tarsafe), with
// no absolute names, no "..", no links leading out (such a link is not
// written and is reported, or with Strict refuses the copy), no devices or FIFOs,
// setuid/setgid/sticky bits stripped, size and entry-count caps, and a
// staging folder so that a refused copy leaves nothing behind.
//
// Subpackages: fsproto (the helper protocol and the sandbox path rules),
// tarsafe (safe tar extraction and creation through os.Root) and fsserver
// (the helper's file server), all standard-library only.
package files
