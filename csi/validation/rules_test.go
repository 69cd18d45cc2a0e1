package validation_test

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/validation"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// ruleCase changes one valid fixture and states the exact outcome.
type ruleCase struct {
	name   string
	method string
	cfg    *validation.Config // nil means cfgAll()
	edit   func(proto.Message)
	code   codes.Code // codes.OK: must pass
	msg    string     // exact message when code != OK
}

func runRuleCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := validRequests()[c.method]
			c.edit(req)
			cfg := c.cfg
			if cfg == nil {
				cfg = cfgAll()
			}
			err := validation.Validate(c.method, req, cfg)
			if c.code == codes.OK {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			st := status.Convert(err)
			if err == nil || st.Code() != c.code || st.Message() != c.msg {
				t.Fatalf("got %v %q, want %v %q", st.Code(), st.Message(), c.code, c.msg)
			}
			if strings.Contains(st.Message(), secretValue) {
				t.Fatalf("message %q contains the secret", st.Message())
			}
		})
	}
}

const (
	createVolume = csi.Controller_CreateVolume_FullMethodName
	ctrlPublish  = csi.Controller_ControllerPublishVolume_FullMethodName
	validateCaps = csi.Controller_ValidateVolumeCapabilities_FullMethodName
	ctrlExpand   = csi.Controller_ControllerExpandVolume_FullMethodName
	nodeStage    = csi.Node_NodeStageVolume_FullMethodName
	nodePublish  = csi.Node_NodePublishVolume_FullMethodName
	nodeExpand   = csi.Node_NodeExpandVolume_FullMethodName
)

func cv(m proto.Message) *csi.CreateVolumeRequest      { return m.(*csi.CreateVolumeRequest) }
func np(m proto.Message) *csi.NodePublishVolumeRequest { return m.(*csi.NodePublishVolumeRequest) }
func cp(m proto.Message) *csi.ControllerPublishVolumeRequest {
	return m.(*csi.ControllerPublishVolumeRequest)
}

