package main

import "syscall"

// childAttr makes the harness's process receive SIGTERM when csikit dies,
// so a killed `csikit sanity` leaves no harness running.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
