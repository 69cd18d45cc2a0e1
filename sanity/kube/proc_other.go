//go:build !linux

package kube

import "syscall"

// childAttr has no parent-death signal outside Linux; Cleanup still stops
// every process by PID.
func childAttr() *syscall.SysProcAttr { return nil }
