// Package files will hold paths, confinement and copying between the host
// and sandboxes (`docker sandbox cp` and `files`); see the copy issue. The
// in-container side (os.Root on /opt/workspace and /opt/user) belongs to the
// helper.
package files
