// Package csitest serves a driver in-process for tests, as net/http/httptest
// serves a handler: a csikit.Server on a unix socket in a private temporary
// directory, with a connected client for each CSI service.
//
// It needs no root and no other process, so a driver's RPC logic — request
// handling, error codes, idempotency through the journal — can be unit
// tested on any machine; pair it with a recording mounter
// (mount/mounttest) for node RPCs. Tests of the real data path (mounts,
// loop devices) still belong next to it: csitest only saves the plumbing.
//
// For those tests it also runs the driver's binary as a CO meets it —
// Build compiles it, StartProcess serves it on a socket of its own and
// hands sanity.Endpoint and sanity.Config what they take (Endpoint,
// Restart, Log) — and RequireRoot skips a test that needs root, or fails
// it where StrictEnv says every prerequisite is present (CI), so that no
// such test passes there by skipping.
package csitest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/csikit/csikit"
)

// Server is a driver served by csikit on a unix socket for the length of a
// test.
type Server struct {
	// Server is the csikit server, for Capabilities, Locks and the like.
	Server *csikit.Server
	// Endpoint is the socket as a CSI endpoint (unix:///…), for tools such
	// as the sanity harness that dial it themselves.
	Endpoint string
	// Conn is a client connection to the socket.
	Conn *grpc.ClientConn
	// Identity is an Identity client on Conn.
	Identity csi.IdentityClient
	// Controller is a Controller client on Conn.
	Controller csi.ControllerClient
	// Node is a Node client on Conn.
	Node csi.NodeClient
	// GroupController is a GroupController client on Conn.
	GroupController csi.GroupControllerClient

	dir    string
	cancel context.CancelFunc
	done   chan error
}

// Start serves driver with opts (Name and Version default to
// "test.csikit.dev" and "v0.0.0-test") and returns once a client is
// connected. Close stops it.
func Start(driver any, opts csikit.Options) (*Server, error) {
	if opts.Name == "" {
		opts.Name = "test.csikit.dev"
	}
	if opts.Version == "" {
		opts.Version = "v0.0.0-test"
	}
	srv, err := csikit.NewServer(driver, opts)
	if err != nil {
		return nil, err
	}
	// os.TempDir, not a test's TempDir: a unix socket path must stay under
	// 108 bytes, and test names can be long.
	dir, err := os.MkdirTemp("", "csitest-")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "csi.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{Server: srv, Endpoint: "unix://" + sock, dir: dir, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- srv.Serve(ctx, lis) }()
	conn, err := grpc.NewClient(s.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	s.Conn = conn
	s.Identity = csi.NewIdentityClient(conn)
	s.Controller = csi.NewControllerClient(conn)
	s.Node = csi.NewNodeClient(conn)
	s.GroupController = csi.NewGroupControllerClient(conn)
	return s, nil
}

// NewServer is Start for a test: it fails tb on error and closes the server
// in tb.Cleanup, failing tb if serving ended with an error.
func NewServer(tb testing.TB, driver any, opts csikit.Options) *Server {
	tb.Helper()
	s, err := Start(driver, opts)
	if err != nil {
		tb.Fatalf("csitest: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("csitest: %v", err)
		}
	})
	return s
}

// Close closes the client, stops the server (draining in-flight calls as
// csikit.Server.Serve does) and removes the socket's directory. It returns
// the serving error, if any.
func (s *Server) Close() error {
	var errs []error
	if s.Conn != nil {
		errs = append(errs, s.Conn.Close())
	}
	s.cancel()
	if err := <-s.done; err != nil {
		errs = append(errs, fmt.Errorf("serve: %w", err))
	}
	errs = append(errs, os.RemoveAll(s.dir))
	return errors.Join(errs...)
}
