#!/usr/bin/env bash
# CI entry point for sanity/kube: builds (or reuses) the control-plane and
# sidecar binaries from this module's tool block, then runs the scenarios.
# Exits non-zero on any failure. Needs: go, and no Debian packages beyond a
# base system (keys and certificates are generated in Go).
set -euo pipefail
cd "$(dirname "$0")"

start=$(date +%s)
# The tests build the binaries themselves when missing, but doing it here
# keeps the build out of go test's timeout and reports its duration.
go run ./internal/buildtools
echo "sanity/kube: binaries ready in $(( $(date +%s) - start ))s"

go vet ./...
go test -count=1 -timeout 15m ./...
echo "sanity/kube: done in $(( $(date +%s) - start ))s"