func TestCapabilities(t *testing.T) {
	mountOnly := &validation.Config{AccessTypes: validation.Mount}
	blockOnly := &validation.Config{AccessTypes: validation.Block}
	rwoOnly := &validation.Config{AccessModes: []csi.VolumeCapability_AccessMode_Mode{snw}}
	bigFlags := make([]string, 65)
	for i := range bigFlags {
		bigFlags[i] = strings.Repeat("o", 64) // 65*64 = 4160 bytes
	}
	runRuleCases(t, []ruleCase{
		{"create/no access type", createVolume, nil, func(m proto.Message) { cv(m).VolumeCapabilities[1].AccessType = nil },
			codes.InvalidArgument, "CreateVolume: volume_capabilities[1].access_type is required: set mount or block"},
		{"create/no access mode", createVolume, nil, func(m proto.Message) { cv(m).VolumeCapabilities[0].AccessMode = nil },
			codes.InvalidArgument, "CreateVolume: volume_capabilities[0].access_mode is required"},
		{"create/UNKNOWN mode", createVolume, nil, func(m proto.Message) { cv(m).VolumeCapabilities[0].AccessMode.Mode = 0 },
			codes.InvalidArgument, "CreateVolume: volume_capabilities[0].access_mode.mode is required (UNKNOWN is not a mode)"},
		{"create/nil capability", createVolume, nil, func(m proto.Message) { cv(m).VolumeCapabilities[1] = nil },
			codes.InvalidArgument, "CreateVolume: volume_capabilities[1] is required"},
		{"create/block on mount-only driver", createVolume, mountOnly, func(m proto.Message) { cv(m).VolumeContentSource = nil },
			codes.InvalidArgument, "CreateVolume: volume_capabilities[1].block access type is not supported by this driver (supported: mount)"},
		{"create/mount on block-only driver", createVolume, blockOnly, func(m proto.Message) { cv(m).VolumeContentSource = nil },
			codes.InvalidArgument, "CreateVolume: volume_capabilities[0].mount access type is not supported by this driver (supported: block)"},
		{"create/mode not supported", createVolume, rwoOnly, func(m proto.Message) { cv(m).VolumeContentSource = nil },
			codes.InvalidArgument, "CreateVolume: volume_capabilities[1].access_mode.mode MULTI_NODE_READER_ONLY is not supported by this driver"},
		{"create/mode from a newer spec", createVolume, nil, func(m proto.Message) { cv(m).VolumeCapabilities[0].AccessMode.Mode = 99 },
			codes.InvalidArgument, "CreateVolume: volume_capabilities[0].access_mode.mode 99 is not supported by this driver"},
		{"create/alpha mode accepted by default", createVolume, nil, func(m proto.Message) {
			cv(m).VolumeCapabilities[0].AccessMode.Mode = csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
		}, codes.OK, ""},
		{"create/mount flags over 4 KiB", createVolume, nil, func(m proto.Message) { cv(m).VolumeCapabilities[0].GetMount().MountFlags = bigFlags },
			codes.InvalidArgument, "CreateVolume: volume_capabilities[0].mount.mount_flags total 4160 bytes, want at most 4096"},
		{"publish/no access type", ctrlPublish, nil, func(m proto.Message) { cp(m).VolumeCapability.AccessType = nil },
			codes.InvalidArgument, "ControllerPublishVolume: volume_capability.access_type is required: set mount or block"},
		{"publish/unsupported mode", ctrlPublish, &validation.Config{AccessModes: []csi.VolumeCapability_AccessMode_Mode{csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER}}, func(proto.Message) {},
			codes.InvalidArgument, "ControllerPublishVolume: volume_capability.access_mode.mode SINGLE_NODE_WRITER is not supported by this driver"},
		{"stage/block on mount-only", nodeStage, mountOnly, func(m proto.Message) { m.(*csi.NodeStageVolumeRequest).VolumeCapability = blockCap(snw) },
			codes.InvalidArgument, "NodeStageVolume: volume_capability.block access type is not supported by this driver (supported: mount)"},
		{"node publish/no access mode", nodePublish, nil, func(m proto.Message) { np(m).VolumeCapability.AccessMode = nil },
			codes.InvalidArgument, "NodePublishVolume: volume_capability.access_mode is required"},
		{"node publish/block accepted", nodePublish, nil, func(m proto.Message) { np(m).VolumeCapability = blockCap(snw) }, codes.OK, ""},
		{"controller expand/optional capability checked when set", ctrlExpand, blockOnly, func(proto.Message) {},
			codes.InvalidArgument, "ControllerExpandVolume: volume_capability.mount access type is not supported by this driver (supported: block)"},
		{"node expand/optional capability may be absent", nodeExpand, blockOnly, func(m proto.Message) {
			m.(*csi.NodeExpandVolumeRequest).VolumeCapability = nil
		}, codes.OK, ""},
		{"get capacity/unsupported mode is not an error", csi.Controller_GetCapacity_FullMethodName, rwoOnly, func(m proto.Message) {
			m.(*csi.GetCapacityRequest).VolumeCapabilities[0] = blockCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)
		}, codes.OK, ""},
		{"get capacity/malformed capability is", csi.Controller_GetCapacity_FullMethodName, nil, func(m proto.Message) {
			m.(*csi.GetCapacityRequest).VolumeCapabilities[0].AccessMode = nil
		}, codes.InvalidArgument, "GetCapacity: volume_capabilities[0].access_mode is required"},
	})
}

func TestValidateVolumeCapabilitiesChecksPresenceOnly(t *testing.T) {
	mountOnlyRWO := &validation.Config{AccessTypes: validation.Mount, AccessModes: []csi.VolumeCapability_AccessMode_Mode{snw}}
	vvc := func(m proto.Message) *csi.ValidateVolumeCapabilitiesRequest {
		return m.(*csi.ValidateVolumeCapabilitiesRequest)
	}
	runRuleCases(t, []ruleCase{
		{"unsupported type and mode pass", validateCaps, mountOnlyRWO, func(m proto.Message) {
			vvc(m).VolumeCapabilities = append(vvc(m).VolumeCapabilities, blockCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER))
		}, codes.OK, ""},
		{"mode from a newer spec passes", validateCaps, nil, func(m proto.Message) { vvc(m).VolumeCapabilities[0].AccessMode.Mode = 42 }, codes.OK, ""},
		{"missing access mode fails", validateCaps, nil, func(m proto.Message) { vvc(m).VolumeCapabilities[0].AccessMode = nil },
			codes.InvalidArgument, "ValidateVolumeCapabilities: volume_capabilities[0].access_mode is required"},
		{"missing access type fails", validateCaps, nil, func(m proto.Message) { vvc(m).VolumeCapabilities[0].AccessType = nil },
			codes.InvalidArgument, "ValidateVolumeCapabilities: volume_capabilities[0].access_type is required: set mount or block"},
	})
}

