package secrets_test

import (
	"encoding/json"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/secrets"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func ExampleRedactError() {
	req := &csi.NodeStageVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"key": `pa"ss\word`}}
	// A driver that quoted the secret into its error:
	err := status.Errorf(codes.Internal, "rbd map failed: --key %q", req.GetSecrets()["key"])
	fmt.Println(secrets.RedactError(err, req))
	// Output:
	// rpc error: code = Internal desc = rbd map failed: --key "***stripped***"
}

func ExampleNewRedactor() {
	req := &csi.CreateVolumeRequest{Name: "pvc-1", Secrets: map[string]string{"token": "<t0k&n>"}}
	r := secrets.NewRedactor(req) // once per request, for several texts
	body, _ := json.Marshal(map[string]string{"token": "<t0k&n>"})
	fmt.Println(r.Redact(string(body)))
	fmt.Println(r.Redact("token=%3Ct0k%26n%3E"))
	// Output:
	// {"token":"***stripped***"}
	// token=***stripped***
}
