package validation_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/validation"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// controller counts the CreateVolume calls that reach it; every other RPC
// answers Unimplemented, which is how a test sees that a call got past
// validation.
type controller struct {
	csi.UnimplementedControllerServer
	creates atomic.Int32
}

func (c *controller) CreateVolume(context.Context, *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	c.creates.Add(1)
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-1"}}, nil
}

type metadata struct {
	csi.UnimplementedSnapshotMetadataServer
}

func (metadata) GetMetadataAllocated(_ *csi.GetMetadataAllocatedRequest, s csi.SnapshotMetadata_GetMetadataAllocatedServer) error {
	return s.Send(&csi.GetMetadataAllocatedResponse{VolumeCapacityBytes: 1 << 30})
}

// serve starts a gRPC server with the validation interceptors on a unix
// socket and returns a client connection; both stop at test cleanup.
func serve(t *testing.T, cfg validation.Config, ctrl *controller) *grpc.ClientConn {
	t.Helper()
	dir, err := os.MkdirTemp("", "csival") // short: unix socket paths are capped near 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "csi.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(validation.UnaryServerInterceptor(cfg)),
		grpc.StreamInterceptor(validation.StreamServerInterceptor(cfg)),
	)
	csi.RegisterIdentityServer(srv, csi.UnimplementedIdentityServer{})
	csi.RegisterControllerServer(srv, ctrl)
	csi.RegisterGroupControllerServer(srv, csi.UnimplementedGroupControllerServer{})
	csi.RegisterNodeServer(srv, csi.UnimplementedNodeServer{})
	csi.RegisterSnapshotMetadataServer(srv, metadata{})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		<-done
	})
	return conn
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestInterceptorOverUnixSocket replays the required-field matrix over a
// real connection: valid requests reach the handler (Unimplemented), each
// cleared required field is answered InvalidArgument with the message
// Validate gives, and the handler never sees it.
func TestInterceptorOverUnixSocket(t *testing.T) {
	ctrl := &controller{}
	cfg := *cfgAll()
	conn := serve(t, cfg, ctrl)
	ctx := callCtx(t)
	svcs := csi.File_csi_proto.Services()
	calls := 0
	for i := 0; i < svcs.Len(); i++ {
		for j := 0; j < svcs.Get(i).Methods().Len(); j++ {
			md := svcs.Get(i).Methods().Get(j)
			if md.IsStreamingServer() || md.IsStreamingClient() {
				continue
			}
			full := "/" + string(svcs.Get(i).FullName()) + "/" + string(md.Name())
			out, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
			if err != nil {
				t.Fatal(err)
			}
			valid := validRequests()[full]
			err = conn.Invoke(ctx, full, valid, out.New().Interface())
			if full == csi.Controller_CreateVolume_FullMethodName {
				if err != nil {
					t.Errorf("%s valid: got %v, want success", md.Name(), err)
				}
			} else if status.Code(err) != codes.Unimplemented {
				t.Errorf("%s valid: got %v, want Unimplemented from the handler", md.Name(), err)
			}
			calls++
			for _, field := range required[full] {
				req := proto.Clone(valid)
				req.ProtoReflect().Clear(req.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(field)))
				err := conn.Invoke(ctx, full, req, out.New().Interface())
				want := validation.Validate(full, req, &cfg)
				if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != status.Convert(want).Message() {
					t.Errorf("%s without %s: got %v, want %v", md.Name(), field, err, want)
				}
				calls++
			}
		}
	}
	if got := ctrl.creates.Load(); got != 1 {
		t.Errorf("CreateVolume handler ran %d times, want 1 (only the valid call)", got)
	}
	if calls < 60 {
		t.Errorf("made %d calls, want at least 60", calls)
	}
}

func TestInterceptorCopiesConfig(t *testing.T) {
	cfg := validation.Config{AccessModes: []csi.VolumeCapability_AccessMode_Mode{snw}}
	ctrl := &controller{}
	conn := serve(t, cfg, ctrl)
	cfg.AccessModes[0] = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER // must not affect the server
	req := &csi.CreateVolumeRequest{Name: "n", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)}}
	if _, err := csi.NewControllerClient(conn).CreateVolume(callCtx(t), req); err != nil {
		t.Fatalf("got %v, want success with the config as it was when the interceptor was built", err)
	}
}

func TestStreamInterceptor(t *testing.T) {
	conn := serve(t, validation.Config{}, &controller{})
	client := csi.NewSnapshotMetadataClient(conn)
	ctx := callCtx(t)

	stream, err := client.GetMetadataAllocated(ctx, &csi.GetMetadataAllocatedRequest{StartingOffset: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	wantRefusal(t, err, codes.InvalidArgument, "GetMetadataAllocated: snapshot_id is required")

	stream, err = client.GetMetadataAllocated(ctx, &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-1"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil || resp.GetVolumeCapacityBytes() != 1<<30 {
		t.Fatalf("valid stream: got %v, %v, want capacity %d", resp, err, 1<<30)
	}
}
