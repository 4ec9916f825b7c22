//go:build race

package main

// raceEnabled: the test binary has the race detector, so the binaries the
// smoke tests build get it too, and reuse the packages the race-enabled
// test runs of the repository already compiled.
const raceEnabled = true
