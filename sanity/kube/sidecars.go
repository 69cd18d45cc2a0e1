package kube

import (
	"fmt"
	"strings"
)

// sidecarArgs returns the command line of a CSI sidecar for the socket.
// Retry intervals are shortened so that faults heal within seconds.
func sidecarArgs(name, sock, kubeconfig string, o *Options) ([]string, error) {
	common := []string{
		"--csi-address=" + sock,
		"--kubeconfig=" + kubeconfig,
		"--leader-election=false",
		"--timeout=" + o.Timeout.String(),
		"--v=5",
	}
	switch name {
	case BinProvisioner:
		return append(common,
			"--extra-create-metadata",
			"--retry-interval-start=300ms", "--retry-interval-max=5s",
			"--default-fstype=ext4",
		), nil
	case BinAttacher:
		return append(common, "--retry-interval-start=300ms", "--retry-interval-max=5s"), nil
	case BinResizer:
		return append(common, "--retry-interval-start=300ms", "--retry-interval-max=5s",
			"--handle-volume-inuse-error=false"), nil
	case BinSnapshotter:
		return append(common, "--extra-create-metadata",
			"--retry-interval-start=300ms", "--retry-interval-max=5s"), nil
	}
	return nil, fmt.Errorf("kube: unknown sidecar %q (want one of %s)", name, strings.Join(AllSidecars(), ", "))
}

func snapshotControllerArgs(kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-election=false",
		"--retry-interval-start=300ms", "--retry-interval-max=5s",
		"--v=4",
	}
}
