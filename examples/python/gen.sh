#!/bin/sh
# Generates the Python stubs of the CSI spec (csi_pb2.py, csi_pb2_grpc.py)
# into DIR from the csi.proto of the spec module csikit requires, as found
# in the Go module cache. Needs Debian's python3-grpc-tools (its protoc
# 1.14 output runs on python3-protobuf 3.21, with the C++ or the pure
# Python implementation).
set -eu
out=${1:?usage: gen.sh DIR}
cd "$(dirname "$0")/../.."
spec=$(go list -m -f '{{.Dir}}' github.com/container-storage-interface/spec)
mkdir -p "$out"
/usr/bin/python3 -m grpc_tools.protoc -I"$spec" --python_out="$out" --grpc_python_out="$out" "$spec/csi.proto"
