//go:build unix && !linux

package main

import "syscall"

func setDeathSignal(*syscall.SysProcAttr) {}
