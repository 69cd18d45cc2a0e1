//go:build linux

package vmtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBoots records the boots startOn asks for and answers them in order.
type fakeBoots struct {
	calls []Lane
	opts  []Options
	errs  []error // per call; nil boots
}

func (f *fakeBoots) boot(_ context.Context, l Lane, o Options) (*VM, error) {
	i := len(f.calls)
	f.calls, f.opts = append(f.calls, l), append(f.opts, o)
	if i < len(f.errs) && f.errs[i] != nil {
		return nil, f.errs[i]
	}
	return &VM{Lane: l}, nil
}

// TestAcceleratorChoice: KVM when /dev/kvm works (boot bounded by
// kvmBootTimeout), TCG without it, TCG after a KVM boot that fails (the
// reason kept in VM.KVMError and in a marker), and straight to TCG for
// later VMs once the marker says KVM does not run the guest.
func TestAcceleratorChoice(t *testing.T) {
	ctx := context.Background()
	opts := Options{}.withDefaults()
	kvmLane := Lane{KVM: true}

	t.Run("no_kvm", func(t *testing.T) {
		f := &fakeBoots{}
		v, err := startOn(ctx, Lane{}, opts, f.boot, filepath.Join(t.TempDir(), "marker"))
		if err != nil {
			t.Fatal(err)
		}
		if len(f.calls) != 1 || f.calls[0].KVM || f.opts[0].BootTimeout != opts.BootTimeout {
			t.Fatalf("boots %+v %+v; want one TCG boot with the full timeout", f.calls, f.opts)
		}
		if v.KVMError == nil || !strings.Contains(v.KVMError.Error(), "/dev/kvm") {
			t.Errorf("KVMError %v; want it to name /dev/kvm", v.KVMError)
		}
	})

	t.Run("kvm_works", func(t *testing.T) {
		f := &fakeBoots{}
		marker := filepath.Join(t.TempDir(), "marker")
		v, err := startOn(ctx, kvmLane, opts, f.boot, marker)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.calls) != 1 || !f.calls[0].KVM || f.opts[0].BootTimeout != kvmBootTimeout {
			t.Fatalf("boots %+v %+v; want one KVM boot bounded by %v", f.calls, f.opts, kvmBootTimeout)
		}
		if !v.Lane.KVM || v.KVMError != nil {
			t.Errorf("VM lane %+v, KVMError %v; want KVM and no error", v.Lane, v.KVMError)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("a KVM boot that worked wrote the marker")
		}
	})

	t.Run("kvm_fails_then_tcg", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "marker")
		why := errors.New("qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69")
		f := &fakeBoots{errs: []error{why}}
		v, err := startOn(ctx, kvmLane, opts, f.boot, marker)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.calls) != 2 || !f.calls[0].KVM || f.calls[1].KVM || f.opts[1].BootTimeout != opts.BootTimeout {
			t.Fatalf("boots %+v %+v; want KVM, then TCG with the full timeout", f.calls, f.opts)
		}
		if v.Lane.KVM || !errors.Is(v.KVMError, why) {
			t.Errorf("VM lane %+v, KVMError %v; want TCG and the KVM boot's error", v.Lane, v.KVMError)
		}
		if b, err := os.ReadFile(marker); err != nil || !strings.Contains(string(b), "MSR 0x10a") {
			t.Fatalf("marker %q, %v; want the KVM boot's error", b, err)
		}
		// A later VM goes straight to TCG and says why.
		f = &fakeBoots{}
		v, err = startOn(ctx, kvmLane, opts, f.boot, marker)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.calls) != 1 || f.calls[0].KVM {
			t.Fatalf("boots after the marker %+v; want one TCG boot", f.calls)
		}
		if v.KVMError == nil || !strings.Contains(v.KVMError.Error(), "MSR 0x10a") {
			t.Errorf("KVMError %v; want the recorded reason", v.KVMError)
		}
	})

	t.Run("both_fail", func(t *testing.T) {
		f := &fakeBoots{errs: []error{errors.New("kvm: guest hung"), errors.New("tcg: no kernel")}}
		_, err := startOn(ctx, kvmLane, opts, f.boot, filepath.Join(t.TempDir(), "marker"))
		if err == nil || !strings.Contains(err.Error(), "kvm: guest hung") || !strings.Contains(err.Error(), "tcg: no kernel") {
			t.Fatalf("error %v; want both boots' errors", err)
		}
	})

	t.Run("canceled_kvm_boot_is_not_kvms_fault", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		marker := filepath.Join(t.TempDir(), "marker")
		f := &fakeBoots{errs: []error{context.Canceled}}
		if _, err := startOn(cctx, kvmLane, opts, f.boot, marker); !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v; want context.Canceled", err)
		}
		if len(f.calls) != 1 {
			t.Errorf("boots %+v; want no TCG boot after the caller gave up", f.calls)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("a canceled boot marked KVM unusable")
		}
	})
}
