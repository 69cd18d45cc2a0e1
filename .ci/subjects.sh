#!/usr/bin/env bash
# Fails when a commit made after the rule was adopted has a subject line
# longer than 72 characters (the story belongs in the body). Commits up to
# and including $base predate the rule and are not checked.
set -euo pipefail
cd "$(dirname "$0")/.."
base=52bb2a39bd7274ae74782d42dba2dd07fd8cb78c
max=72
# Commits already on main whose subject broke the rule: rewriting main's
# history to fix one would invalidate every clone, so they are listed
# here, each with its length, and no other is let through.
allowed=(
	c0b54b27663d8eb1c773e69f6bd00c07e40458f6 # 73: command: own the output pipes; kill a helper ...
)
if ! git cat-file -e "$base^{commit}" 2>/dev/null; then
	echo "subjects: $base not in this clone's history (shallow clone?); cannot check" >&2
	exit 1
fi
bad=0
while IFS=$'\t' read -r hash subject; do
	if [ "${#subject}" -gt "$max" ] && ! printf '%s\n' "${allowed[@]}" | grep -q "^$(git rev-parse "$hash")\$"; then
		echo "subjects: $hash has a ${#subject}-character subject (at most $max): $subject" >&2
		bad=1
	fi
done < <(git log --format='%h%x09%s' "$base..HEAD")
[ "$bad" -eq 0 ] && echo "subjects: every commit after $base has a subject of at most $max characters (but the ${#allowed[@]} listed in .ci/subjects.sh)"
exit "$bad"
