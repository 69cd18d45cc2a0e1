package registration

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/csi/validation"
)

// DefaultDir is kubelet's plugin registration directory with the default
// --root-dir.
const DefaultDir = "/var/lib/kubelet/plugins_registry"

// DefaultSocketMode is the permission of the registration socket: kubelet
// runs as root, nobody else needs to call it.
const DefaultSocketMode os.FileMode = 0o600

// maxSocketPath is the longest path a Linux sockaddr_un holds (108 bytes
// including the terminating NUL).
const maxSocketPath = 107

// Options configure a Registrar.
type Options struct {
	// DriverName is the CSI driver name, as GetPluginInfo returns it.
	// Required; at most 63 characters, alphanumeric at both ends, with '-',
	// '.' and alphanumerics between.
	DriverName string

	// Endpoint is the driver's CSI socket as kubelet sees it: a path on the
	// host, e.g. /var/lib/kubelet/plugins/<driver-name>/csi.sock, which may
	// differ from the path inside the driver's container. A "unix://" prefix
	// is accepted and dropped (kubelet wants a bare path). Required, absolute.
	Endpoint string

	// Dir is kubelet's plugin registration directory as the driver sees it.
	// Default DefaultDir. It must exist: kubelet creates it.
	Dir string

	// SocketPath overrides the registration socket's path; default
	// Dir/<DriverName>-reg.sock.
	SocketPath string

	// SupportedVersions are the CSI versions reported to kubelet; default
	// ["1.0.0"], which every kubelet since 1.13 accepts.
	SupportedVersions []string

	// SocketMode is the registration socket's permission; default
	// DefaultSocketMode.
	SocketMode os.FileMode

	// Logger receives registration events; nil discards them.
	Logger *slog.Logger
}

// withDefaults validates o and returns a copy with the defaults filled in.
func (o Options) withDefaults() (Options, error) {
	if !validation.ValidPluginName(o.DriverName) {
		return o, status.Errorf(codes.InvalidArgument,
			"registration: DriverName %q: want %s", o.DriverName, validation.PluginNameRule)
	}
	o.Endpoint = strings.TrimPrefix(o.Endpoint, "unix://")
	if !filepath.IsAbs(o.Endpoint) {
		return o, status.Errorf(codes.InvalidArgument,
			"registration: Endpoint %q: want the absolute host path of the CSI socket (kubelet dials it as a unix socket)", o.Endpoint)
	}
	if o.Dir == "" {
		o.Dir = DefaultDir
	}
	if o.SocketPath == "" {
		o.SocketPath = filepath.Join(o.Dir, o.DriverName+"-reg.sock")
	}
	if len(o.SocketPath) > maxSocketPath {
		return o, status.Errorf(codes.InvalidArgument,
			"registration: socket path %q: got %d bytes, want at most %d (unix socket limit)", o.SocketPath, len(o.SocketPath), maxSocketPath)
	}
	if len(o.SupportedVersions) == 0 {
		o.SupportedVersions = []string{"1.0.0"}
	} else {
		o.SupportedVersions = append([]string(nil), o.SupportedVersions...)
	}
	if o.SocketMode == 0 {
		o.SocketMode = DefaultSocketMode
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}
