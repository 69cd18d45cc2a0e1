// Command buildtools builds (or finds cached) the binaries of the kube
// package's tool block and prints their directory; ci.sh runs it before the
// tests so that a cold build is outside go test's timeout.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/csikit/csikit/sanity/kube"
)

func main() {
	start := time.Now()
	dir, err := kube.EnsureBinaries(context.Background(), kube.BuildOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%s (%s)\n", dir, time.Since(start).Round(time.Second))
}
