package csikit_test

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit"
)

// A driver's GetMetadataAllocated reports ranges as it finds them; the
// stream batches them by max_results and drops what ends before
// starting_offset. NewBlockMetadataStream stands in for the server here.
func ExampleBlockMetadataStream() {
	send := func(t csi.BlockMetadataType, capacity int64, batch []*csi.BlockMetadata) error {
		fmt.Printf("%v of %d bytes:", t, capacity)
		for _, b := range batch {
			fmt.Printf(" [%d,+%d)", b.GetByteOffset(), b.GetSizeBytes())
		}
		fmt.Println()
		return nil
	}
	w := csikit.NewBlockMetadataStream(context.Background(), 4096, 2, send)
	_ = w.Begin(csi.BlockMetadataType_FIXED_LENGTH, 1<<20)
	for _, off := range []int64{0, 4096, 16384, 65536} {
		if err := w.Add(off, 4096); err != nil {
			fmt.Println(err)
			return
		}
	}
	_ = w.Flush()
	fmt.Println(w.Add(8192, 4096)) // before the last range: a driver bug
	// Output:
	// FIXED_LENGTH of 1048576 bytes: [4096,+4096) [16384,+4096)
	// FIXED_LENGTH of 1048576 bytes: [65536,+4096)
	// rpc error: code = Internal desc = csikit: BlockMetadataStream.Add: range at 8192 starts before the end of the previous one (69632): ranges must be sorted and must not overlap
}
