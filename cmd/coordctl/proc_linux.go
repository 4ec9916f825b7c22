package main

import "syscall"

// setDeathSignal kills the command if coordctl dies. The signal is tied to
// the thread that started the command, which the Go runtime keeps.
func setDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
