package secrets_test

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/secrets"
)

func ExampleStrip() {
	req := &csi.NodeStageVolumeRequest{
		VolumeId:          "vol-1",
		StagingTargetPath: "/var/lib/kubelet/plugins/x/staging",
		Secrets:           map[string]string{"password": "hunter2"},
	}
	stripped := secrets.Strip(req).(*csi.NodeStageVolumeRequest)
	fmt.Println(stripped.GetVolumeId(), stripped.GetSecrets()["password"])
	fmt.Println(req.GetSecrets()["password"]) // the argument is untouched
	// Output:
	// vol-1 ***stripped***
	// hunter2
}

func ExampleFormat() {
	req := &csi.DeleteVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"token": "hunter2"}}
	fmt.Println(secrets.Format(req))
	// Output:
	// {"volume_id":"vol-1","secrets":{"token":"***stripped***"}}
}

func ExampleLogValue() {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // keep the example's output stable
			}
			return a
		},
	}))
	req := &csi.DeleteVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"token": "hunter2"}}

	// Stripping and formatting happen only for records that are written.
	logger.Debug("DeleteVolume", "request", secrets.LogValue(req))
	// Output:
	// {"level":"DEBUG","msg":"DeleteVolume","request":{"volume_id":"vol-1","secrets":{"token":"***stripped***"}}}
}

func ExampleRedact() {
	req := &csi.NodePublishVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"token": "hunter2"}}
	// A driver error that quoted a secret, about to be logged:
	msg := "mount -o token=hunter2 failed for vol-1"
	fmt.Println(secrets.Redact(msg, req))
	// Output:
	// mount -o token=***stripped*** failed for vol-1
}

func ExampleIsSecret() {
	fields := (&csi.CreateVolumeRequest{}).ProtoReflect().Descriptor().Fields()
	fmt.Println(secrets.IsSecret(fields.ByName("secrets")), secrets.IsSecret(fields.ByName("parameters")))
	// Output:
	// true false
}
