//go:build !linux

package main

import "syscall"

// childAttr: no parent-death signal outside Linux.
func childAttr() *syscall.SysProcAttr { return nil }
