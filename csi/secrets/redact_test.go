package secrets_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/secrets"
)

func TestRedact(t *testing.T) {
	req := &csi.NodeStageVolumeRequest{
		VolumeId: "vol-1",
		Secrets:  map[string]string{"short": "hunter", "long": "hunter2", "empty": ""},
	}
	s := fmt.Sprintf("mount failed for %s with key hunter2 (and hunter); req=%v", req.GetVolumeId(), req)
	got := secrets.Redact(s, nil, req)
	if strings.Contains(got, "hunter") {
		t.Errorf("Redact = %q; still contains a secret", got)
	}
	if !strings.Contains(got, "vol-1") || !strings.Contains(got, "key "+secrets.Marker+" (and "+secrets.Marker+")") {
		t.Errorf("Redact = %q; want non-secret text kept and each secret replaced whole", got)
	}
	if got := secrets.Redact("no secrets here", &csi.ProbeRequest{}); got != "no secrets here" {
		t.Errorf("Redact without secrets = %q", got)
	}
	if got := secrets.Redact(""); got != "" {
		t.Errorf("Redact(\"\") = %q", got)
	}
}

func TestRedactNested(t *testing.T) {
	m := newFuture(t)
	s := fmt.Sprint(m)
	got := secrets.Redact(s, m)
	// Every string in a message marked secret is secret, even "name".
	// (A secret int has no text form to match; Strip clears it instead.)
	for _, leak := range []string{"SECRET", "name-whole"} {
		if strings.Contains(got, leak) {
			t.Errorf("Redact(%s) = %s; contains %s", s, got, leak)
		}
	}
	if !strings.Contains(got, "name-item1") || !strings.Contains(got, "eu-1") {
		t.Errorf("Redact lost non-secret text: %s", got)
	}
}
