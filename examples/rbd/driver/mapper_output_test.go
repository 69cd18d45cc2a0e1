package driver

import (
	"context"
	"testing"

	"github.com/csikit/csikit/mount"
)

// TestMapOutputWithWarnings: the map tools' output as mount.ExecRunner
// returns it (stdout, then stderr) on a node without /etc/ceph/ceph.conf
// carries warnings after the device; Map returns the device alone, and
// rbd-nbd's list parses with the warnings after its JSON. (Seen in the
// VM lane: "stat device /dev/rbd0\ndid not load config file ...".)
func TestMapOutputWithWarnings(t *testing.T) {
	warn := "did not load config file, using default settings.\n2026-12-04T14:52:51.100+0000 7f2549512380 -1 Errors while parsing config file!\n"
	run := func(out map[string]string) mount.Runner {
		return mount.RunnerFunc(func(_ context.Context, name string, args ...string) ([]byte, error) {
			return []byte(out[name+" "+args[0]]), nil
		})
	}
	img := Image{Key: "k", Monitors: "127.0.0.1:1", Pool: "rbd", Name: "img", Creds: Credentials{User: "u", Key: "AQ=="}}
	k := &krbdMapper{run: run(map[string]string{"rbd device": "/dev/rbd3\n" + warn}), keys: t.TempDir(), sysfs: t.TempDir()}
	if dev, err := k.Map(context.Background(), img); err != nil || dev != "/dev/rbd3" {
		t.Errorf("krbd Map = %q, %v; want /dev/rbd3", dev, err)
	}
	n := &nbdMapper{run: run(map[string]string{"rbd-nbd map": "/dev/nbd5\n" + warn, "rbd-nbd list-mapped": "[]\n" + warn}), keys: t.TempDir()}
	if dev, err := n.Map(context.Background(), img); err != nil || dev != "/dev/nbd5" {
		t.Errorf("rbd-nbd Map = %q, %v; want /dev/nbd5", dev, err)
	}
	n.run = run(map[string]string{"rbd-nbd list-mapped": `[{"pool":"rbd","image":"img","snap":"-","device":"/dev/nbd5"}]` + "\n" + warn})
	if dev, ok, err := n.Find(context.Background(), img); err != nil || !ok || dev != "/dev/nbd5" {
		t.Errorf("rbd-nbd Find = %q, %v, %v; want /dev/nbd5", dev, ok, err)
	}
}
