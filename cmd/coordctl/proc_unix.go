//go:build unix

package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// forwardedSignals are the signals lock passes on to its command.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// configureChild makes cmd a process group leader if ownGroup, so that
// signals reach every process the command starts, and asks the kernel to kill
// it if coordctl dies (Linux), since nothing would then watch its lease.
func configureChild(cmd *exec.Cmd, ownGroup bool) {
	attr := &syscall.SysProcAttr{Setpgid: ownGroup}
	setDeathSignal(attr)
	cmd.SysProcAttr = attr
}

// signalCommand sends sig to the command: to its whole process group if it
// has its own, else to its process. A command that is gone is not an error.
func signalCommand(p *os.Process, ownGroup bool, sig os.Signal) error {
	if !ownGroup {
		if err := p.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
		return nil
	}
	s, ok := sig.(syscall.Signal)
	if !ok {
		return errors.New("not a signal: " + sig.String())
	}
	if err := syscall.Kill(-p.Pid, s); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// exitStatus is the status a shell would report: the exit code, or 128+N
// after signal N.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// signalNumber is sig's number, for the 128+N exit status.
func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return int(syscall.SIGINT)
}
