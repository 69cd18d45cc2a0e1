#!/usr/bin/env bash
# The steps of .ci/run that need neither the Kubernetes binaries nor the
# Ceph cluster and take the CPU only briefly: the release tooling's module,
# the proof that the modules work from outside, the API compatibility
# check. .ci/run runs them in the background beside examples/rbd's and the
# kubelet mode's steps, which mostly wait on the cluster, pods and kubelet
# (about half their time idle on a 2-core machine), and shows this log at
# its end. Each part prints its duration. Run alone it is the same checks.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
part_label="side"
. .ci/part.sh
tools() (
	cd tools
	go vet ./...
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	go test -race -count=1 ./...
)
part "tools (release tooling, its own module): vet, staticcheck, tests (-race)" tools
# The vendor module builds examples/rbd/driver (cgo): the Ceph development
# packages come from .ci/packages.sh.
part "modules from outside: release tags in a throwaway clone, a file:// proxy, a vendor module (scripts/proxy-proof.sh)" scripts/proxy-proof.sh
part "API compatibility with the previous release: apidiff, CHANGELOG.md names each break (scripts/apicheck.sh)" scripts/apicheck.sh
