package csikit

import "github.com/csikit/csikit/k8s/csidriver"

// CSIDriver returns the Kubernetes CSIDriver object (storage.k8s.io/v1)
// for this server, derived from the same capabilities it advertises:
// attachRequired from PUBLISH_UNPUBLISH_VOLUME, storageCapacity from
// GET_CAPACITY, fsGroupPolicy from VOLUME_MOUNT_GROUP. opts carries what no
// capability shows (pod info on mount, lifecycle modes, token requests, …).
// Print it with its YAML method, so deploy manifests are generated rather
// than kept by hand.
//
// Capabilities come from the driver's method set and Options alone, so a
// server built on a nil pointer of the driver's type describes the same
// CSIDriver without opening any state (NewServer calls no driver method):
//
//	srv, err := csikit.NewServer((*mydriver.Driver)(nil), opts)
//	obj, err := srv.CSIDriver(csidriver.Options{})
func (s *Server) CSIDriver(opts csidriver.Options) (*csidriver.Object, error) {
	return csidriver.FromCapabilities(s.opts.Name, s.caps.Controller, s.caps.Node, opts)
}
