// Package endpoint parses CSI endpoint strings and opens listeners on them.
//
// A CSI endpoint is one of:
//
//	unix:///abs/path/csi.sock   a unix socket at an absolute path
//	/abs/path/csi.sock          the same, without the scheme
//	tcp://host:port             a TCP address (host may be empty, port may be 0)
//
// Anything else (relative paths, unix:// with a relative path, other schemes,
// the empty string) is rejected by Parse with codes.InvalidArgument.
//
// Invariants of Listen for unix sockets:
//
//   - The parent directory is created (with Options.DirMode) if missing;
//     existing directories are never chmod-ed.
//   - A stale socket (a socket file nobody accepts on) is removed. A live
//     socket (a dial succeeds) is never removed: Listen fails with
//     codes.AlreadyExists naming the path. A path whose liveness cannot be
//     determined, or that is not a socket, is never removed either.
//   - The socket has Options.SocketMode (default 0660) before any client can
//     reach it: it is bound inside a private 0700 directory, chmod-ed there,
//     and then hard-linked into place, which also fails rather than replacing
//     anything that appeared at the path meanwhile. The process umask is
//     never touched.
//   - Closing the returned listener removes the socket file, but only while
//     the path still refers to the socket this listener bound.
//
// Errors carry gRPC codes (status.Code works on them) and wrap the underlying
// error where there is one, so errors.Is(err, fs.ErrPermission) works.
package endpoint
