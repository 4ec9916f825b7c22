//go:build !linux

package redistest

import "errors"

// mapWord: the clock shim is Linux's (ClockShim skips the test first).
func mapWord(string) (*int64, func(), error) {
	return nil, nil, errors.New("the clock shim needs Linux")
}
