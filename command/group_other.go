//go:build !unix

package command

import (
	"os"
	"os/exec"
	"syscall"
)

const (
	sigTerm = syscall.Signal(15)
	sigKill = syscall.Signal(9)
)

// ownGroup does nothing where process groups do not exist.
func ownGroup(*exec.Cmd) {}

// signalGroup kills the program itself where there are no process groups.
func signalGroup(cmd *exec.Cmd, _ syscall.Signal) error {
	if cmd.Process == nil {
		return nil
	}
	return cmd.Process.Kill()
}

// exitSignal is 0 where exit statuses carry no signal.
func exitSignal(*os.ProcessState) syscall.Signal { return 0 }
