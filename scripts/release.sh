#!/usr/bin/env bash
# Release csikit: every module of the repository at one version.
#
#   scripts/release.sh prepare vX.Y.Z   set every nested module's requires of
#                                       csikit modules (and go.work's
#                                       replaces) to vX.Y.Z, move CHANGELOG.md's
#                                       Unreleased entries to a
#                                       "## [X.Y.Z] - <date>" section, and
#                                       commit "release: vX.Y.Z"
#   scripts/release.sh tag vX.Y.Z       tag that commit vX.Y.Z and
#                                       <dir>/vX.Y.Z for every nested module
#   scripts/release.sh sums vX.Y.Z      write into each nested module's go.sum
#                                       the go.mod hash of each csikit module
#                                       it requires at vX.Y.Z (prepare does)
#   scripts/release.sh modules          list the released modules (dir, path)
#
# Both refuse a dirty tree; tag refuses a version some nested module does
# not require its csikit modules at (or whose go.sum lacks their go.mod
# hashes), one CHANGELOG.md does not release, and a tag that exists. Push the tags it prints with `git push origin TAG...`.
#
# The modules are found, not listed: every go.mod below the repository root
# outside testdata and hidden directories, except one whose go.mod has the
# line "// csikit: unreleased" (the tools module). Versions are vMAJOR.MINOR.PATCH
# with an optional pre-release (v0.2.0-rc.1); only major 0 and 1 (a major
# version 2 changes every module path).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
export PATH="$PATH:/usr/local/go/bin"

die() { echo "release: $*" >&2; exit 1; }

