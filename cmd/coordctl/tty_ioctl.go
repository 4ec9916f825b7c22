//go:build linux || darwin

package main

import (
	"os"
	"syscall"
	"unsafe"
)

// inForeground reports whether f is a terminal in whose foreground process
// group coordctl runs: an interactive shell's foreground job.
func inForeground(f *os.File) bool {
	var pgrp int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp)))
	return errno == 0 && int(pgrp) == syscall.Getpgrp()
}
