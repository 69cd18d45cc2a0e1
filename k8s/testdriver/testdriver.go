package testdriver

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Capability is a key of the suite's DriverInfo.Capabilities.
type Capability string

// The suite's capabilities (test/e2e/storage/framework) this package sets.
const (
	Persistence         Capability = "persistence"
	Block               Capability = "block"
	FSGroup             Capability = "fsGroup"
	VolumeMountGroup    Capability = "volumeMountGroup"
	Exec                Capability = "exec"
	SnapshotDataSource  Capability = "snapshotDataSource"
	SnapshotMetadata    Capability = "snapshotMetadata"
	GroupSnapshot       Capability = "groupSnapshot"
	PVCDataSource       Capability = "pvcDataSource"
	MultiPods           Capability = "multipods"
	RWX                 Capability = "RWX"
	ReadOnlyMany        Capability = "capReadOnlyMany"
	ReadWriteOncePod    Capability = "readWriteOncePod"
	MultiplePVsSameID   Capability = "multiplePVsSameID"
	ControllerExpansion Capability = "controllerExpansion"
	NodeExpansion       Capability = "nodeExpansion"
	OnlineExpansion     Capability = "onlineExpansion"
	OfflineExpansion    Capability = "offlineExpansion"
	VolumeLimits        Capability = "volumeLimits"
	SingleNodeVolume    Capability = "singleNodeVolume"
	Topology            Capability = "topology"
	StorageCapacity     Capability = "capacity"
)

// Capabilities is what a driver's CSI server advertises (the answers of
// GetPluginCapabilities, ControllerGetCapabilities, NodeGetCapabilities and
// GroupControllerGetCapabilities; csikit.Server.Capabilities holds them).
type Capabilities struct {
	Plugin     []*csi.PluginCapability
	Controller []*csi.ControllerServiceCapability
	Node       []*csi.NodeServiceCapability
	Group      []*csi.GroupControllerServiceCapability
}

// Options are what no CSI capability shows.
type Options struct {
	// StorageClassFile is the StorageClass manifest the suite provisions
	// with (StorageClass.FromFile; the suite gives it a name of its own).
	// Empty: the suite's FromName (a class named after the driver, made by
	// the suite with no parameters).
	StorageClassFile string
	// SnapshotClassFile is the VolumeSnapshotClass manifest
	// (SnapshotClass.FromFile). Empty: FromName, a class the suite makes.
	SnapshotClassFile string
	// Block says the driver serves raw block volumes (csikit.Options'
	// VolumeModes holding Block).
	Block bool
	// FSTypes are the filesystem types the suite may ask for with
	// csi.storage.k8s.io/fstype ("" is the StorageClass's default; default
	// [""]).
	FSTypes []string
	// FSType is the filesystem kubelet is told a default-fs volume has
	// (the class's csi.storage.k8s.io/fstype; "" for none): with the
	// CSIDriver's default fsGroupPolicy ReadWriteOnceWithFSType kubelet
	// applies a pod's fsGroup only to volumes with an fsType.
	FSType string
	// FSGroupPolicy is the CSIDriver's fsGroupPolicy ("" is the API
	// default ReadWriteOnceWithFSType; "File" or "None").
	FSGroupPolicy string
	// AccessModes are the access modes the driver serves (csikit.Options'
	// AccessModes; default SINGLE_NODE_WRITER). ReadWriteOncePod needs
	// SINGLE_NODE_WRITER, or SINGLE_NODE_SINGLE_WRITER from a driver
	// advertising SINGLE_NODE_MULTI_WRITER (what Kubernetes then sends).
	AccessModes []csi.VolumeCapability_AccessMode_Mode
	// MaxVolumesPerNode is NodeGetInfo's max_volumes_per_node (0: none).
	MaxVolumesPerNode int64
	// TopologyKeys are the keys of NodeGetInfo's accessible topology.
	TopologyKeys []string
	// SingleNodeVolume says a volume is usable on one node only (a local
	// volume such as a host path).
	SingleNodeVolume bool
	// MultiplePVsSameID says two PersistentVolumes naming the same volume
	// handle can be used by pods on one node at once (kubelet stages the
	// volume once per PV; the driver's stage and publish must accept it).
	MultiplePVsSameID bool
	// NoExec says volumes are mounted noexec (the suite's exec cases are
	// then left out).
	NoExec bool
	// StorageCapacity says external-provisioner publishes
	// CSIStorageCapacity objects (--enable-capacity; default: whether
	// GET_CAPACITY is advertised). For a StorageClass binding Immediately
	// it publishes them only with --capacity-for-immediate-binding; the
	// suite's capacity case fails without.
	StorageCapacity *bool
	// MountOptions are mount options the driver's volumes take (the
	// suite's SupportedMountOption: its mount-options case puts them in a
	// StorageClass and checks the mount).
	MountOptions []string
	// SizeMin and SizeMax bound the claim sizes the suite asks for
	// (default min 1Mi, no max).
	SizeMin, SizeMax string
	// InlineVolumes, when true, adds one CSI inline ephemeral volume with
	// InlineAttributes (the CSIDriver lists the Ephemeral lifecycle mode).
	InlineVolumes    bool
	InlineAttributes map[string]string
	// Timeouts override the suite's timeouts by name (e.g. "PodStart":
	// "10m").
	Timeouts map[string]string
}

