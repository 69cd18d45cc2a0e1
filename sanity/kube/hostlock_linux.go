package kube

import (
	"context"
	"fmt"
	"net"
	"time"
)

// hostLockName is the kubelet mode's host-wide mutex: an abstract unix
// socket (no file is created; the kernel releases it when the process
// dies) that one environment binds at a time. Every kubelet on a host
// shares /var/log/containers, /var/lib/cni and its iptables chains, so two
// environments at once would take each other's files there for their own.
const hostLockName = "@csikit-sanity-kube-kubelet-mode"

// acquireHostLock binds the abstract socket name (hostLockName), waiting up to wait while another
// environment (of any process on the host) holds it; logf reports the wait.
func acquireHostLock(ctx context.Context, name string, wait time.Duration, logf func(format string, args ...any)) (*net.UnixConn, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	start, logged := time.Now(), false
	for {
		c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
		if err == nil {
			if logged {
				logf("kube: kubelet mode: waited %s for another kubelet-mode environment on this host", time.Since(start).Round(time.Second))
			}
			return c, nil
		}
		if !logged {
			logf("kube: kubelet mode: another kubelet-mode environment runs on this host (%v); waiting up to %s", err, wait)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kube: another kubelet-mode environment held this host for %s (one at a time: kubelet's host directories and iptables chains are shared): %w", wait, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