func TestConfirm(t *testing.T) {
	cfg := &validation.Config{AccessTypes: validation.Mount, AccessModes: []csi.VolumeCapability_AccessMode_Mode{snw}}
	req := &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "v", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)}}
	resp := validation.Confirm(req, cfg)
	if got := resp.GetConfirmed().GetVolumeCapabilities(); len(got) != 1 || !proto.Equal(got[0], mountCap(snw)) {
		t.Fatalf("supported: got confirmed %v, want the requested capability", resp.GetConfirmed())
	}
	if resp.GetMessage() != "" {
		t.Fatalf("supported: got message %q, want none", resp.GetMessage())
	}

	for _, c := range []struct {
		cap  *csi.VolumeCapability
		want string
	}{
		{blockCap(snw), "ValidateVolumeCapabilities: volume_capabilities[1].block access type is not supported by this driver (supported: mount)"},
		{mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER), "ValidateVolumeCapabilities: volume_capabilities[1].access_mode.mode MULTI_NODE_MULTI_WRITER is not supported by this driver"},
		{mountCap(7 + 1), "ValidateVolumeCapabilities: volume_capabilities[1].access_mode.mode 8 is not supported by this driver"},
	} {
		req := &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "v", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw), c.cap}}
		resp := validation.Confirm(req, cfg)
		if resp.GetConfirmed() != nil {
			t.Errorf("unsupported %v: got confirmed %v, want none", c.cap, resp.GetConfirmed())
		}
		if resp.GetMessage() != c.want {
			t.Errorf("unsupported %v: got message %q, want %q", c.cap, resp.GetMessage(), c.want)
		}
	}
	if resp := validation.Confirm(&csi.ValidateVolumeCapabilitiesRequest{}, nil); resp.GetConfirmed() != nil {
		t.Errorf("no capabilities: got confirmed %v, want none", resp.GetConfirmed())
	}
}

func TestContentSource(t *testing.T) {
	snap := func(id string) *csi.VolumeContentSource {
		return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: id}}}
	}
	vol := func(id string) *csi.VolumeContentSource {
		return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: id}}}
	}
	set := func(s *csi.VolumeContentSource) func(proto.Message) {
		return func(m proto.Message) { cv(m).VolumeContentSource = s }
	}
	snapOnly := &validation.Config{ContentSources: validation.ContentSources{Snapshot: true}}
	cloneOnly := &validation.Config{ContentSources: validation.ContentSources{Volume: true}}
	runRuleCases(t, []ruleCase{
		{"snapshot allowed", createVolume, snapOnly, set(snap("snap-1")), codes.OK, ""},
		{"snapshot not declared", createVolume, cloneOnly, set(snap("snap-1")),
			codes.InvalidArgument, "CreateVolume: volume_content_source.snapshot is not supported: this driver cannot create volumes from snapshots"},
		{"snapshot without id", createVolume, snapOnly, set(snap("")),
			codes.InvalidArgument, "CreateVolume: volume_content_source.snapshot.snapshot_id is required"},
		{"clone allowed", createVolume, cloneOnly, set(vol("vol-0")), codes.OK, ""},
		{"clone not declared", createVolume, snapOnly, set(vol("vol-0")),
			codes.InvalidArgument, "CreateVolume: volume_content_source.volume is not supported: this driver cannot clone volumes"},
		{"clone of an over-long id", createVolume, cloneOnly, set(vol(strings.Repeat("v", 129))),
			codes.InvalidArgument, "CreateVolume: volume_content_source.volume.volume_id is 129 bytes, want at most 128"},
		{"zero config allows neither", createVolume, &validation.Config{}, set(snap("s")),
			codes.InvalidArgument, "CreateVolume: volume_content_source.snapshot is not supported: this driver cannot create volumes from snapshots"},
		{"source of no kind", createVolume, nil, set(&csi.VolumeContentSource{}),
			codes.InvalidArgument, "CreateVolume: volume_content_source must name a snapshot or a volume"},
	})
}

