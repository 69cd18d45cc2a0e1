//go:build linux

package csitest_test

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/csikit/csikit/csitest"
)

// TestStartProcessRestartStop builds examples/tmpfs (it serves without
// root), starts it, and checks that it answers on its socket before and
// after a restart, that its log is kept, and that a stop is clean and
// idempotent.
func TestStartProcessRestartStop(t *testing.T) {
	bin := csitest.Build(t, "github.com/csikit/csikit/examples/tmpfs")
	p := csitest.StartProcess(t, bin, "--nodeid", "n1", "--state-dir", t.TempDir(), "--log-level", "debug")
	probe := func(when string) {
		t.Helper()
		conn, err := grpc.NewClient(p.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		info, err := csi.NewIdentityClient(conn).GetPluginInfo(context.Background(), &csi.GetPluginInfoRequest{})
		if err != nil || info.GetName() != "tmpfs.csikit.dev" {
			t.Fatalf("%s: GetPluginInfo = %v, %v; want tmpfs.csikit.dev", when, info, err)
		}
	}
	probe("after start")
	if err := p.Restart(context.Background()); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	probe("after restart")
	if log, _ := p.Log(); len(log) == 0 {
		t.Error("Log is empty, want the driver's debug log")
	}
	if err := p.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}
