package runner_test

import (
	"context"
	"fmt"
	"time"

	"github.com/csikit/csikit/runner"
)

// A driver's main runs its parts together: here two stand-ins for the
// metrics server and the CSI server, stopped in reverse order when the
// context ends.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	serve := func(name string) runner.Runnable {
		return runner.Func(func(ctx context.Context) error {
			<-ctx.Done()
			fmt.Println("stopped", name)
			return nil
		})
	}
	g := runner.New(runner.Options{})
	g.Add("metrics", serve("metrics"))
	g.Add("csi", serve("csi"))
	fmt.Println("run:", g.Run(ctx))
	// Output:
	// stopped csi
	// stopped metrics
	// run: <nil>
}
