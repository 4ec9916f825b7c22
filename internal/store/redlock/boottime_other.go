//go:build !linux

package redlock

// bootMicros is Go's monotonic clock in µs where the system has no
// boottime: a host's suspend looks like every master's clock jumping
// forward.
func bootMicros() int64 { return monoMicros() }
