// Package capacity turns a CSI CapacityRange into a volume size with the
// spec's error codes, so every driver rounds, clamps and refuses the same
// way.
//
// The spec's rules (CreateVolume, ControllerExpandVolume): required_bytes
// is the size the volume must at least have, limit_bytes the size it must
// not exceed; either may be unset (0), not both for an expansion. A driver
// that cannot make a size inside the range answers OUT_OF_RANGE; a range
// that makes no sense (a negative bound, a limit below the requirement) is
// INVALID_ARGUMENT.
package capacity

import (
	"math"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Options describe the sizes a backend can make. The zero value accepts any
// positive size and has no default.
type Options struct {
	// Default is the size of a volume whose range sets no bound (CreateVolume
	// only). Zero makes such a request OutOfRange.
	Default int64
	// Min is the smallest volume the backend makes; smaller requests are
	// rounded up to it (0: no minimum).
	Min int64
	// Max is the largest volume the backend makes (0: no maximum).
	Max int64
	// Granularity rounds sizes up to a multiple of it, e.g. 4096 for a
	// filesystem's block or 1<<20 for an allocator's extent (0 or 1: bytes).
	Granularity int64
}

// Size returns the volume size for r under o: the requested size rounded
// up to o.Min and o.Granularity, or o.Default (clamped to the limit) when
// r sets neither bound. It fails with InvalidArgument for a malformed range
// and with OutOfRange when no size the backend can make lies inside it.
func Size(r *csi.CapacityRange, o Options) (int64, error) {
	req, lim := r.GetRequiredBytes(), r.GetLimitBytes()
	switch {
	case req < 0:
		return 0, status.Errorf(codes.InvalidArgument, "capacity_range.required_bytes must not be negative, got %d", req)
	case lim < 0:
		return 0, status.Errorf(codes.InvalidArgument, "capacity_range.limit_bytes must not be negative, got %d", lim)
	case lim > 0 && req > lim:
		return 0, status.Errorf(codes.InvalidArgument, "capacity_range.limit_bytes (%d) is less than required_bytes (%d)", lim, req)
	}
	g := o.Granularity
	if g < 1 {
		g = 1
	}
	size := req
	if req == 0 {
		size = o.Default
		if lim > 0 && (size == 0 || size > lim) {
			// No requirement and a limit below the default: the largest
			// size the backend can make within the limit.
			size = lim / g * g
		}
		if size == 0 {
			return 0, status.Errorf(codes.OutOfRange, "capacity_range sets no size and this driver has no default: set required_bytes")
		}
	}
	if size < o.Min {
		size = o.Min
	}
	size, ok := roundUp(size, g)
	switch {
	case !ok:
		return 0, status.Errorf(codes.OutOfRange, "requested %d bytes cannot be rounded up to a multiple of %d bytes", req, g)
	case lim > 0 && size > lim:
		return 0, status.Errorf(codes.OutOfRange, "no volume size within capacity_range [%d, %d] bytes: this driver makes volumes of at least %d bytes in multiples of %d bytes", req, lim, o.Min, g)
	case o.Max > 0 && size > o.Max:
		return 0, status.Errorf(codes.OutOfRange, "requested %d bytes, more than the largest volume this driver makes (%d bytes)", size, o.Max)
	}
	return size, nil
}

// Expand returns the new size for a ControllerExpandVolume or
// NodeExpandVolume of a volume that has current bytes now. It applies
// Size's rules (without a default: an expansion must set a bound), never
// shrinks (a requirement at or below current answers current), and fails
// with OutOfRange when the limit is below the current size.
func Expand(r *csi.CapacityRange, current int64, o Options) (int64, error) {
	if lim := r.GetLimitBytes(); lim > 0 && lim < current {
		return 0, status.Errorf(codes.OutOfRange, "capacity_range.limit_bytes (%d) is less than the volume's current %d bytes: volumes never shrink", lim, current)
	}
	o.Default = 0
	if r.GetRequiredBytes() == 0 && r.GetLimitBytes() == 0 {
		return 0, status.Errorf(codes.InvalidArgument, "capacity_range must set required_bytes or limit_bytes")
	}
	if r.GetRequiredBytes() <= current && r.GetRequiredBytes() >= 0 && r.GetLimitBytes() >= 0 {
		return current, nil
	}
	return Size(r, o)
}

// roundUp rounds n up to a multiple of g, reporting overflow.
func roundUp(n, g int64) (int64, bool) {
	if g <= 1 {
		return n, true
	}
	rem := n % g
	if rem == 0 {
		return n, true
	}
	if n > math.MaxInt64-(g-rem) {
		return 0, false
	}
	return n + g - rem, true
}
