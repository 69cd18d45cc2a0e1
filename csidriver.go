package csikit

import (
	"maps"
	"slices"

	"github.com/csikit/csikit/k8s/csidriver"
	"github.com/csikit/csikit/k8s/testdriver"
)

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

// TestDriver returns the test-driver definition of Kubernetes' external
// storage e2e suite (e2e.test -storage.testdriver) for this server, from
// the capabilities it advertises and its Options: Block from VolumeModes,
// the access modes it serves, MaxVolumesPerNode and the keys of Topology
// replace those fields of opts. opts carries the rest (the StorageClass
// file, the filesystem types, whether volumes are bound to one node, …).
// Print it with its YAML method.
func (s *Server) TestDriver(opts testdriver.Options) (*testdriver.Definition, error) {
	opts.Block = s.opts.VolumeModes&Block != 0
	opts.AccessModes = slices.Clone(s.vcfg.AccessModes)
	opts.MaxVolumesPerNode = s.opts.MaxVolumesPerNode
	opts.TopologyKeys = slices.Sorted(maps.Keys(s.opts.Topology))
	c := s.caps
	return testdriver.FromCapabilities(s.opts.Name, testdriver.Capabilities{
		Plugin: c.Plugin, Controller: c.Controller, Node: c.Node, Group: c.Group,
	}, opts)
}
