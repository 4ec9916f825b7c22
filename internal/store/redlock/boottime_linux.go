package redlock

import "golang.org/x/sys/unix"

// bootMicros is CLOCK_BOOTTIME in µs: monotonic, and counting while the
// host is suspended (CLOCK_MONOTONIC, Go's, stops then).
func bootMicros() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return monoMicros()
	}
	return ts.Nano() / 1000
}
