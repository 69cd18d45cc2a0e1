package capacity_test

import (
	"math"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/capacity"
)

const (
	KiB = int64(1) << 10
	MiB = int64(1) << 20
	GiB = int64(1) << 30
)

func rng(req, lim int64) *csi.CapacityRange {
	return &csi.CapacityRange{RequiredBytes: req, LimitBytes: lim}
}

func TestSize(t *testing.T) {
	fs := capacity.Options{Default: GiB, Min: 16 * MiB, Max: 100 * GiB, Granularity: 4 * KiB}
	for _, tc := range []struct {
		name string
		r    *csi.CapacityRange
		o    capacity.Options
		want int64
		code codes.Code
	}{
		{"nil range takes the default", nil, fs, GiB, codes.OK},
		{"empty range takes the default", rng(0, 0), fs, GiB, codes.OK},
		{"exact request", rng(2*GiB, 0), fs, 2 * GiB, codes.OK},
		{"rounded up to the granularity", rng(GiB+1, 0), fs, GiB + 4*KiB, codes.OK},
		{"rounded up to the minimum", rng(1, 0), fs, 16 * MiB, codes.OK},
		{"limit below the default clamps it", rng(0, 100*MiB+5), fs, 100 * MiB, codes.OK},
		{"limit equal to the request", rng(8*GiB, 8*GiB), fs, 8 * GiB, codes.OK},
		{"rounding would pass the limit", rng(GiB+1, GiB+2), fs, 0, codes.OutOfRange},
		{"minimum passes the limit", rng(0, MiB), fs, 0, codes.OutOfRange},
		{"request over the maximum", rng(101*GiB, 0), fs, 0, codes.OutOfRange},
		{"default over the maximum", nil, capacity.Options{Default: 2 * GiB, Max: GiB}, 0, codes.OutOfRange},
		{"no default and no bound", nil, capacity.Options{}, 0, codes.OutOfRange},
		{"no default, a limit", rng(0, 3*MiB), capacity.Options{Granularity: MiB}, 3 * MiB, codes.OK},
		{"limit below one granule", rng(0, MiB-1), capacity.Options{Granularity: MiB}, 0, codes.OutOfRange},
		{"negative request", rng(-1, 0), fs, 0, codes.InvalidArgument},
		{"negative limit", rng(0, -1), fs, 0, codes.InvalidArgument},
		{"limit below request", rng(2*GiB, GiB), fs, 0, codes.InvalidArgument},
		{"rounding overflows", rng(math.MaxInt64-1, 0), capacity.Options{Granularity: 4 * KiB}, 0, codes.OutOfRange},
		{"no granularity", rng(12345, 0), capacity.Options{}, 12345, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := capacity.Size(tc.r, tc.o)
			if c := status.Code(err); c != tc.code {
				t.Fatalf("Size(%v) error %v, want code %v", tc.r, err, tc.code)
			}
			if got != tc.want {
				t.Fatalf("Size(%v) = %d, want %d", tc.r, got, tc.want)
			}
			if err != nil && status.Convert(err).Message() == "" {
				t.Fatal("error without a message")
			}
		})
	}
}

func TestExpand(t *testing.T) {
	o := capacity.Options{Max: 10 * GiB, Granularity: MiB}
	for _, tc := range []struct {
		name    string
		r       *csi.CapacityRange
		current int64
		want    int64
		code    codes.Code
	}{
		{"grow", rng(2*GiB, 0), GiB, 2 * GiB, codes.OK},
		{"grow rounded", rng(GiB+1, 0), GiB, GiB + MiB, codes.OK},
		{"already big enough", rng(GiB/2, 0), GiB, GiB, codes.OK},
		{"same size", rng(GiB, GiB), GiB, GiB, codes.OK},
		{"limit below current", rng(0, GiB/2), GiB, 0, codes.OutOfRange},
		{"over the maximum", rng(11*GiB, 0), GiB, 0, codes.OutOfRange},
		{"no bound", rng(0, 0), GiB, 0, codes.InvalidArgument},
		{"nil range", nil, GiB, 0, codes.InvalidArgument},
		{"negative", rng(-5, 0), GiB, 0, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := capacity.Expand(tc.r, tc.current, o)
			if c := status.Code(err); c != tc.code {
				t.Fatalf("Expand(%v, %d) error %v, want code %v", tc.r, tc.current, err, tc.code)
			}
			if got != tc.want {
				t.Fatalf("Expand(%v, %d) = %d, want %d", tc.r, tc.current, got, tc.want)
			}
		})
	}
}

func BenchmarkSize(b *testing.B) {
	o := capacity.Options{Default: GiB, Min: 16 * MiB, Max: 100 * GiB, Granularity: 4 * KiB}
	r := rng(GiB+1, 2*GiB)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := capacity.Size(r, o); err != nil {
			b.Fatal(err)
		}
	}
}
