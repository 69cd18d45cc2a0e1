module github.com/csikit/csikit/examples/rbd

go 1.26.0

replace github.com/csikit/csikit => ../..

require (
	github.com/ceph/go-ceph v0.40.0
	github.com/csikit/csikit v0.0.0-00010101000000-000000000000
	google.golang.org/grpc v1.85.0
)

require (
	github.com/container-storage-interface/spec v1.14.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
