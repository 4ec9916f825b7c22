//go:build race

package e2e

// raceEnabled: the tests run with -race, so the daemons are built with it
// too, and a data race in a daemon fails its exit status.
const raceEnabled = true
