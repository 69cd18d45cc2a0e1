package keys_test

import (
	"fmt"
	"maps"
	"slices"

	"github.com/csikit/csikit/k8s/keys"
)

func ExampleStripReserved() {
	// Parameters as CreateVolume receives them from an external-provisioner
	// run with --extra-create-metadata.
	params := map[string]string{
		"pool":            "fast",
		keys.PVCName:      "data",
		keys.PVCNamespace: "shop",
		keys.PVName:       "pvc-0f3e",
	}
	pvc, _ := keys.PVC(params)
	fmt.Println("for claim", pvc.Namespace+"/"+pvc.Name)
	// Fingerprint and store only what describes the volume.
	fmt.Println(slices.Sorted(maps.Keys(keys.StripReserved(params))))
	// Output:
	// for claim shop/data
	// [pool]
}

func ExamplePod() {
	volumeContext := map[string]string{
		keys.PodName:      "web-0",
		keys.PodNamespace: "shop",
		keys.Ephemeral:    "true",
	}
	if pod, ok := keys.Pod(volumeContext); ok {
		fmt.Println(pod.Namespace+"/"+pod.Name, "ephemeral:", pod.Ephemeral)
	}
	// Output: shop/web-0 ephemeral: true
}

func ExampleTokens() {
	volumeContext := map[string]string{
		keys.ServiceAccountTokens: `{"vault":{"token":"eyJhbGc","expirationTimestamp":"2026-12-02T18:00:00Z"}}`,
	}
	toks, err := keys.Tokens(volumeContext, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(toks["vault"]) // redacted: safe to log
	// Output: ServiceAccountToken{Value:[REDACTED], Expiration:2026-12-02T18:00:00Z}
}
