package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/csikit/csikit/csi/endpoint"
)

// csiPackage is the protobuf package of the CSI services.
const csiPackage = "csi.v1"

// Registering the spec's Go types registers its file descriptors, which
// is where every method below comes from: no list is kept here.
var _ = csi.File_csi_proto

// method is one RPC of a CSI service, as the spec's descriptors define it.
type method struct {
	desc protoreflect.MethodDescriptor
}

// Name is "Service.Method", e.g. "Node.NodeGetInfo".
func (m method) Name() string {
	return string(m.desc.Parent().Name()) + "." + string(m.desc.Name())
}

// Service is the service's short name, e.g. "Node".
func (m method) Service() string { return string(m.desc.Parent().Name()) }

// FullMethod is the gRPC method path, e.g. "/csi.v1.Node/NodeGetInfo".
func (m method) FullMethod() string {
	return "/" + string(m.desc.Parent().FullName()) + "/" + string(m.desc.Name())
}

// Streaming reports whether the server answers with a stream.
func (m method) Streaming() bool { return m.desc.IsStreamingServer() }

// newMessage returns a new message of the full name, from the registry.
func newMessage(name protoreflect.FullName) (proto.Message, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(name)
	if err != nil {
		return nil, fmt.Errorf("no Go type registered for %s: %w", name, err)
	}
	return mt.New().Interface(), nil
}

// NewRequest returns an empty request message.
func (m method) NewRequest() (proto.Message, error) { return newMessage(m.desc.Input().FullName()) }

// NewResponse returns an empty response message.
func (m method) NewResponse() (proto.Message, error) { return newMessage(m.desc.Output().FullName()) }

// csiMethods returns every RPC of every service of the CSI spec's
// registered files, sorted by Name.
func csiMethods() []method {
	var ms []method
	protoregistry.GlobalFiles.RangeFilesByPackage(csiPackage, func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				ms = append(ms, method{desc: sd.Methods().Get(j)})
			}
		}
		return true
	})
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name() < ms[j].Name() })
	return ms
}

// resolve finds the method name names: "Service.Method",
// "csi.v1.Service.Method", "/csi.v1.Service/Method", or a bare method
// name (CSI's are unique); letter case does not matter. An unknown name
// gets an error listing the closest methods.
func resolve(name string) (method, error) {
	q := strings.TrimPrefix(name, "/")
	q = strings.ReplaceAll(q, "/", ".")
	q = strings.TrimPrefix(q, csiPackage+".")
	ms := csiMethods()
	for _, m := range ms {
		if strings.EqualFold(m.Name(), q) || (!strings.Contains(q, ".") && strings.EqualFold(string(m.desc.Name()), q)) {
			return m, nil
		}
	}
	close := closest(q, ms, 5)
	if len(close) == 0 {
		names := make([]string, len(ms))
		for i, m := range ms {
			names[i] = m.Name()
		}
		return method{}, fmt.Errorf("unknown CSI method %q; the methods are: %s", name, strings.Join(names, ", "))
	}
	return method{}, fmt.Errorf("unknown CSI method %q; did you mean %s?", name, strings.Join(close, ", "))
}

// closest returns up to n method names near q: those containing it, and
// those within an edit distance of a third of its length.
func closest(q string, ms []method, n int) []string {
	type cand struct {
		name string
		d    int
	}
	lq := strings.ToLower(q)
	var cs []cand
	for _, m := range ms {
		full, short := strings.ToLower(m.Name()), strings.ToLower(string(m.desc.Name()))
		d := min(distance(lq, full), distance(lq, short))
		if len(lq) >= 3 && (strings.Contains(full, lq) || strings.Contains(lq, short)) {
			d = min(d, 1)
		}
		if d <= max(2, len(lq)/3) {
			cs = append(cs, cand{m.Name(), d})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
	var out []string
	for i := 0; i < len(cs) && i < n; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// dial returns a client connection to the CSI endpoint ep (unix:///path,
// /path or tcp://host:port). It connects lazily: an unreachable driver
// shows as Unavailable on the first call.
func dial(ep string) (*grpc.ClientConn, error) {
	network, addr, err := endpoint.Parse(absEndpoint(ep))
	if err != nil {
		return nil, err
	}
	target := "passthrough:///" + addr
	if network == "unix" {
		target = "unix://" + addr
	}
	return grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// absEndpoint makes a relative socket path (run/csi.sock, as a user types
// it at a shell) absolute; endpoint.Parse, like a CO, takes absolute ones
// only. Endpoints with a scheme are left as they are.
func absEndpoint(ep string) string {
	if ep == "" || strings.Contains(ep, "://") || filepath.IsAbs(ep) {
		return ep
	}
	if abs, err := filepath.Abs(ep); err == nil {
		return abs
	}
	return ep
}

// invoke calls m with req on conn. A unary response is passed to each
// once; a streamed one once per message. It returns the first error.
func invoke(ctx context.Context, conn *grpc.ClientConn, m method, req proto.Message, each func(proto.Message) error) error {
	if !m.Streaming() {
		resp, err := m.NewResponse()
		if err != nil {
			return err
		}
		if err := conn.Invoke(ctx, m.FullMethod(), req, resp); err != nil {
			return err
		}
		return each(resp)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{StreamName: string(m.desc.Name()), ServerStreams: true}, m.FullMethod())
	if err != nil {
		return err
	}
	if err := st.SendMsg(req); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if err := st.CloseSend(); err != nil {
		return err
	}
	for {
		resp, err := m.NewResponse()
		if err != nil {
			return err
		}
		if err := st.RecvMsg(resp); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := each(resp); err != nil {
			return err
		}
	}
}
