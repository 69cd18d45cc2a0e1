package logging_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/internal/testenv"
)

// The error line never holds the request's secret, however the driver
// formatted it into its error.
func TestErrorLineRedactsEverySpelling(t *testing.T) {
	const pw = "zq\"xv\\9<é>"
	req := &csi.NodeStageVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"pw": pw}}
	j, _ := json.Marshal(pw)
	q := strconv.Quote(pw)
	for _, driverErr := range []error{
		status.Error(codes.Internal, "key "+pw),
		status.Errorf(codes.Internal, "key %q", pw),
		status.Errorf(codes.Internal, "key %+q", pw),
		status.Errorf(codes.Internal, "body %s", j),
	} {
		for name, h := range map[string]func(*testenv.SyncBuffer) slog.Handler{
			"json": func(b *testenv.SyncBuffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
			"text": func(b *testenv.SyncBuffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		} {
			var buf testenv.SyncBuffer
			i := logging.UnaryServerInterceptor(slog.New(h(&buf)), logging.Options{})
			i(context.Background(), req, &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Node/NodeStageVolume"},
				func(context.Context, any) (any, error) { return nil, driverErr })
			out := buf.String()
			for _, n := range []string{pw, q[1 : len(q)-1], string(j[1 : len(j)-1]), "zq", "xv"} {
				if strings.Contains(out, n) {
					t.Errorf("%s handler, driver error %q: line holds %q:\n%s", name, driverErr, n, out)
				}
			}
			if !strings.Contains(out, "***stripped***") {
				t.Errorf("%s handler: no marker in %s", name, out)
			}
		}
	}
}
