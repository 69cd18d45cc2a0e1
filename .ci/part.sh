# Sourced by .ci/side.sh and .ci/kube-lane.sh, which set part_label:
# part NAME CMD [ARG...] runs CMD between the lines "=== $part_label: NAME"
# and "=== $part_label: done in Ns".
part() {
	local t; t=$(date +%s)
	echo "=== $part_label: $1"
	shift
	"$@"
	echo "=== $part_label: done in $(( $(date +%s) - t ))s"
}
