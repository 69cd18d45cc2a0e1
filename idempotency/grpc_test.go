package idempotency_test

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/idempotency"
	"github.com/csikit/csikit/journal"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// slowController creates each volume slowly, under the reserved ID, and
// records how many backend objects exist per name.
type slowController struct {
	csi.UnimplementedControllerServer
	mu      sync.Mutex
	objects map[string]map[string]bool // name → IDs
}

func (c *slowController) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	id, ok := journal.ReservedID(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no reserved ID")
	}
	select {
	case <-time.After(20 * time.Millisecond): // the backend at work
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.objects[req.GetName()] == nil {
		c.objects[req.GetName()] = map[string]bool{}
	}
	c.objects[req.GetName()][id] = true
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: req.GetCapacityRange().GetRequiredBytes()}}, nil
}

// TestOverGRPC runs the interceptor in a real gRPC server: many clients
// create a few volumes at once, retrying on Aborted as a CO does. Every name
// must end with exactly one backend object and every client with its ID.
func TestOverGRPC(t *testing.T) {
	j, err := journal.OpenFile(filepath.Join(t.TempDir(), "journal.db"), journal.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ic := newIC(t, idempotency.Options{Journal: j})
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(ic.UnaryServerInterceptor()))
	ctrl := &slowController{objects: map[string]map[string]bool{}}
	csi.RegisterControllerServer(srv, ctrl)
	lis := bufconn.Listen(1 << 20)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := csi.NewControllerClient(conn)

	const clients, names = 100, 5
	ids := make([]string, clients)
	var aborted sync.Map
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "pvc-" + string(rune('a'+c%names))
			for attempt := 0; attempt < 200; attempt++ {
				resp, err := client.CreateVolume(context.Background(), createVol(name))
				if status.Code(err) == codes.Aborted {
					aborted.Store(c, status.Convert(err).Message())
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if err != nil {
					t.Errorf("client %d: %v", c, err)
					return
				}
				ids[c] = resp.GetVolume().GetVolumeId()
				return
			}
			t.Errorf("client %d: still Aborted after 200 attempts", c)
		}()
	}
	wg.Wait()
	for name, objs := range ctrl.objects {
		if len(objs) != 1 {
			t.Errorf("%s: got %d backend objects, want 1", name, len(objs))
		}
	}
	if len(ctrl.objects) != names {
		t.Errorf("got %d names created, want %d", len(ctrl.objects), names)
	}
	for c, id := range ids {
		if !ctrl.objects["pvc-"+string(rune('a'+c%names))][id] {
			t.Errorf("client %d: got ID %q, which is not the backend object", c, id)
		}
	}
	n := 0
	aborted.Range(func(any, any) bool { n++; return true })
	if n == 0 {
		t.Error("no client saw Aborted: the test did not exercise concurrency")
	}
	if st := ic.Locks().Stats(); st.Held != 0 {
		t.Errorf("after all calls: got %d held keys, want 0", st.Held)
	}
}
