//go:build linux

package quota_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/quota"
)

// A directory volume limited to 1 GiB: where the filesystem enforces
// project quotas, the directory gets its own project and a hard limit;
// elsewhere the driver only accounts the capacity.
func Example() {
	ctx := context.Background()
	dir := filepath.Join(os.TempDir(), "volumes", "vol-1")
	if err := quota.Check(ctx, filepath.Dir(dir)); err != nil {
		return // say once that capacity is not enforced here
	}
	const project = quota.ProjectID(1<<30 + 1) // unique per volume, kept in the volume's record
	if err := quota.SetProject(ctx, dir, project); err != nil {
		return
	}
	if err := quota.SetLimit(ctx, dir, project, 1<<30); err != nil {
		return
	}
	u, _ := quota.Get(ctx, dir, project)
	fmt.Println(u.Bytes, "of", u.LimitBytes, "bytes used")
}

// Paths from requests are checked: a relative one is refused.
func ExampleCheck() {
	err := quota.Check(context.Background(), "volumes/vol-1")
	fmt.Println(status.Code(err))
	// Output: InvalidArgument
}
