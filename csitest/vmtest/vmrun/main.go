//go:build linux

// Command vmrun runs shell commands, in order, in csitest/vmtest's VM
// (Debian's kernel under qemu, the host's root read-only, tmpfs TMPDIR,
// no network device) and exits with the status of the first that fails:
//
//	go run ./csitest/vmtest/vmrun -modules rbd,xfs -udev \
//		-setup 'env=$(examples/rbd/test/cluster.sh start /run/tmp/ceph) && cat $env >>$VMTEST_ENV' \
//		-- 'rbd -c $CSIKIT_CEPH_CONF ls' './pkg.test -test.v'
//
// Commands run with bash -c as root in the current directory; their
// output streams to stdout. The boot time goes to stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/csikit/csikit/csitest/vmtest"
)

func main() {
	modules := flag.String("modules", "", "comma-separated kernel modules to load in the guest")
	mem := flag.Int("mem", 2048, "guest memory, MiB")
	cpus := flag.Int("cpus", 2, "guest processors")
	udev := flag.Bool("udev", false, "start systemd-udevd in the guest")
	setup := flag.String("setup", "", "bash script run once after boot; KEY=VALUE lines it appends to $VMTEST_ENV join every command's environment")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: vmrun [flags] -- 'command' ...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	opts := vmtest.Options{MemoryMiB: *mem, CPUs: *cpus, Udev: *udev, Setup: *setup}
	if *modules != "" {
		opts.Modules = strings.Split(*modules, ",")
	}
	ctx := context.Background()
	start := time.Now()
	vm, err := vmtest.Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vmrun:", err)
		os.Exit(1)
	}
	accel := "TCG"
	if vm.Lane.KVM {
		accel = "KVM"
	} else if vm.KVMError != nil {
		accel = "TCG (KVM not used: " + firstLine(vm.KVMError.Error()) + ")"
	}
	fmt.Fprintf(os.Stderr, "vmrun: %s booted under %s in %v (ready, setup done, in %v)\n",
		vm.Lane.KernelVersion, accel, vm.BootTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	wd, _ := os.Getwd()
	code := 0
	for _, c := range flag.Args() {
		res, err := vm.Run(ctx, vmtest.Command{Argv: []string{"bash", "-c", c}, Dir: wd, Output: os.Stdout})
		if err != nil {
			fmt.Fprintln(os.Stderr, "vmrun:", err)
			code = 1
			break
		}
		if res.ExitCode != 0 {
			fmt.Fprintf(os.Stderr, "vmrun: %q exited %d\n", c, res.ExitCode)
			code = res.ExitCode
			break
		}
	}
	_ = vm.Close()
	os.Exit(code)
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