func TestCapacityRange(t *testing.T) {
	setCreate := func(req, lim int64) func(proto.Message) {
		return func(m proto.Message) { cv(m).CapacityRange = &csi.CapacityRange{RequiredBytes: req, LimitBytes: lim} }
	}
	setExpand := func(req, lim int64) func(proto.Message) {
		return func(m proto.Message) {
			m.(*csi.ControllerExpandVolumeRequest).CapacityRange = &csi.CapacityRange{RequiredBytes: req, LimitBytes: lim}
		}
	}
	runRuleCases(t, []ruleCase{
		{"exact size", createVolume, nil, setCreate(5, 5), codes.OK, ""},
		{"only a limit", createVolume, nil, setCreate(0, 5), codes.OK, ""},
		{"all-zero range means unspecified", createVolume, nil, setCreate(0, 0), codes.OK, ""},
		{"negative required", createVolume, nil, setCreate(-1, 0),
			codes.InvalidArgument, "CreateVolume: capacity_range.required_bytes must not be negative, got -1"},
		{"negative limit", createVolume, nil, setCreate(1, -2),
			codes.InvalidArgument, "CreateVolume: capacity_range.limit_bytes must not be negative, got -2"},
		{"limit below required", createVolume, nil, setCreate(10, 5),
			codes.InvalidArgument, "CreateVolume: capacity_range.limit_bytes (5) is less than required_bytes (10)"},
		{"expand with empty range", ctrlExpand, nil, setExpand(0, 0),
			codes.InvalidArgument, "ControllerExpandVolume: capacity_range must set required_bytes or limit_bytes"},
		{"expand limit below required", ctrlExpand, nil, setExpand(10, 1),
			codes.InvalidArgument, "ControllerExpandVolume: capacity_range.limit_bytes (1) is less than required_bytes (10)"},
		{"node expand negative", nodeExpand, nil, func(m proto.Message) {
			m.(*csi.NodeExpandVolumeRequest).CapacityRange = &csi.CapacityRange{RequiredBytes: -5}
		}, codes.InvalidArgument, "NodeExpandVolume: capacity_range.required_bytes must not be negative, got -5"},
	})
}

func TestPaths(t *testing.T) {
	setTarget := func(p string) func(proto.Message) { return func(m proto.Message) { np(m).TargetPath = p } }
	stats := func(p string) func(proto.Message) {
		return func(m proto.Message) { m.(*csi.NodeGetVolumeStatsRequest).VolumePath = p }
	}
	long := "/" + strings.Repeat("d/", 2000) + "target" // 4007 bytes: paths have no 128-byte cap
	runRuleCases(t, []ruleCase{
		{"long kubelet path", nodePublish, nil, setTarget(long), codes.OK, ""},
		{"double slash and trailing slash are harmless", nodePublish, nil, setTarget("/var/lib//kubelet/x/"), codes.OK, ""},
		{"dots inside names are fine", nodePublish, nil, setTarget("/var/lib/..hidden/a..b/..."), codes.OK, ""},
		{"relative", nodePublish, nil, setTarget("var/lib/x"),
			codes.InvalidArgument, "NodePublishVolume: target_path must be an absolute path, got a relative one"},
		{"dot-dot element", nodePublish, nil, setTarget("/var/lib/kubelet/../../etc"),
			codes.InvalidArgument, `NodePublishVolume: target_path must not contain ".." elements`},
		{"trailing dot-dot", nodePublish, nil, setTarget("/var/lib/.."),
			codes.InvalidArgument, `NodePublishVolume: target_path must not contain ".." elements`},
		{"NUL byte", nodePublish, nil, setTarget("/var/lib/x\x00y"),
			codes.InvalidArgument, "NodePublishVolume: target_path contains a NUL byte"},
		{"optional staging path must still be absolute", nodePublish, nil, func(m proto.Message) { np(m).StagingTargetPath = "staging" },
			codes.InvalidArgument, "NodePublishVolume: staging_target_path must be an absolute path, got a relative one"},
		{"unstage dot-dot", csi.Node_NodeUnstageVolume_FullMethodName, nil, func(m proto.Message) {
			m.(*csi.NodeUnstageVolumeRequest).StagingTargetPath = "/a/../b"
		}, codes.InvalidArgument, `NodeUnstageVolume: staging_target_path must not contain ".." elements`},
		{"stats on a relative path is NotFound", csi.Node_NodeGetVolumeStats_FullMethodName, nil, stats("some/path"),
			codes.NotFound, "NodeGetVolumeStats: volume_path must be an absolute path, got a relative one"},
		{"stats with dot-dot is invalid", csi.Node_NodeGetVolumeStats_FullMethodName, nil, stats("/a/../../b"),
			codes.InvalidArgument, `NodeGetVolumeStats: volume_path must not contain ".." elements`},
		{"node expand on a relative path is NotFound", nodeExpand, nil, func(m proto.Message) {
			m.(*csi.NodeExpandVolumeRequest).VolumePath = "some/path"
		}, codes.NotFound, "NodeExpandVolume: volume_path must be an absolute path, got a relative one"},
		{"health publish path relative", csi.Node_NodeGetVolumeHealth_FullMethodName, nil, func(m proto.Message) {
			m.(*csi.NodeGetVolumeHealthRequest).VolumePublishPath = "x"
		}, codes.InvalidArgument, "NodeGetVolumeHealth: volume_publish_path must be an absolute path, got a relative one"},
	})
}

