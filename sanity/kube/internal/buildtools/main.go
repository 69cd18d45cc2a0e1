// Command buildtools builds (or finds cached) the binaries of the kube
// package's tool block and prints their directory; ci.sh runs it before the
// tests so that a cold build is outside go test's timeout. With -runtime it
// also builds the container runtime of the kubelet mode (containerd), with
// -e2e Kubernetes' e2e.test (its storage-only build, internal/e2estorage),
// agnhost, kubectl and ginkgo (the e2e runner).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/csikit/csikit/sanity/kube"
)

func main() {
	rt := flag.Bool("runtime", false, "also build containerd, its runc shim and ctr (the kubelet mode)")
	e2e := flag.Bool("e2e", false, "also build e2e.test, agnhost, kubectl and ginkgo (the e2e runner)")
	flag.Parse()
	// The go command's output, and a wait for another process's build of
	// the same binaries (the build lock).
	o := kube.BuildOptions{Log: func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }}
	start := time.Now()
	dir, err := kube.EnsureBinaries(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%s (%s)\n", dir, time.Since(start).Round(time.Second))
	if *rt {
		start = time.Now()
		dir, err := kube.EnsureRuntimeBinaries(context.Background(), o)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("%s (%s)\n", dir, time.Since(start).Round(time.Second))
	}
	if *e2e {
		start = time.Now()
		dir, err := kube.EnsureE2EBinaries(context.Background(), o)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("%s e2e (%s)\n", dir, time.Since(start).Round(time.Second))
	}
}
