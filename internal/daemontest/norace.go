//go:build !race

package daemontest

// Race: the tests run without -race, and so is the daemon built.
const Race = false
