//go:build !linux

package daemontest

import "syscall"

// sysProcAttr: Pdeathsig is Linux's; elsewhere the cleanups end the daemon.
func sysProcAttr() *syscall.SysProcAttr { return nil }
