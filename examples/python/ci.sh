#!/usr/bin/env bash
# CI for examples/python: installs Debian's Python gRPC packages (when
# missing), then runs cmd/csikit's TestPythonDriver, which generates the
# stubs from the spec's csi.proto (gen.sh), starts the driver and runs
# `csikit sanity` against it three times: correct (must pass) and with
# each planted bug (must fail, naming the cases). Root: the driver bind-mounts.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"
start=$(date +%s)
if ! /usr/bin/python3 -c 'import grpc, grpc_tools, google.protobuf' 2>/dev/null; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends python3-grpcio python3-grpc-tools python3-protobuf >/dev/null
fi
echo "python packages ready after $(( $(date +%s) - start ))s"
out=$(mktemp)
if CSIKIT_PYTHON_DRIVER=1 go test -count=1 -v -run '^TestPythonDriver$' -timeout 10m ./cmd/csikit >"$out" 2>&1; then
	grep -E 'csikit sanity against the Python driver|^ok' "$out"
	rm -f "$out"
else
	cat "$out"; rm -f "$out"; exit 1
fi
echo "examples/python took $(( $(date +%s) - start ))s"
