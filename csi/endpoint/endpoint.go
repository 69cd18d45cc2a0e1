package endpoint

import (
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Network names returned by Parse.
const (
	Unix = "unix"
	TCP  = "tcp"
)

const want = "want unix:///abs/path, /abs/path or tcp://host:port"

// Parse splits a CSI endpoint into a network (Unix or TCP) and an address
// that net.Listen and net.Dial accept. Unix socket paths are returned cleaned
// (filepath.Clean). Malformed endpoints yield a codes.InvalidArgument error
// that quotes the endpoint and says what was expected.
func Parse(ep string) (network, address string, err error) {
	if ep == "" {
		return "", "", status.Errorf(codes.InvalidArgument, "endpoint: empty endpoint, %s", want)
	}
	if strings.ContainsRune(ep, 0) {
		return "", "", status.Errorf(codes.InvalidArgument, "endpoint %q: contains a NUL byte, %s", ep, want)
	}
	switch {
	case strings.HasPrefix(ep, "unix://"):
		p := strings.TrimPrefix(ep, "unix://")
		if !strings.HasPrefix(p, "/") {
			return "", "", status.Errorf(codes.InvalidArgument,
				"endpoint %q: unix socket path %q is not absolute, want unix:///abs/path (three slashes)", ep, p)
		}
		return Unix, filepath.Clean(p), nil
	case strings.HasPrefix(ep, "tcp://"):
		hp := strings.TrimPrefix(ep, "tcp://")
		if err := checkHostPort(hp); err != "" {
			return "", "", status.Errorf(codes.InvalidArgument, "endpoint %q: %s, want tcp://host:port", ep, err)
		}
		return TCP, hp, nil
	case strings.HasPrefix(ep, "/"):
		return Unix, filepath.Clean(ep), nil
	}
	if i := strings.Index(ep, "://"); i >= 0 {
		return "", "", status.Errorf(codes.InvalidArgument, "endpoint %q: unsupported scheme %q, %s", ep, ep[:i], want)
	}
	return "", "", status.Errorf(codes.InvalidArgument, "endpoint %q: not an absolute path or URL, %s", ep, want)
}

// checkHostPort returns what is wrong with hp, or "".
func checkHostPort(hp string) string {
	if strings.ContainsAny(hp, "/?#@") {
		return "a path, query, fragment or user is not allowed after host:port"
	}
	_, port, err := net.SplitHostPort(hp)
	if err != nil {
		return "missing or malformed host:port"
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "port " + strconv.Quote(port) + " is not a number in 0..65535"
	}
	return ""
}
