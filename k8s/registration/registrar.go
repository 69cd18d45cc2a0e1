package registration

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Status is what kubelet last reported about the registration.
type Status struct {
	// Notified is true once kubelet has called NotifyRegistrationStatus.
	Notified bool
	// Registered is kubelet's plugin_registered flag.
	Registered bool
	// Error is kubelet's error message when Registered is false.
	Error string
	// At is when kubelet reported it.
	At time.Time
	// InfoRequests counts kubelet's GetInfo calls.
	InfoRequests int
}

// Registrar serves kubelet's plugin-registration API for one CSI driver.
// Its methods are safe for concurrent use.
type Registrar struct {
	opts Options

	mu     sync.Mutex
	status Status
	lis    *net.UnixListener
	info   os.FileInfo // the socket file this Registrar created
}

// New checks opts and returns a Registrar; it touches no file until Listen.
// It returns InvalidArgument for a bad DriverName, Endpoint or socket path.
func New(opts Options) (*Registrar, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Registrar{opts: o}, nil
}

// SocketPath is the registration socket kubelet will find.
func (r *Registrar) SocketPath() string { return r.opts.SocketPath }

// Status returns what kubelet last reported.
func (r *Registrar) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Err returns a FailedPrecondition error carrying kubelet's message while
// kubelet reports that registration failed, and nil otherwise (also before
// kubelet has reported anything, so a liveness probe does not kill a plugin
// kubelet has not got to yet). Call it from Probe or /healthz.
func (r *Registrar) Err() error {
	s := r.Status()
	if s.Notified && !s.Registered {
		return status.Errorf(codes.FailedPrecondition,
			"kubelet plugin registration of %q: got failure %q at %s, want plugin_registered", r.opts.DriverName, s.Error, s.At.Format(time.RFC3339))
	}
	return nil
}

// Run is Listen followed by Serve: it blocks until ctx ends, then stops
// serving and removes the socket.
func (r *Registrar) Run(ctx context.Context) error {
	if err := r.Listen(); err != nil {
		return err
	}
	return r.Serve(ctx)
}

// Listen creates the registration socket, replacing a stale one. Kubelet may
// connect as soon as it returns; calls queue until Serve runs. It returns
// FailedPrecondition when the directory is missing, when the path holds
// something other than a socket, or when another process serves the socket.
func (r *Registrar) Listen() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lis != nil {
		return status.Errorf(codes.FailedPrecondition, "registration: %s: already listening", r.opts.SocketPath)
	}
	if err := removeStale(r.opts.SocketPath); err != nil {
		return err
	}
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: r.opts.SocketPath, Net: "unix"})
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return status.Errorf(codes.FailedPrecondition,
				"registration: listen on %s: %v; want kubelet's plugins_registry directory mounted there", r.opts.SocketPath, err)
		}
		return status.Errorf(codes.Internal, "registration: listen on %s: %v", r.opts.SocketPath, err)
	}
	// We remove the socket ourselves, and only if it is still ours.
	lis.SetUnlinkOnClose(false)
	info, err := os.Lstat(r.opts.SocketPath)
	if err == nil {
		err = os.Chmod(r.opts.SocketPath, r.opts.SocketMode)
	}
	if err != nil {
		lis.Close()
		os.Remove(r.opts.SocketPath)
		return status.Errorf(codes.Internal, "registration: prepare %s: %v", r.opts.SocketPath, err)
	}
	r.lis, r.info = lis, info
	r.opts.Logger.Info("kubelet registration socket listening",
		"driver", r.opts.DriverName, "socket", r.opts.SocketPath, "endpoint", r.opts.Endpoint)
	return nil
}

// Serve answers kubelet on the socket Listen created until ctx ends, then
// stops gracefully, removes the socket (if it is still the one Listen made)
// and returns nil. If serving fails it removes the socket and returns the
// error.
func (r *Registrar) Serve(ctx context.Context) error {
	r.mu.Lock()
	lis, info := r.lis, r.info
	r.mu.Unlock()
	if lis == nil {
		return status.Error(codes.FailedPrecondition, "registration: Serve called before Listen")
	}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, &service{r: r})

	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()

	var err error
	select {
	case <-ctx.Done():
		srv.GracefulStop()
		<-done
	case err = <-done:
		srv.Stop()
		err = status.Errorf(codes.Internal, "registration: serve %s: %v", r.opts.SocketPath, err)
	}
	r.removeOwn(info)
	r.mu.Lock()
	r.lis, r.info = nil, nil
	r.mu.Unlock()
	r.opts.Logger.Info("kubelet registration socket removed", "driver", r.opts.DriverName, "socket", r.opts.SocketPath)
	return err
}

// removeOwn deletes the socket file if it is still the one we created.
func (r *Registrar) removeOwn(own os.FileInfo) {
	cur, err := os.Lstat(r.opts.SocketPath)
	if err != nil || !os.SameFile(cur, own) {
		r.opts.Logger.Warn("kubelet registration socket replaced by someone else; leaving it",
			"driver", r.opts.DriverName, "socket", r.opts.SocketPath)
		return
	}
	if err := os.Remove(r.opts.SocketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.opts.Logger.Error("remove kubelet registration socket", "socket", r.opts.SocketPath, "err", err)
	}
}

// removeStale deletes path if it is a socket nobody accepts connections on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return status.Errorf(codes.FailedPrecondition, "registration: inspect %s: %v", path, err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return status.Errorf(codes.FailedPrecondition,
			"registration: %s: got a %s, want a socket or nothing; not removing it", path, kind(fi.Mode()))
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		conn.Close()
		return status.Errorf(codes.FailedPrecondition,
			"registration: %s: another process serves this socket (a second registrar, or node-driver-registrar?); want it gone", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return status.Errorf(codes.FailedPrecondition, "registration: remove stale socket %s: %v", path, err)
	}
	return nil
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeSymlink != 0:
		return "symlink"
	case m.IsRegular():
		return "regular file"
	default:
		return "special file (" + m.Type().String() + ")"
	}
}
