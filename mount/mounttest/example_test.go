package mounttest_test

import (
	"context"
	"fmt"

	"github.com/csikit/csikit/mount"
	"github.com/csikit/csikit/mount/mounttest"
)

// A node RPC written against mount.Interface, tested without root.
func Example() {
	publish := func(m mount.Interface, staging, target string) error {
		return m.Publish(context.Background(), mount.PublishOptions{Source: staging, Target: target})
	}
	var rec mounttest.Recorder
	fmt.Println(publish(&rec, "/staging/v1", "/pods/p1/v1")) // never staged
	_ = rec.Stage(context.Background(), mount.StageOptions{Device: "/dev/loop3", Target: "/staging/v1"})
	fmt.Println(publish(&rec, "/staging/v1", "/pods/p1/v1"))
	for _, c := range rec.Calls() {
		fmt.Println(c.Op, c.Target, c.Err == nil)
	}
	// Output:
	// rpc error: code = FailedPrecondition desc = mounttest: source /staging/v1 is not staged
	// <nil>
	// Publish /pods/p1/v1 false
	// Stage /staging/v1 true
	// Publish /pods/p1/v1 true
}
