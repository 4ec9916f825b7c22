//go:build !linux

package redistest

import "syscall"

// sysProcAttr: elsewhere than Linux a server whose test binary dies
// without running its cleanups keeps running.
func sysProcAttr() *syscall.SysProcAttr { return nil }