// Definition is the suite's test-driver file (driverDefinition).
type Definition struct {
	Name                 string
	Capabilities         map[Capability]bool
	FSTypes              []string
	MountOptions         []string
	SizeMin, SizeMax     string
	TopologyKeys         []string
	NumAllowedTopologies int
	StorageClassFile     string
	SnapshotClassFile    string
	SnapshotClass        bool
	InlineVolumes        []InlineVolume
	Timeouts             map[string]string
}

// InlineVolume is one CSI inline ephemeral volume the suite tests with.
type InlineVolume struct {
	Attributes map[string]string
	Shared     bool
	ReadOnly   bool
}

// FromCapabilities derives the test-driver definition of driver name from
// its advertised capabilities and opts. It returns InvalidArgument for an
// empty name or options the capabilities contradict.
func FromCapabilities(name string, caps Capabilities, opts Options) (*Definition, error) {
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "testdriver: the driver name is empty")
	}
	hasCtrl := func(t csi.ControllerServiceCapability_RPC_Type) bool {
		return slices.ContainsFunc(caps.Controller, func(c *csi.ControllerServiceCapability) bool { return c.GetRpc().GetType() == t })
	}
	hasNode := func(t csi.NodeServiceCapability_RPC_Type) bool {
		return slices.ContainsFunc(caps.Node, func(c *csi.NodeServiceCapability) bool { return c.GetRpc().GetType() == t })
	}
	hasService := func(t csi.PluginCapability_Service_Type) bool {
		return slices.ContainsFunc(caps.Plugin, func(c *csi.PluginCapability) bool { return c.GetService().GetType() == t })
	}
	expansion := csi.PluginCapability_VolumeExpansion_UNKNOWN
	for _, c := range caps.Plugin {
		if x := c.GetVolumeExpansion(); x != nil {
			expansion = x.GetType()
		}
	}
	modes := opts.AccessModes
	if len(modes) == 0 {
		modes = []csi.VolumeCapability_AccessMode_Mode{csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}
	}
	fsTypes := opts.FSTypes
	if len(fsTypes) == 0 {
		fsTypes = []string{""}
	}
	if len(opts.TopologyKeys) > 0 && !hasService(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS) {
		return nil, status.Error(codes.InvalidArgument, "testdriver: topology keys given, but the driver does not advertise VOLUME_ACCESSIBILITY_CONSTRAINTS")
	}
	capacity := hasCtrl(csi.ControllerServiceCapability_RPC_GET_CAPACITY)
	if opts.StorageCapacity != nil {
		if *opts.StorageCapacity && !capacity {
			return nil, status.Error(codes.InvalidArgument, "testdriver: StorageCapacity set, but the driver does not advertise GET_CAPACITY")
		}
		capacity = *opts.StorageCapacity
	}
	var fsGroup bool
	switch opts.FSGroupPolicy {
	case "File":
		fsGroup = true
	case "", "ReadWriteOnceWithFSType":
		fsGroup = opts.FSType != ""
	case "None":
	default:
		return nil, status.Errorf(codes.InvalidArgument, "testdriver: FSGroupPolicy %q: want ReadWriteOnceWithFSType, File or None", opts.FSGroupPolicy)
	}
	mountGroup := hasNode(csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP)
	expand := hasCtrl(csi.ControllerServiceCapability_RPC_EXPAND_VOLUME)
	nodeExpand := hasNode(csi.NodeServiceCapability_RPC_EXPAND_VOLUME)
	group := slices.ContainsFunc(caps.Group, func(c *csi.GroupControllerServiceCapability) bool {
		return c.GetRpc().GetType() == csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT
	})
	d := &Definition{
		Name: name,
		Capabilities: map[Capability]bool{
			Persistence:         hasCtrl(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME),
			Block:               opts.Block,
			FSGroup:             fsGroup || mountGroup,
			VolumeMountGroup:    mountGroup,
			Exec:                !opts.NoExec,
			SnapshotDataSource:  hasCtrl(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT),
			SnapshotMetadata:    hasService(csi.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE),
			GroupSnapshot:       group,
			PVCDataSource:       hasCtrl(csi.ControllerServiceCapability_RPC_CLONE_VOLUME),
			MultiPods:           true,
			RWX:                 slices.Contains(modes, csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER),
			ReadOnlyMany:        slices.Contains(modes, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY),
			ReadWriteOncePod:    readWriteOncePod(modes, hasCtrl(csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER), hasNode(csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)),
			ControllerExpansion: expand,
			NodeExpansion:       nodeExpand,
			OnlineExpansion:     (expand || nodeExpand) && expansion == csi.PluginCapability_VolumeExpansion_ONLINE,
			OfflineExpansion:    expand || nodeExpand,
			VolumeLimits:        opts.MaxVolumesPerNode > 0,
			SingleNodeVolume:    opts.SingleNodeVolume,
			MultiplePVsSameID:   opts.MultiplePVsSameID,
			Topology:            hasService(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
			StorageCapacity:     capacity,
		},
		FSTypes:           fsTypes,
		MountOptions:      opts.MountOptions,
		SizeMin:           opts.SizeMin,
		SizeMax:           opts.SizeMax,
		TopologyKeys:      opts.TopologyKeys,
		StorageClassFile:  opts.StorageClassFile,
		SnapshotClassFile: opts.SnapshotClassFile,
		SnapshotClass:     hasCtrl(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT),
		Timeouts:          opts.Timeouts,
	}
	if d.SizeMin == "" {
		d.SizeMin = "1Mi"
	}
	if len(d.TopologyKeys) > 0 {
		d.NumAllowedTopologies = 1
	}
	if opts.InlineVolumes {
		d.InlineVolumes = []InlineVolume{{Attributes: opts.InlineAttributes}}
	}
	return d, nil
}

