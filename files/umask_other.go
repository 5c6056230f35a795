//go:build !unix

package files

import "io/fs"

// Umask is 0 where there is none.
func Umask() fs.FileMode { return 0 }
