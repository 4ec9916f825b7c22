//go:build !unix

package main

import (
	"os"
	"os/exec"
)

var forwardedSignals = []os.Signal{os.Interrupt}

func configureChild(*exec.Cmd, bool) {}

// signalCommand can only kill: other signals are not forwarded here.
func signalCommand(p *os.Process, _ bool, sig os.Signal) error {
	if sig == os.Interrupt {
		return nil
	}
	if err := p.Kill(); err != nil && err != os.ErrProcessDone {
		return err
	}
	return nil
}

func exitStatus(ps *os.ProcessState) int { return ps.ExitCode() }

func signalNumber(os.Signal) int { return 2 }
