package endpoint

import (
	"context"
	"errors"
	"fmt"
	"github.com/csikit/csikit/internal/codederr"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
)

// Default modes and timeouts used when the corresponding Options field is zero.
const (
	DefaultSocketMode  os.FileMode = 0o660
	DefaultDirMode     os.FileMode = 0o750
	DefaultDialTimeout             = time.Second
)

// Options configures Listen. The zero value is ready to use.
type Options struct {
	// SocketMode is the permission of the unix socket file; 0 means
	// DefaultSocketMode (0660). Ignored for TCP.
	SocketMode os.FileMode
	// DirMode is the permission of parent directories Listen creates; 0
	// means DefaultDirMode (0750). Existing directories are left alone.
	DirMode os.FileMode
	// DialTimeout bounds the dial that tells a stale socket from a live
	// one; 0 means DefaultDialTimeout (1s).
	DialTimeout time.Duration
}

// Listen opens a listener on the CSI endpoint ep (see Parse). For unix
// sockets it creates the parent directory, removes a stale socket, refuses a
// live one or a non-socket file, applies SocketMode before any client can
// connect, and removes the socket file when the listener is closed. ctx
// bounds the setup (the liveness dial and the listen), not the listener's
// lifetime.
func Listen(ctx context.Context, ep string, opts Options) (net.Listener, error) {
	network, addr, err := Parse(ep)
	if err != nil {
		return nil, err
	}
	if network == TCP {
		var lc net.ListenConfig
		l, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			return nil, wrap(codes.Unavailable, fmt.Sprintf("endpoint %q: listen", ep), err)
		}
		return l, nil
	}
	return listenUnix(ctx, addr, opts)
}

func listenUnix(ctx context.Context, path string, opts Options) (net.Listener, error) {
	if len(path) > maxPath {
		return nil, codederr.Errorf(codes.InvalidArgument, nil, "endpoint: unix socket path %s is %d bytes long, want at most %d", path, len(path), maxPath)
	}
	if opts.SocketMode == 0 {
		opts.SocketMode = DefaultSocketMode
	}
	if opts.DirMode == 0 {
		opts.DirMode = DefaultDirMode
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	dir := filepath.Dir(path)
	// The socket is first bound at dir/.sNNNNNNNNNN/s (see below).
	if n := len(dir) + len("/.s4294967295/s"); n > maxPath {
		return nil, codederr.Errorf(codes.InvalidArgument, nil,
			"endpoint: socket directory %s is too long: the temporary socket inside it needs %d bytes, want at most %d",
			dir, n, maxPath)
	}
	if err := os.MkdirAll(dir, opts.DirMode); err != nil {
		return nil, wrap(codes.FailedPrecondition, "endpoint: creating socket directory "+dir, err)
	}
	if err := removeStale(ctx, path, opts.DialTimeout); err != nil {
		return nil, err
	}

	// Bind inside a private directory so nobody can connect before the mode
	// is right, then hard-link into place: link(2), unlike rename(2), fails
	// if something appeared at path since removeStale looked.
	tmpDir, err := os.MkdirTemp(dir, ".s")
	if err != nil {
		return nil, wrap(codes.FailedPrecondition, "endpoint: creating a private directory in "+dir, err)
	}
	defer os.Remove(tmpDir)
	tmp := filepath.Join(tmpDir, "s")
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "unix", tmp)
	if err != nil {
		return nil, wrap(codes.Unavailable, "endpoint: listen on "+path, err)
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	defer os.Remove(tmp)
	fail := func(err error) (net.Listener, error) {
		ul.Close()
		return nil, err
	}
	if err := os.Chmod(tmp, opts.SocketMode); err != nil {
		return fail(wrap(codes.Internal, fmt.Sprintf("endpoint: setting mode %#o on the socket", opts.SocketMode), err))
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fail(codederr.Errorf(codes.AlreadyExists, err,
				"endpoint: %s appeared while the socket was being created; not replacing it", path))
		}
		return fail(wrap(codes.FailedPrecondition, "endpoint: linking the socket into place at "+path, err))
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fail(wrap(codes.Internal, "endpoint: stat "+path, err))
	}
	return &unixListener{UnixListener: ul, path: path, fi: fi}, nil
}

// removeStale removes path if it is a socket nobody accepts on. It returns
// nil if path does not exist (any more).
func removeStale(ctx context.Context, path string, timeout time.Duration) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return wrap(codes.FailedPrecondition, "endpoint: stat "+path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return codederr.Errorf(codes.FailedPrecondition, nil,
			"endpoint: %s exists and is not a socket (%s); refusing to remove it", path, describe(fi.Mode()))
	}
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "unix", path)
	if err == nil {
		c.Close()
		return codederr.Errorf(codes.AlreadyExists, nil,
			"endpoint: %s is in use by a running server (a dial succeeded); stop it or choose another endpoint", path)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case ctx.Err() != nil:
		return wrap(codes.Canceled, "endpoint: checking "+path, ctx.Err())
	case !errors.Is(err, syscall.ECONNREFUSED):
		return wrap(codes.FailedPrecondition,
			"endpoint: cannot tell whether "+path+" is in use, not removing it", err)
	}
	// Stale. Remove it only if it is still the file we looked at.
	if fi2, err := os.Lstat(path); err != nil || !os.SameFile(fi, fi2) {
		return nil // gone or replaced; the link step decides
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return wrap(codes.FailedPrecondition, "endpoint: removing stale socket "+path, err)
	}
	return nil
}

func describe(m fs.FileMode) string {
	switch t := m.Type(); {
	case t == 0:
		return "a regular file"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return "mode " + m.String()
	}
}

// unixListener removes its socket file on Close while the path still refers
// to the socket it bound.
type unixListener struct {
	*net.UnixListener
	path string
	fi   os.FileInfo
	once sync.Once
}

// Close closes the listener and removes the socket file.
func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		if fi, e := os.Lstat(l.path); e == nil && os.SameFile(l.fi, fi) {
			os.Remove(l.path)
		}
	})
	return err
}