// readWriteOncePod reports whether a claim with access mode
// ReadWriteOncePod reaches a driver serving modes: external-provisioner
// and external-attacher (ctrlMultiWriter: the controller advertises
// SINGLE_NODE_MULTI_WRITER) and kubelet (nodeMultiWriter, likewise on the
// node) pass it as SINGLE_NODE_SINGLE_WRITER to a driver with that
// capability and as SINGLE_NODE_WRITER to one without (csi-lib-utils'
// accessmodes), the scheduler and kubelet keeping the volume to one pod.
func readWriteOncePod(modes []csi.VolumeCapability_AccessMode_Mode, ctrlMultiWriter, nodeMultiWriter bool) bool {
	want := func(multiWriter bool) csi.VolumeCapability_AccessMode_Mode {
		if multiWriter {
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		}
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	}
	return slices.Contains(modes, want(ctrlMultiWriter)) && slices.Contains(modes, want(nodeMultiWriter))
}

// YAML returns the definition as the YAML file e2e.test's
// -storage.testdriver flag reads.
func (d *Definition) YAML() []byte {
	var b bytes.Buffer
	w := func(indent int, format string, args ...any) {
		b.WriteString(strings.Repeat("  ", indent))
		fmt.Fprintf(&b, format, args...)
		b.WriteString("\n")
	}
	if d.StorageClassFile != "" {
		w(0, "StorageClass:")
		w(1, "FromFile: %s", quote(d.StorageClassFile))
	} else {
		w(0, "StorageClass:")
		w(1, "FromName: true")
	}
	if d.SnapshotClass {
		w(0, "SnapshotClass:")
		if d.SnapshotClassFile != "" {
			w(1, "FromFile: %s", quote(d.SnapshotClassFile))
		} else {
			w(1, "FromName: true")
		}
	}
	w(0, "DriverInfo:")
	w(1, "Name: %s", quote(d.Name))
	w(1, "SupportedSizeRange:")
	w(2, "Min: %s", quote(d.SizeMin))
	if d.SizeMax != "" {
		w(2, "Max: %s", quote(d.SizeMax))
	}
	w(1, "SupportedFsType:")
	for _, t := range d.FSTypes {
		w(2, "%s: {}", quote(t))
	}
	if len(d.MountOptions) > 0 {
		w(1, "SupportedMountOption:")
		for _, o := range d.MountOptions {
			w(2, "%s: {}", quote(o))
		}
	}
	if len(d.TopologyKeys) > 0 {
		w(1, "TopologyKeys: [%s]", strings.Join(quoteAll(d.TopologyKeys), ", "))
		w(1, "NumAllowedTopologies: %d", d.NumAllowedTopologies)
	}
	w(1, "Capabilities:")
	for _, c := range slices.Sorted(maps.Keys(d.Capabilities)) {
		w(2, "%s: %t", c, d.Capabilities[c])
	}
	if len(d.InlineVolumes) > 0 {
		w(0, "InlineVolumes:")
		for _, v := range d.InlineVolumes {
			w(1, "- Shared: %t", v.Shared)
			w(2, "ReadOnly: %t", v.ReadOnly)
			if len(v.Attributes) > 0 {
				w(2, "Attributes:")
				for _, k := range slices.Sorted(maps.Keys(v.Attributes)) {
					w(3, "%s: %s", quote(k), quote(v.Attributes[k]))
				}
			}
		}
	}
	if len(d.Timeouts) > 0 {
		w(0, "Timeouts:")
		for _, k := range slices.Sorted(maps.Keys(d.Timeouts)) {
			w(1, "%s: %s", quote(k), quote(d.Timeouts[k]))
		}
	}
	return b.Bytes()
}

// quote renders s as a YAML double-quoted (JSON) string.
func quote(s string) string { return strconv.Quote(s) }

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = quote(v)
	}
	return out
}
