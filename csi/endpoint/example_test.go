package endpoint_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/endpoint"
	"google.golang.org/grpc"
)

func ExampleParse() {
	for _, ep := range []string{"unix:///csi/csi.sock", "/csi/csi.sock", "tcp://127.0.0.1:10000", "csi.sock"} {
		network, address, err := endpoint.Parse(ep)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(network, address)
	}
	// Output:
	// unix /csi/csi.sock
	// unix /csi/csi.sock
	// tcp 127.0.0.1:10000
	// rpc error: code = InvalidArgument desc = endpoint "csi.sock": not an absolute path or URL, want unix:///abs/path, /abs/path or tcp://host:port
}

func ExampleListen() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "plugins", "csi.sock")

	l, err := endpoint.Listen(context.Background(), "unix://"+sock, endpoint.Options{SocketMode: 0o600})
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, identity{})
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(l) }()

	fi, _ := os.Stat(sock)
	fmt.Println(fi.Mode())

	srv.Stop() // Serve closes l, which removes the socket file
	<-done
	_, err = os.Stat(sock)
	fmt.Println(os.IsNotExist(err))
	// Output:
	// Srw-------
	// true
}
