//go:build !linux && !darwin

package main

import "os"

// inForeground is always false here: the command gets its own process group.
func inForeground(*os.File) bool { return false }
