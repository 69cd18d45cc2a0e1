package driver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// twoNodeTools is a mapper's tool runner for two node plugins on one
// host: `rbd-nbd list-mapped` lists both nodes' mappings of one image,
// and every other call is recorded.
type twoNodeTools struct{ calls []string }

func (f *twoNodeTools) run(_ context.Context, name string, args ...string) ([]byte, error) {
	if name == "rbd-nbd" && len(args) > 0 && args[0] == "list-mapped" {
		return []byte(`[{"pid":11,"pool":"p","namespace":"","image":"img","snap":"-","device":"/dev/nbd0"},` +
			`{"pid":12,"pool":"p","namespace":"","image":"img","snap":"-","device":"/dev/nbd1"}]`), nil
	}
	f.calls = append(f.calls, name+" "+strings.Join(args, " "))
	return []byte("/dev/unexpected\n"), nil
}

// TestHostMappersTakeTheRecordedDevice: krbd and rbd-nbd mappings are
// host-wide, and two node plugins on one host (the split-brain test's
// nodes) map the same image with a client each. A node's Find, Map and
// Unmap take the device its stage recorded (Image.Device), never the
// other node's mapping — which, fenced, fails every I/O — and only a
// record without a device (from before devices were recorded) takes any
// mapping of the image.
func TestHostMappersTakeTheRecordedDevice(t *testing.T) {
	ctx := context.Background()
	sysfs := t.TempDir()
	for _, n := range []string{"0", "1"} {
		dir := filepath.Join(sysfs, n)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range map[string]string{"pool": "p\n", "name": "img\n", "current_snap": "-\n"} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name   string
		m      func(*twoNodeTools) Mapper
		mine   string // node B's device; node A's is the other
		gone   string
		legacy []string // what a record without a device may find
		unmap  string
	}{
		{"krbd", func(f *twoNodeTools) Mapper { return &krbdMapper{run: f.run, sysfs: sysfs} }, "/dev/rbd1", "/dev/rbd7",
			[]string{"/dev/rbd0", "/dev/rbd1"}, "rbd device unmap /dev/rbd1"},
		{"rbd-nbd", func(f *twoNodeTools) Mapper { return &nbdMapper{run: f.run} }, "/dev/nbd1", "/dev/nbd7",
			[]string{"/dev/nbd0", "/dev/nbd1"}, "rbd-nbd unmap /dev/nbd1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &twoNodeTools{}
			m := tc.m(f)
			img := Image{Key: "k", Pool: "p", Name: "img", Device: tc.mine}
			if dev, ok, err := m.Find(ctx, img); err != nil || !ok || dev != tc.mine {
				t.Fatalf("Find with the recorded device %s: %q, %v, %v; want it (not the other node's mapping)", tc.mine, dev, ok, err)
			}
			if dev, err := m.Map(ctx, img); err != nil || dev != tc.mine {
				t.Fatalf("Map with the recorded device %s: %q, %v; want it", tc.mine, dev, err)
			}
			if len(f.calls) != 0 {
				t.Fatalf("Map of a mapped image ran %q", f.calls)
			}
			if err := m.Unmap(ctx, img); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(f.calls, []string{tc.unmap}) {
				t.Fatalf("Unmap ran %q; want %q (this node's device only)", f.calls, tc.unmap)
			}
			f.calls = nil
			gone := img
			gone.Device = tc.gone
			if dev, ok, err := m.Find(ctx, gone); err != nil || ok {
				t.Fatalf("Find with a recorded device that no longer maps the image: %q, %v, %v; want not found", dev, ok, err)
			}
			legacy := img
			legacy.Device = ""
			if dev, ok, err := m.Find(ctx, legacy); err != nil || !ok || !slices.Contains(tc.legacy, dev) {
				t.Fatalf("Find without a recorded device: %q, %v, %v; want a mapping of the image", dev, ok, err)
			}
			if _, ok := m.(hostMapper); !ok {
				t.Fatalf("%T maps host-wide but is not a hostMapper: a first stage would take another node's mapping", m)
			}
		})
	}
}
