package secrets_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/secrets"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

// redactCases are the texts BenchmarkRedact redacts: a typical driver error
// without a secret, one with the secret as is, one with it %q-quoted, and a
// long (4 KiB) message without one.
var redactCases = []struct{ name, text string }{
	{"miss", "rbd: map failed for pool fast image csi-vol-0123456789: exit status 22 (Invalid argument)"},
	{"hit", "rbd: map failed: --key=hunter2-Secret-Key exit status 22"},
	{"quoted", fmt.Sprintf("rbd: map failed: key %q exit status 22", `p"ss\word`)},
	{"long-miss", strings.Repeat("mount: /var/lib/kubelet/pods/0123 wrong fs type, bad option; ", 64)},
}

// BenchmarkRedact: Redact on driver error messages, with a request that
// holds two secrets (one with a quote and a backslash) and with one that
// holds none (the common case).
func BenchmarkRedact(b *testing.B) {
	withSecrets := &csi.NodeStageVolumeRequest{VolumeId: "vol-1",
		Secrets: map[string]string{"userID": "hunter2-Secret-Key", "pw": `p"ss\word`}}
	none := &csi.NodeStageVolumeRequest{VolumeId: "vol-1"}
	for _, c := range redactCases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = secrets.Redact(c.text, withSecrets)
			}
		})
	}
	b.Run("no-secrets", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = secrets.Redact(redactCases[0].text, none)
		}
	})
}

// BenchmarkRedactError: a failed call's error through the interceptor, with
// a request holding secrets: "clean" does not mention them (the common
// failure), "quoted" %q-formats one.
func BenchmarkRedactError(b *testing.B) {
	req := &csi.NodeStageVolumeRequest{VolumeId: "vol-1",
		Secrets: map[string]string{"userID": "hunter2-Secret-Key", "pw": `p"ss\word`}}
	for name, err := range map[string]error{
		"clean":  status.Error(codes.FailedPrecondition, redactCases[0].text),
		"quoted": status.Error(codes.FailedPrecondition, redactCases[2].text),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = secrets.RedactError(err, req)
			}
		})
	}
}

// BenchmarkInterceptorOK: what the interceptor costs a successful call.
func BenchmarkInterceptorOK(b *testing.B) {
	i := secrets.UnaryServerInterceptor()
	req := benchStageRequest()
	resp := &csi.NodeStageVolumeResponse{}
	info := &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Node/NodeStageVolume"}
	h := func(context.Context, any) (any, error) { return resp, nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = i(ctx, req, info, h)
	}
}

// BenchmarkRedactAdversarial: a secret of n backslashes against a
// twice-quoted text of 10n more; n=1000 hits the work bound.
func BenchmarkRedactAdversarial(b *testing.B) {
	for _, n := range []int{16, 100, 1000} {
		secret := strings.Repeat(`\`, n) + "x"
		text := strconv.Quote(strconv.Quote(strings.Repeat(`\`, 10*n) + secret))
		req := &csi.NodeStageVolumeRequest{Secrets: map[string]string{"k": secret}}
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = secrets.Redact(text, req)
			}
		})
	}
}

// manySecrets is a request whose secrets map holds n entries (a
// tenant-named Secret of about 1.5 MiB at 100,000): token-like values,
// one in four with base64's "+" or "/" (escapable, so looked for by a
// pass of its own where its plain run occurs).
func manySecrets(n int) (*csi.NodeStageVolumeRequest, string) {
	m := make(map[string]string, n)
	var one string
	for i := range n {
		v := fmt.Sprintf("tok%07dQx", i*7919%n)
		if i%4 == 0 {
			v = fmt.Sprintf("tok%07d+/x", i*7919%n)
		}
		m[fmt.Sprintf("key-%06d", i)] = v
		if i == n/2 {
			one = v
		}
	}
	return &csi.NodeStageVolumeRequest{VolumeId: "vol-1", Secrets: m}, one
}

// BenchmarkRedactErrorManySecrets: a failed call's error redacted against
// a request with 100,000 secrets (go test -run XXX -bench
// RedactErrorManySecrets -benchtime 10x ./csi/secrets): "short" is a
// driver error quoting one of them, "long" the same inside 64 KiB of
// text. Redactor is built per call, as the interceptor does.
func BenchmarkRedactErrorManySecrets(b *testing.B) {
	req, one := manySecrets(100_000)
	short := fmt.Sprintf("rbd: map failed: key %q exit status 22", one)
	long := strings.Repeat("mount: /var/lib/kubelet/pods/0123 wrong fs type, bad option; ", 512) + short +
		strings.Repeat(" retrying mount of /dev/rbd0 on /var/lib/kubelet/plugins/x", 512)
	for _, c := range []struct{ name, text string }{{"short", short}, {"long", long}} {
		err := status.Error(codes.Internal, c.text)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				got := secrets.RedactError(err, req)
				if strings.Contains(status.Convert(got).Message(), one) {
					b.Fatal("secret left")
				}
			}
		})
	}
}
