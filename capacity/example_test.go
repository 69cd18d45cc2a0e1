package capacity_test

import (
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/capacity"
)

// A filesystem-backed driver with 1 GiB volumes by default, 4 KiB blocks
// and a 16 MiB minimum.
func ExampleSize() {
	o := capacity.Options{Default: 1 << 30, Min: 16 << 20, Granularity: 4096}
	for _, r := range []*csi.CapacityRange{
		nil,                          // no bounds: the default
		{RequiredBytes: 1},           // below the minimum: rounded up
		{RequiredBytes: 10<<20 + 1},  // rounded up to the minimum too
		{RequiredBytes: 100<<20 + 1}, // rounded up to a block
		{LimitBytes: 8 << 20},        // the minimum does not fit the limit
	} {
		size, err := capacity.Size(r, o)
		fmt.Println(size, status.Code(err))
	}
	// Output:
	// 1073741824 OK
	// 16777216 OK
	// 16777216 OK
	// 104861696 OK
	// 0 OutOfRange
}