func TestIDsAndNames(t *testing.T) {
	name := func(s string) func(proto.Message) { return func(m proto.Message) { cv(m).Name = s } }
	volID := func(s string) func(proto.Message) {
		return func(m proto.Message) { m.(*csi.DeleteVolumeRequest).VolumeId = s }
	}
	nodeID := func(s string) func(proto.Message) { return func(m proto.Message) { cp(m).NodeId = s } }
	del := csi.Controller_DeleteVolume_FullMethodName
	runRuleCases(t, []ruleCase{
		{"name of 128 bytes", createVolume, nil, name(strings.Repeat("n", 128)), codes.OK, ""},
		{"name of 129 bytes", createVolume, nil, name(strings.Repeat("n", 129)),
			codes.InvalidArgument, "CreateVolume: name is 129 bytes, want at most 128"},
		{"name with whitespace and unicode", createVolume, nil, name("pvc\tä\r\n ☃"), codes.OK, ""},
		{"name with BEL", createVolume, nil, name("pvc\x07"),
			codes.InvalidArgument, "CreateVolume: name contains control character U+0007, which the spec bans"},
		{"name with NUL", createVolume, nil, name("a\x00b"),
			codes.InvalidArgument, "CreateVolume: name contains control character U+0000, which the spec bans"},
		{"name with DEL", createVolume, nil, name("a\x7fb"),
			codes.InvalidArgument, "CreateVolume: name contains control character U+007F, which the spec bans"},
		{"name with C1 control", createVolume, nil, name("a\u0085b"),
			codes.InvalidArgument, "CreateVolume: name contains control character U+0085, which the spec bans"},
		{"name not UTF-8", createVolume, nil, name("a\xffb"),
			codes.InvalidArgument, "CreateVolume: name is not valid UTF-8"},
		{"name with a real U+FFFD", createVolume, nil, name("a\uFFFDb"), codes.OK, ""},
		{"custom name limit", createVolume, &validation.Config{MaxNameLength: 8, ContentSources: validation.ContentSources{Snapshot: true}}, name("123456789"),
			codes.InvalidArgument, "CreateVolume: name is 9 bytes, want at most 8"},
		{"volume id of 128 bytes", del, nil, volID(strings.Repeat("v", 128)), codes.OK, ""},
		{"volume id of 129 bytes", del, nil, volID(strings.Repeat("v", 129)),
			codes.InvalidArgument, "DeleteVolume: volume_id is 129 bytes, want at most 128"},
		{"volume id with NUL", del, nil, volID("vol\x00"),
			codes.InvalidArgument, "DeleteVolume: volume_id contains a NUL byte"},
		{"custom id limit", del, &validation.Config{MaxIDLength: 300}, volID(strings.Repeat("v", 300)), codes.OK, ""},
		{"node id of 256 bytes", ctrlPublish, nil, nodeID(strings.Repeat("n", 256)), codes.OK, ""},
		{"node id of 257 bytes", ctrlPublish, nil, nodeID(strings.Repeat("n", 257)),
			codes.InvalidArgument, "ControllerPublishVolume: node_id is 257 bytes, want at most 256"},
		{"group source ids element", csi.GroupController_CreateVolumeGroupSnapshot_FullMethodName, nil, func(m proto.Message) {
			m.(*csi.CreateVolumeGroupSnapshotRequest).SourceVolumeIds = []string{"a", ""}
		}, codes.InvalidArgument, "CreateVolumeGroupSnapshot: source_volume_ids[1] is required"},
		{"group snapshot ids element", csi.GroupController_DeleteVolumeGroupSnapshot_FullMethodName, nil, func(m proto.Message) {
			m.(*csi.DeleteVolumeGroupSnapshotRequest).SnapshotIds = []string{strings.Repeat("s", 200)}
		}, codes.InvalidArgument, "DeleteVolumeGroupSnapshot: snapshot_ids[0] is 200 bytes, want at most 128"},
		{"list snapshots filter id", csi.Controller_ListSnapshots_FullMethodName, nil, func(m proto.Message) {
			m.(*csi.ListSnapshotsRequest).SnapshotId = "x\x00"
		}, codes.InvalidArgument, "ListSnapshots: snapshot_id contains a NUL byte"},
	})
}

