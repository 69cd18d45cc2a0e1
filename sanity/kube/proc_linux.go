package kube

import "syscall"

// childAttr makes the kernel SIGKILL a child when the test binary dies, so
// no process outlives a crashed or killed test run.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