# modules prints "dir path" per released module, the root (".") first.
modules() {
	find . \( -name testdata -o \( -name '.*' -not -name . \) \) -prune -o -name go.mod -print |
		while read -r f; do
			grep -q '^// csikit: unreleased' "$f" && continue
			dir=$(dirname "$f"); dir=${dir#./}
			echo "$dir $(awk '$1 == "module" {print $2; exit}' "$f")"
		done | LC_ALL=C sort
}

# required FILE PATH prints the version FILE (a go.mod) requires PATH at.
required() {
	awk -v p="$2" '
		$1 == "require" && $2 == p && $3 ~ /^v/ {print $3}
		$1 == p && $2 ~ /^v/ && $3 != "=>" {print $2}' "$1"
}

# work_replaces prints "path version" for each versioned replace in go.work.
work_replaces() {
	[ -f go.work ] || return 0
	awk '$1 == "replace" && $3 ~ /^v/ {print $2, $3}
		$2 ~ /^v/ && $3 == "=>" {print $1, $2}' go.work
}

# modsum FILE prints the go.sum hash of a go.mod file (h1: the SHA-256 of
# the line "<sha256 of the file>  go.mod", in base64).
modsum() {
	local s x
	s=$(sha256sum <"$1" | cut -d' ' -f1)
	x=$(printf '%s  go.mod\n' "$s" | sha256sum | cut -d' ' -f1 | sed 's/../\\x&/g')
	echo "h1:$(printf '%b' "$x" | base64)"
}

# sums V writes, in each nested module's go.sum, the go.mod hash of every
# csikit module it requires at V. In the tree the workspace needs none;
# in a vendor's module cache, where sanity/kube builds its tool block with
# itself as the main module and go.sum read-only, they must be there.
sums() {
	local v=$1 dir path p ver line f
	local mods; mods=$(modules)
	local paths; paths=$(awk '{print $2}' <<<"$mods")
	declare -A dirof=()
	while read -r dir path; do dirof[$path]=$dir; done <<<"$mods"
	while read -r dir path; do
		[ "$dir" = . ] && continue
		for p in $paths; do
			[ "$(required "$dir/go.mod" "$p")" = "$v" ] || continue
			line="$p $v/go.mod $(modsum "${dirof[$p]}/go.mod")"
			f="$dir/go.sum"
			touch "$f"
			grep -qxF "$line" "$f" && continue
			{ grep -vF "$p $v/go.mod " "$f" || true; echo "$line"; } >"$f.new"
			mv "$f.new" "$f"
		done
	done <<<"$mods"
}

check_version() {
	[[ $1 =~ ^v(0|1)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]] ||
		die "$1: want vMAJOR.MINOR.PATCH[-PRERELEASE] with major 0 or 1"
}

check_clean() {
	if [ -n "$(git status --porcelain)" ]; then
		git status --short >&2
		die "the tree is dirty: commit or stash first"
	fi
}

prepare() {
	local v=$1 date dir path p ver nested=0
	check_version "$v"
	check_clean
	[ -f CHANGELOG.md ] || die "no CHANGELOG.md"
	grep -qx '## \[Unreleased\]' CHANGELOG.md || die "CHANGELOG.md has no '## [Unreleased]' line"
	grep -q "^## \[${v#v}\]" CHANGELOG.md && die "CHANGELOG.md already has a section for ${v#v}"
	local mods; mods=$(modules)
	local paths; paths=$(awk '{print $2}' <<<"$mods")
	declare -A wanted=()
	while read -r dir path; do
		[ "$dir" = . ] && continue
		nested=1
		for p in $paths; do
			ver=$(required "$dir/go.mod" "$p")
			[ -n "$ver" ] || continue
			(cd "$dir" && go mod edit -require="$p@$v")
			wanted[$p]=1
		done
	done <<<"$mods"
	[ "$nested" = 1 ] || echo "release: no nested module; only the root is released"
	# go.work: the tree stands in for exactly the version nested modules require.
	if [ -f go.work ]; then
		while read -r p ver; do
			[ -n "$p" ] && grep -qx "$p" <<<"$paths" && go work edit -dropreplace="$p@$ver" go.work
		done < <(work_replaces)
		while read -r dir path; do
			[ -n "${wanted[$path]:-}" ] && go work edit -replace="$path@$v=./${dir#.}" go.work
		done <<<"$mods"
	fi
	sums "$v"
	date=$(date -u +%Y-%m-%d)
	awk -v h="## [${v#v}] - $date" '{print} $0 == "## [Unreleased]" {print ""; print h}' CHANGELOG.md >CHANGELOG.md.new
	mv CHANGELOG.md.new CHANGELOG.md
	git add -A
	git commit -q -a -m "release: $v" -m "Every nested module requires the csikit modules at $v; CHANGELOG.md's
Unreleased entries are now $v's. Tag with: scripts/release.sh tag $v"
	echo "release: committed 'release: $v' ($(git rev-parse --short HEAD)); next: scripts/release.sh tag $v"
}

tag() {
	local v=$1 dir path p ver bad=() tags=() t
	check_version "$v"
	check_clean
	grep -q "^## \[${v#v}\]" CHANGELOG.md 2>/dev/null || die "CHANGELOG.md has no '## [${v#v}]' section: run prepare first"
	local mods; mods=$(modules)
	local paths; paths=$(awk '{print $2}' <<<"$mods")
	while read -r dir path; do
		if [ "$dir" = . ]; then tags+=("$v"); continue; fi
		tags+=("$dir/$v")
		for p in $paths; do
			ver=$(required "$dir/go.mod" "$p")
			[ -z "$ver" ] || [ "$ver" = "$v" ] || bad+=("$dir/go.mod requires $p $ver")
		done
	done <<<"$mods"
	if [ ${#bad[@]} -eq 0 ]; then
		declare -A dirof=()
		while read -r dir path; do dirof[$path]=$dir; done <<<"$mods"
		while read -r dir path; do
			[ "$dir" = . ] && continue
			for p in $paths; do
				[ "$(required "$dir/go.mod" "$p")" = "$v" ] || continue
				grep -qxF "$p $v/go.mod $(modsum "${dirof[$p]}/go.mod")" "$dir/go.sum" 2>/dev/null ||
					bad+=("$dir/go.sum lacks (or has a stale) $p $v/go.mod hash: run scripts/release.sh sums $v and commit")
			done
		done <<<"$mods"
	fi
	while read -r p ver; do
		[ -n "$p" ] && grep -qx "$p" <<<"$paths" && [ "$ver" != "$v" ] && bad+=("go.work replaces $p $ver")
	done < <(work_replaces)
	if [ ${#bad[@]} -gt 0 ]; then
		printf '  %s\n' "${bad[@]}" >&2
		die "not every nested require of a csikit module is $v: run scripts/release.sh prepare $v"
	fi
	for t in "${tags[@]}"; do
		git rev-parse -q --verify "refs/tags/$t" >/dev/null && die "tag $t exists"
	done
	for t in "${tags[@]}"; do
		git tag -a "$t" -m "csikit $v" HEAD
	done
	echo "release: tagged $(git rev-parse --short HEAD): ${tags[*]}"
	echo "release: push with: git push origin ${tags[*]}"
}

case "${1:-}" in
prepare) [ $# -eq 2 ] || die "usage: $0 prepare vX.Y.Z"; prepare "$2" ;;
tag) [ $# -eq 2 ] || die "usage: $0 tag vX.Y.Z"; tag "$2" ;;
sums) [ $# -eq 2 ] || die "usage: $0 sums vX.Y.Z"; check_version "$2"; sums "$2" ;;
modules) modules ;;
*) die "usage: $0 prepare|tag|sums vX.Y.Z, or $0 modules" ;;
esac
