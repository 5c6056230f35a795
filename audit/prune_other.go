//go:build !unix

package audit

import "errors"

func removeDay(string) (bool, error) {
	return false, errors.New("audit: retention is not supported on this system")
}
