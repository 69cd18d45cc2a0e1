package kube

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/container-storage-interface/spec/lib/go/csi" // registers the CSI services the proxy decodes
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Proxy records the CSI calls to a driver that runs as a binary, whose
// server cannot take a Recorder's interceptor: it serves Endpoint (pass
// it to Start) and forwards every call, bytes unchanged and without
// metadata, to the driver's endpoint, recording each in Recorder with its
// request, response and error. Errors reach the sidecars with the
// driver's gRPC code and message. While the driver is down the sidecars
// get Unavailable from the proxy instead of losing their connection.
type Proxy struct {
	// Endpoint is unix://<socket> of the proxy.
	Endpoint string
	// Recorder holds every call forwarded (secrets included, in memory
	// only).
	Recorder *Recorder

	conn *grpc.ClientConn
	srv  *grpc.Server
	dir  string
}

// StartProxy serves a Proxy to driverEndpoint (unix:///abs/path or an
// absolute socket path; the driver need not be serving yet) on a socket
// in a new temporary directory, stopped and removed on t's Cleanup.
func StartProxy(t testing.TB, driverEndpoint string) *Proxy {
	t.Helper()
	p, err := startProxy(driverEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return p
}

func startProxy(driverEndpoint string) (*Proxy, error) {
	sock, ok := socketPath(driverEndpoint)
	if !ok {
		return nil, fmt.Errorf("kube: proxy: driver endpoint %q: want unix:///abs/path or /abs/path", driverEndpoint)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})))
	if err != nil {
		return nil, fmt.Errorf("kube: proxy: %w", err)
	}
	dir, err := os.MkdirTemp("", "csikit-proxy-")
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("kube: proxy: %w", err)
	}
	own := filepath.Join(dir, "csi.sock")
	l, err := net.Listen("unix", own)
	if err != nil {
		conn.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("kube: proxy: %w", err)
	}
	p := &Proxy{Endpoint: "unix://" + own, Recorder: &Recorder{}, conn: conn}
	p.srv = grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(p.forward))
	p.dir = dir
	go func() { _ = p.srv.Serve(l) }() // returns on stop
	return p, nil
}

// forward relays one unary call and records it.
func (p *Proxy) forward(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return errors.New("kube: proxy: no method")
	}
	var req, resp frame
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	err := p.conn.Invoke(ss.Context(), method, &req, &resp)
	c := Call{Method: method, Err: err}
	in, out := messageTypes(method)
	c.Request = decode(in, req)
	if err == nil {
		c.Response = decode(out, resp)
	}
	p.Recorder.add(c)
	if err != nil {
		return err // a status error: the code and message pass through
	}
	return ss.SendMsg(&resp)
}

func (p *Proxy) stop() {
	p.srv.Stop()
	p.conn.Close()
	os.RemoveAll(p.dir)
}

// messageTypes finds the request and response types of a full method name
// ("/csi.v1.Controller/CreateVolume") among the registered services.
func messageTypes(method string) (in, out protoreflect.MessageType) {
	svc, name, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if !ok {
		return nil, nil
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, nil
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, nil
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, nil
	}
	in, _ = protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	out, _ = protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	return in, out
}

// decode parses a frame as mt; nil when the type is unknown or the bytes
// do not parse.
func decode(mt protoreflect.MessageType, f frame) proto.Message {
	if mt == nil {
		return nil
	}
	m := mt.New().Interface()
	if proto.Unmarshal(f, m) != nil {
		return nil
	}
	return m
}

// frame is one message on the wire, passed through unparsed.
type frame []byte

// rawCodec moves frames as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("kube: proxy codec: got %T, want a frame", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*f)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("kube: proxy codec: got %T, want a frame", v)
	}
	*f = data.Materialize()
	return nil
}

// Name is "proto": the content type the CSI peers on both sides expect.
func (rawCodec) Name() string { return "proto" }
