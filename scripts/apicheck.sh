#!/usr/bin/env bash
# API compatibility (CI runs it): tools/cmd/apicheck compares the exported
# API of every released module with the previous release (the highest v*
# tag or "release: vX.Y.Z" commit, not HEAD's) with apidiff, and fails on an
# incompatible change that CHANGELOG.md's Unreleased section does not name
# (the rule is at the top of CHANGELOG.md). Loads packages with
# -tags pacific, so examples/rbd's cgo packages need librados-dev and
# librbd-dev (examples/rbd's CI installs them first). Needs the history:
# in a shallow clone it fails, saying so.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$PATH:/usr/local/go/bin"
cd "$root/tools"
GOWORK=off go run ./cmd/apicheck -repo "$root" -tags pacific "$@"
