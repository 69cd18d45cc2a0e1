# The two commands of the README:
#   go run ./examples/hostpath   runs the reference driver on its defaults
#   make test                    sets the machine up and runs the main module's tests
#
# make test is `go test ./...` in the main module, with GOWORK=off (exactly
# the root's go.mod, as a vendor gets it; go.work, the workspace of every
# module, is for the nested ones): every csikit package and
# examples/hostpath, examples/minimal, examples/tmpfs. It does not reach the
# nested modules below (each has a go.mod of its own, so ./... stops at it)
# and says so when it ends. Each needs heavy setup, installs packages
# (apt-get) and runs as root; .ci/run runs all three:
#   make test-rbd       examples/rbd: Ceph packages, a throwaway Ceph cluster,
#                       sanity/kube's Kubernetes binaries, krbd and rbd-nbd
#                       lifecycles in the VM lane
#   make test-rbd-vm    the same with the sanity harness per kernel mapper and
#                       kind in the VM lane (an hour or more under TCG)
#   make test-kube      sanity/kube: a control plane, kubelet and the CSI
#                       sidecars, built from the Go module proxy (about 8
#                       minutes the first time, then cached)
#   make test-upstream  sanity/upstream: upstream csi-driver-host-path, built
#                       from the Go module proxy
#   make test-tools     tools: the release tooling (modproxy, apicheck)
#   make test-all       make test, then the three above
# and, for encryption at rest, two runs in the VM lane (dm-crypt exists only
# there here) that are not part of CI:
#   make bench-crypt       package crypt's benchmarks: stage/unstage latency and
#                          sequential write, plain vs encrypted on the same
#                          kind of device (CRYPT_BENCHTIME, default 20x)
#   make sanity-encrypted  every sanity area against encrypted hostpath volumes
#                          (CI runs DataPath and Encryption; all areas take
#                          well over 15 minutes under TCG)
# and, lighter, one that needs Debian's Python gRPC packages (apt-get):
#   make python-sanity  csikit sanity against examples/python, a driver in
#                       Python, correct and with each of its planted bugs
# Tool modules below them (sanity/kube/runtime, sanity/upstream/hostpath)
# are built by their parent's run.
GO ?= go
GOTESTFLAGS ?=
NESTED_MODULES := examples/rbd sanity/kube sanity/upstream tools

.PHONY: test test-rbd test-rbd-vm test-kube test-upstream test-tools test-all python-sanity run setup bench-crypt sanity-encrypted

setup:
	./scripts/setup.sh

test: setup
	GOWORK=off $(GO) test $(GOTESTFLAGS) ./...
	@echo "make test: ran the main module's tests; not the nested modules $(NESTED_MODULES) (own go.mod, heavy setup): make test-rbd, test-kube, test-upstream or test-all"

test-rbd:
	examples/rbd/test/ci.sh

test-rbd-vm:
	RBD_VM_SANITY=1 examples/rbd/test/ci.sh

test-kube:
	sanity/kube/ci.sh

test-upstream:
	sanity/upstream/ci.sh

# tools: the release tooling's own module (never released): vet and tests.
test-tools:
	cd tools && $(GO) vet ./... && $(GO) test $(GOTESTFLAGS) ./...

test-all: test test-rbd test-kube test-upstream test-tools

python-sanity:
	examples/python/ci.sh

CRYPT_BENCHTIME ?= 20x
bench-crypt:
	d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	$(GO) test -tags cryptbench -c -o "$$d/crypt.test" ./crypt && \
	$(GO) run ./csitest/vmtest/vmrun -modules dm-crypt,loop,ext4,xfs -- \
		"$$d/crypt.test -test.run '^\$$' -test.bench . -test.benchtime $(CRYPT_BENCHTIME) -test.benchmem"

sanity-encrypted:
	$(GO) test -tags encryptedsanity -count=1 -timeout 120m -v -run '^TestSanityEncryptedAllAreas$$' ./examples/hostpath/driver

run:
	$(GO) run ./examples/hostpath
