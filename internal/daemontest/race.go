//go:build race

package daemontest

// Race: the tests run with -race, so the daemon is built with it too, and a
// data race in it fails its exit status.
const Race = true