func TestOtherRules(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{"list volumes negative max_entries", csi.Controller_ListVolumes_FullMethodName, nil, func(m proto.Message) {
			m.(*csi.ListVolumesRequest).MaxEntries = -1
		}, codes.InvalidArgument, "ListVolumes: max_entries must not be negative, got -1"},
		{"list snapshots negative max_entries", csi.Controller_ListSnapshots_FullMethodName, nil, func(m proto.Message) {
			m.(*csi.ListSnapshotsRequest).MaxEntries = -3
		}, codes.InvalidArgument, "ListSnapshots: max_entries must not be negative, got -3"},
		{"list volume health negative max_entries", csi.Controller_ControllerListVolumeHealth_FullMethodName, nil, func(m proto.Message) {
			m.(*csi.ControllerListVolumeHealthRequest).MaxEntries = -7
		}, codes.InvalidArgument, "ControllerListVolumeHealth: max_entries must not be negative, got -7"},
		{"metadata negative offset", csi.SnapshotMetadata_GetMetadataAllocated_FullMethodName, nil, func(m proto.Message) {
			m.(*csi.GetMetadataAllocatedRequest).StartingOffset = -4096
		}, codes.OutOfRange, "GetMetadataAllocated: starting_offset must not be negative, got -4096"},
		{"unpublish reason with node", csi.Controller_ControllerUnpublishVolume_FullMethodName, nil, func(m proto.Message) {
			m.(*csi.ControllerUnpublishVolumeRequest).Reason = csi.ControllerUnpublishVolumeRequest_NODE_OUT_OF_SERVICE
		}, codes.OK, ""},
		{"unpublish reason without node", csi.Controller_ControllerUnpublishVolume_FullMethodName, nil, func(m proto.Message) {
			r := m.(*csi.ControllerUnpublishVolumeRequest)
			r.NodeId, r.Reason = "", csi.ControllerUnpublishVolumeRequest_NODE_CLEANUP_TIMEOUT
		}, codes.InvalidArgument, "ControllerUnpublishVolume: reason must not be set without node_id"},
		{"topology requirement with no topologies", createVolume, nil, func(m proto.Message) {
			cv(m).AccessibilityRequirements = &csi.TopologyRequirement{}
		}, codes.InvalidArgument, "CreateVolume: accessibility_requirements must list requisite or preferred topologies"},
		{"modify with no mutable parameters (csi-sanity)", csi.Controller_ControllerModifyVolume_FullMethodName, nil, func(m proto.Message) {
			m.(*csi.ControllerModifyVolumeRequest).MutableParameters = nil
		}, codes.OK, ""},
		{"group snapshot get without snapshot ids (csi-sanity)", csi.GroupController_GetVolumeGroupSnapshot_FullMethodName, nil, func(m proto.Message) {
			m.(*csi.GetVolumeGroupSnapshotRequest).SnapshotIds = nil
		}, codes.OK, ""},
	})
}

func TestAccessTypeString(t *testing.T) {
	for at, want := range map[validation.AccessType]string{
		0: "none", validation.Mount: "mount", validation.Block: "block", validation.Mount | validation.Block: "mount|block",
	} {
		if got := at.String(); got != want {
			t.Errorf("AccessType(%d).String(): got %q, want %q", at, got, want)
		}
	}
}

func TestStagingPathNotRequiredForEphemeralVolumes(t *testing.T) {
	cfg := &validation.Config{StageUnstage: true}
	req := &csi.NodePublishVolumeRequest{
		VolumeId:   "csi-0123",
		TargetPath: "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/v/mount",
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
	}
	if err := validation.Validate(csi.Node_NodePublishVolume_FullMethodName, req, cfg); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("persistent volume without staging path: got %v, want FailedPrecondition", err)
	}
	req.VolumeContext = map[string]string{"csi.storage.k8s.io/ephemeral": "true"}
	if err := validation.Validate(csi.Node_NodePublishVolume_FullMethodName, req, cfg); err != nil {
		t.Fatalf("ephemeral inline volume without staging path: got %v, want nil", err)
	}
}
