package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit/k8s/testdriver"
	"github.com/csikit/csikit/mount"
)

func testdriverCommand() *command {
	return &command{
		name:     "testdriver",
		summary:  "print the test-driver file of Kubernetes' storage e2e suite for a driver",
		synopsis: []string{"csikit testdriver [OPTIONS] ENDPOINT"},
		description: `Asks the driver for its name, its plugin, controller, node and group
controller capabilities and its NodeGetInfo, and prints the test-driver
file Kubernetes' external storage e2e suite reads (e2e.test
-storage.testdriver=FILE, ginkgo focus External.Storage), the way
csikit csidriver prints the CSIDriver object:

  - snapshotDataSource from CREATE_DELETE_SNAPSHOT, pvcDataSource from
    CLONE_VOLUME, controllerExpansion and nodeExpansion from
    EXPAND_VOLUME, onlineExpansion from the plugin's VolumeExpansion;
  - topology and TopologyKeys from VOLUME_ACCESSIBILITY_CONSTRAINTS and
    NodeGetInfo's accessible topology; volumeLimits from its
    max_volumes_per_node;
  - capacity from GET_CAPACITY, volumeMountGroup from VOLUME_MOUNT_GROUP;
  - readWriteOncePod from the access modes as Kubernetes sends
    ReadWriteOncePod: SINGLE_NODE_WRITER, or SINGLE_NODE_SINGLE_WRITER
    for a driver advertising SINGLE_NODE_MULTI_WRITER;
  - the smallest claim size from the filesystem types: the smallest
    file system the installed mkfs makes of each (xfs: about 300Mi), so
    the suite's restore and clone claims are not refused as smaller
    than their source.

What the CSI API does not show comes from the options: raw block
support, the access modes served (RWX, capReadOnlyMany,
readWriteOncePod), the StorageClass and VolumeSnapshotClass files, the
filesystem types, and whether volumes live on one node.`,
		exitStatus: `0      the file was printed.
1      the driver could not be asked, or the options contradict its
       capabilities.
2      bad options.`,
		examples: `csikit testdriver /var/lib/kubelet/plugins/hostpath.csikit.dev/csi.sock \
  --storage-class sc.yaml --block --single-node-volume --fs-types ,ext4,xfs > test-driver.yaml
e2e.test -ginkgo.focus='External.Storage' -storage.testdriver=test-driver.yaml`,
		flags: func(fs *flag.FlagSet) func(*env, []string) int {
			var o testdriver.Options
			fs.StringVar(&o.StorageClassFile, "storage-class", "", "`FILE` with the StorageClass to provision with (default: one the suite makes, no parameters)")
			fs.StringVar(&o.SnapshotClassFile, "snapshot-class", "", "`FILE` with the VolumeSnapshotClass (default: one the suite makes)")
			fs.BoolVar(&o.Block, "block", false, "the driver serves raw block volumes")
			fsTypes := fs.String("fs-types", "", "comma-separated filesystem `TYPES` the suite may ask for; an empty item is the class's default (default: only the default)")
			fs.StringVar(&o.FSType, "fs-type", "", "the `TYPE` kubelet is told a default volume has (the class's csi.storage.k8s.io/fstype)")
			fs.StringVar(&o.FSGroupPolicy, "fs-group-policy", "", "the CSIDriver's fsGroupPolicy `POLICY` (default ReadWriteOnceWithFSType)")
			modes := fs.String("access-modes", "", "comma-separated CSI access `MODES` the driver serves (default SINGLE_NODE_WRITER)")
			mountOpts := fs.String("mount-options", "", "comma-separated mount `OPTIONS` the volumes take (the suite's mount-options case)")
			fs.BoolVar(&o.SingleNodeVolume, "single-node-volume", false, "a volume is usable on one node only")
			fs.BoolVar(&o.MultiplePVsSameID, "multiple-pvs-same-id", false, "two PVs with the same volume handle can be used on one node at once")
			fs.BoolVar(&o.NoExec, "noexec", false, "volumes are mounted noexec")
			fs.BoolVar(&o.InlineVolumes, "inline", false, "test a CSI inline ephemeral volume (CSIDriver lifecycle mode Ephemeral)")
			fs.StringVar(&o.SizeMin, "size-min", "", "smallest claim `SIZE` (default: the smallest file system mkfs makes of the filesystem types, at least 1Mi)")
			fs.StringVar(&o.SizeMax, "size-max", "", "largest claim `SIZE`")
			timeouts := mapFlag{}
			fs.Var(timeouts, "suite-timeout", "override the suite's timeout `NAME=DURATION` (repeatable, e.g. PodStart=10m)")
			timeout := fs.Duration("timeout", defaultTimeout, "give up on each call after `DURATION`")
			return func(e *env, args []string) int {
				if len(args) != 1 {
					e.errorf("testdriver: want ENDPOINT (see csikit testdriver --help)")
					return exitUsage
				}
				if *fsTypes != "" {
					o.FSTypes = strings.Split(*fsTypes, ",")
				}
				if *mountOpts != "" {
					o.MountOptions = strings.Split(*mountOpts, ",")
				}
				if *modes != "" {
					for _, m := range strings.Split(*modes, ",") {
						v, ok := csi.VolumeCapability_AccessMode_Mode_value[strings.TrimSpace(m)]
						if !ok {
							e.errorf("testdriver: --access-modes: unknown mode %q (want e.g. SINGLE_NODE_WRITER, MULTI_NODE_MULTI_WRITER)", m)
							return exitUsage
						}
						o.AccessModes = append(o.AccessModes, csi.VolumeCapability_AccessMode_Mode(v))
					}
				}
				if len(timeouts) > 0 {
					o.Timeouts = timeouts
				}
				if o.SizeMin == "" {
					min, err := fsMinSize(e.ctx, append(slices.Clone(o.FSTypes), o.FSType))
					if err != nil {
						e.errorf("testdriver: %s (or give --size-min)", errText(err))
						return exitFail
					}
					if min > 1<<20 {
						o.SizeMin = fmt.Sprintf("%dMi", (min+1<<20-1)>>20)
					}
				}
				conn, err := dial(args[0])
				if err != nil {
					e.errorf("testdriver: %v", err)
					return exitUsage
				}
				defer conn.Close()
				a, err := discover(e.ctx, conn, *timeout)
				if err != nil {
					e.errorf("testdriver: %v", err)
					return exitFail
				}
				if a.services["Node"] {
					ctx, cancel := context.WithTimeout(e.ctx, *timeout)
					info, err := csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
					cancel()
					if err != nil {
						e.errorf("testdriver: Node.NodeGetInfo: %s", errText(err))
						return exitFail
					}
					o.MaxVolumesPerNode = info.GetMaxVolumesPerNode()
					o.TopologyKeys = slices.Sorted(maps.Keys(info.GetAccessibleTopology().GetSegments()))
				}
				d, err := testdriver.FromCapabilities(a.name, testdriver.Capabilities{
					Plugin: a.pluginCaps, Controller: a.ctrlCaps, Node: a.nodeCaps, Group: a.groupCaps,
				}, o)
				if err != nil {
					e.errorf("testdriver: %s", errText(err))
					return exitFail
				}
				fmt.Fprint(e.stdout, string(d.YAML()))
				return exitOK
			}
		},
	}
}

// fsMinSize is the size of the smallest file system mkfs makes of any of
// fsTypes ("" items are skipped; 0 for none), by mount.MinSize.
func fsMinSize(ctx context.Context, fsTypes []string) (int64, error) {
	var min int64
	m := mount.New(mount.Options{})
	for _, t := range fsTypes {
		if t == "" {
			continue
		}
		n, err := m.MinSize(ctx, t)
		if err != nil {
			return 0, fmt.Errorf("the smallest %s file system: %w", t, err)
		}
		min = max(min, n)
	}
	return min, nil
}
