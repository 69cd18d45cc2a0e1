//go:build linux

// Command pause is the sandbox ("infra") container of the kubelet mode's
// pods: it holds the pod's namespaces, reaps the zombies it inherits as
// PID 1, and exits on SIGINT or SIGTERM. Built static (CGO_ENABLED=0) into
// a one-layer image by the kube package; the kubelet mode needs no image
// registry and no C compiler.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
