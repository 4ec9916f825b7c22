//go:build race

package failover

// raceEnabled: the tests run with -race, so the coordd binary is built with
// it too, and a data race in a daemon fails its exit status.
const raceEnabled = true
