package secrets_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/secrets"
)

func benchStageRequest() *csi.NodeStageVolumeRequest {
	return &csi.NodeStageVolumeRequest{
		VolumeId:          "vol-0123456789",
		StagingTargetPath: "/var/lib/kubelet/plugins/kubernetes.io/csi/example.csi.vendor/abcdef/globalmount",
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
		PublishContext: map[string]string{"device": "/dev/sdb"},
		VolumeContext:  map[string]string{"pool": "fast", "storage.kubernetes.io/csiProvisionerIdentity": "1234"},
		Secrets:        map[string]string{"userID": "admin", "userKey": "hunter2"},
	}
}

// BenchmarkStrip: a request with secrets (copy + redact).
func BenchmarkStrip(b *testing.B) {
	req := benchStageRequest()
	b.ReportAllocs()
	for b.Loop() {
		_ = secrets.Strip(req)
	}
}

// BenchmarkStripNoSecrets: the common case, nothing to strip (no copy).
func BenchmarkStripNoSecrets(b *testing.B) {
	req := benchStageRequest()
	req.Secrets = nil
	b.ReportAllocs()
	for b.Loop() {
		_ = secrets.Strip(req)
	}
}

// BenchmarkFormat: Strip plus JSON, what a written debug line pays.
func BenchmarkFormat(b *testing.B) {
	req := benchStageRequest()
	b.ReportAllocs()
	for b.Loop() {
		_ = secrets.Format(req)
	}
}

// BenchmarkLogValueDisabled: a Debug line with the logger at Info.
func BenchmarkLogValueDisabled(b *testing.B) {
	req := benchStageRequest()
	logger := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		logger.LogAttrs(ctx, slog.LevelDebug, "call", slog.Any("request", secrets.LogValue(req)))
	}
}
