package daemontest

import "syscall"

// sysProcAttr makes the kernel kill the daemon when the test binary dies
// without running its cleanups (a panic, a -timeout, a SIGKILL). (Pdeathsig
// fires when the thread that started the process exits; the Go runtime does
// not end its threads while the process runs unless a goroutine exits
// locked to one.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
