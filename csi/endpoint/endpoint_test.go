package endpoint_test

import (
	"testing"

	"github.com/csikit/csikit/csi/endpoint"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		ep, network, address string
	}{
		{"unix:///csi/csi.sock", "unix", "/csi/csi.sock"},
		{"unix:///csi//x/../csi.sock", "unix", "/csi/csi.sock"},
		{"/var/lib/kubelet/plugins/x/csi.sock", "unix", "/var/lib/kubelet/plugins/x/csi.sock"},
		{"tcp://127.0.0.1:10000", "tcp", "127.0.0.1:10000"},
		{"tcp://:0", "tcp", ":0"},
		{"tcp://[::1]:65535", "tcp", "[::1]:65535"},
		{"tcp://csi.example:9000", "tcp", "csi.example:9000"},
	} {
		network, address, err := endpoint.Parse(tc.ep)
		if err != nil || network != tc.network || address != tc.address {
			t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q, nil", tc.ep, network, address, err, tc.network, tc.address)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, ep := range []string{
		"",
		"csi.sock",
		"./csi.sock",
		"unix://csi.sock",
		"unix://./csi.sock",
		"unix:/csi/csi.sock",
		"unix://",
		"http://localhost:80",
		"npipe:////./pipe/csi",
		"tcp://localhost",
		"tcp://localhost:http",
		"tcp://localhost:65536",
		"tcp://localhost:-1",
		"tcp://localhost:80/path",
		"tcp://user@localhost:80",
		"tcp://",
		"/csi/\x00.sock",
		"UNIX:///csi.sock",
	} {
		n, a, err := endpoint.Parse(ep)
		if err == nil {
			t.Errorf("Parse(%q) = %q, %q, nil; want an error", ep, n, a)
			continue
		}
		if got := status.Code(err); got != codes.InvalidArgument {
			t.Errorf("Parse(%q) code: got %v, want InvalidArgument (%v)", ep, got, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"unix:///a", "/a/b", "tcp://h:1", "", "x://y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ep string) {
		network, address, err := endpoint.Parse(ep)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("Parse(%q) code: got %v, want InvalidArgument", ep, status.Code(err))
			}
			return
		}
		switch network {
		case endpoint.Unix:
			if address == "" || address[0] != '/' {
				t.Fatalf("Parse(%q) unix address %q: want absolute", ep, address)
			}
		case endpoint.TCP:
		default:
			t.Fatalf("Parse(%q) network: got %q, want unix or tcp", ep, network)
		}
	})
}
