package sanity

import (
	"os"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// conflictFlag is the mount flag the conflicting-repeat cases add: every
// Linux filesystem and bind mount takes it, and it changes what the mount
// allows, so a repeat with it is not the same request.
const conflictFlag = "noexec"

// rejectedFlag is a mount flag no kernel filesystem knows: a driver that
// hands it to mount(2) or mount(8) gets an error.
const rejectedFlag = "sanity-no-such-mount-option"

// withMountFlags returns a copy of a mount capability with flags and,
// when fsType is not "", that fs_type.
func withMountFlags(c *csi.VolumeCapability, fsType string, flags ...string) *csi.VolumeCapability {
	c = proto.Clone(c).(*csi.VolumeCapability)
	m := c.GetMount()
	m.MountFlags = append(m.MountFlags, flags...)
	if fsType != "" {
		m.FsType = fsType
	}
	return c
}

// prepare makes vol ready to publish at a fresh case directory:
// controller publish and stage as the driver advertises them, undone when
// the case ends. The target is not published.
func (s *suite) prepare(t *testing.T, vol *csi.Volume) *mounted {
	t.Helper()
	staging, target := s.caseDir(t)
	m := &mounted{vol: vol, cap: s.volCap(sw), target: target}
	if s.hasCtrl(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME) {
		m.pubCtx = s.controllerPublish(t, vol, m.cap, false)
	}
	if s.nodeCaps[ncStage] {
		m.staging = staging
		s.stage(t, m)
	}
	return m
}

// needMount skips cases about mount flags and filesystems in block access.
func (s *suite) needMount(t *testing.T) {
	t.Helper()
	if s.access != MountAccess {
		t.Skip("mount flags and fs_type apply to mount volumes")
	}
}

// notStagedCase: NodePublishVolume of a volume that was never staged, at
// an existing, empty staging directory.
func notStagedCase(t *testing.T, s *suite) {
	s.needNode(t, ncStage)
	s.needCtrl(t, ccCreate)
	v := s.createVolume(t, s.createReq(s.name("unstaged")))
	staging, target := s.caseDir(t)
	m := &mounted{vol: v, cap: s.volCap(sw), staging: staging, target: target}
	if s.hasCtrl(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME) {
		m.pubCtx = s.controllerPublish(t, v, m.cap, false)
	}
	req := s.publishReq(m, false)
	_, err := call(s, s.node.NodePublishVolume, req)
	ruleText := kube("NodePublishVolume", "kubelet retries publish when the staging mount is gone (node reboot, manual unmount); "+
		"an OK then binds the empty staging directory and the pod writes to the node's root disk") +
		"; " + rule("RPC Interactions", "NodeStageVolume MUST be called and return success once per volume per node before any NodePublishVolume MAY be called")
	if err == nil {
		t.Error(describe("NodePublishVolume", req, err, "an error: the volume was never staged at staging_target_path", ruleText))
		s.unpublish(t, m)
		return
	}
	mps, merr := mountsUnder(target)
	if merr != nil {
		t.Fatalf("reading mounts: %v", merr)
	}
	expect(t, len(mps) == 0, "NodePublishVolume", req, ruleText, "%s mounted after the failed publish, want nothing", strings.Join(mps, ", "))
}

// conflictCases: repeats of NodeStageVolume and NodePublishVolume that
// differ from the first call, and a second volume on a staging path in
// use.
func stageConflictCases(t *testing.T, s *suite) {
	s.run(t, "conflicting_mount_flags", func(t *testing.T) {
		s.needMount(t)
		s.needCtrl(t, ccCreate)
		m := s.prepare(t, s.createVolume(t, s.createReq(s.name("stflags"))))
		s.needStagedSomething(t, m)
		req := s.stageReq(m)
		req.VolumeCapability = withMountFlags(m.cap, "", conflictFlag)
		want, why := s.conflictCodes(t, req.VolumeCapability, false)
		_, err := call(s, s.node.NodeStageVolume, req)
		wantCode(t, "NodeStageVolume (repeat with mount flag "+conflictFlag+")", req, err, rule("NodeStageVolume",
			"volume_id already staged at staging_target_path but incompatible with the volume_capability → ALREADY_EXISTS")+why, want...)
	})
	s.run(t, "conflicting_fs_type", func(t *testing.T) {
		s.needMount(t)
		s.needCtrl(t, ccCreate)
		m := s.prepare(t, s.createVolume(t, s.createReq(s.name("stfs"))))
		s.needStagedSomething(t, m)
		mounted, err := fsTypesAt(m.staging)
		if err != nil {
			t.Fatalf("reading mounts: %v", err)
		}
		other := ""
		for _, c := range []string{"xfs", "ext4", "btrfs"} {
			if c != s.cfg.FsType && !contains(mounted, c) {
				other = c
				break
			}
		}
		req := s.stageReq(m)
		req.VolumeCapability = withMountFlags(m.cap, other)
		want, why := s.conflictCodes(t, req.VolumeCapability, false)
		_, err = call(s, s.node.NodeStageVolume, req)
		wantCode(t, "NodeStageVolume (repeat with fs_type "+other+")", req, err, rule("NodeStageVolume",
			"volume_id already staged at staging_target_path but incompatible with the volume_capability → ALREADY_EXISTS")+why, want...)
	})
	s.run(t, "staging_path_in_use", func(t *testing.T) {
		s.needMount(t)
		s.needCtrl(t, ccCreate)
		first := s.prepare(t, s.createVolume(t, s.createReq(s.name("stuse1"))))
		v := s.createVolume(t, s.createReq(s.name("stuse2")))
		second := &mounted{vol: v, cap: s.volCap(sw), staging: first.staging}
		if s.hasCtrl(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME) {
			second.pubCtx = s.controllerPublish(t, v, second.cap, false)
		}
		s.needStagedSomething(t, first)
		before, err := fsTypesAt(first.staging)
		if err != nil {
			t.Fatalf("reading mounts: %v", err)
		}
		req := s.stageReq(second)
		_, err = call(s, s.node.NodeStageVolume, req)
		after, _ := fsTypesAt(first.staging)
		ruleText := kube("NodeStageVolume", "kubelet gives every volume a staging path of its own; "+
			"OK for a second volume at a path holding another claims a staging that did not happen, or stacks a mount that hides the first volume from its pods")
		if err == nil {
			t.Error(describe("NodeStageVolume (another volume at a staging path in use)", req, err, "an error", ruleText))
			s.unstage(t, second)
		}
		expect(t, len(after) <= len(before), "NodeStageVolume (another volume at a staging path in use)", req, ruleText,
			"%d mounts stacked at the staging path after it, %d before; want no new one", len(after), len(before))
	})
	s.run(t, "rejected_mount_flag_leaves_nothing", func(t *testing.T) { s.needMount(t); s.needCtrl(t, ccCreate); failedStageCase(t, s) })
}

// needStagedSomething skips the case when staging m put nothing at its
// staging path (no mount, an empty directory): such a driver applies mount
// flags and fs_type when it publishes, and a second volume at the path
// hides nothing.
func (s *suite) needStagedSomething(t *testing.T, m *mounted) {
	t.Helper()
	if m.staging == "" {
		return
	}
	if mps, _ := mountsUnder(m.staging); len(mps) == 0 && dirEmpty(m.staging) {
		t.Skip("the driver stages nothing at the staging path (it publishes from elsewhere)")
	}
}

// publishConflictCase: NodePublishVolume repeated at the same target with
// another mount flag.
func publishConflictCase(t *testing.T, s *suite) {
	s.needMount(t)
	s.needCtrl(t, ccCreate)
	m := s.mountVolume(t, s.createVolume(t, s.createReq(s.name("pubflags"))), false)
	req := s.publishReq(m, false)
	req.VolumeCapability = withMountFlags(m.cap, "", conflictFlag)
	want, why := s.conflictCodes(t, req.VolumeCapability, true)
	_, err := call(s, s.node.NodePublishVolume, req)
	wantCode(t, "NodePublishVolume (repeat with mount flag "+conflictFlag+")", req, err, rule("NodePublishVolume",
		"volume_id already published at target_path but incompatible with the volume_capability or readonly flag → ALREADY_EXISTS")+why, want...)
}

// conflictCodes returns the codes a conflicting repeat with capability c
// may answer: ALREADY_EXISTS, and INVALID_ARGUMENT too when the driver
// refuses c on a fresh volume as well — a driver that does not serve a
// filesystem or a mount flag at all (a tmpfs-only driver asked for xfs)
// rightly refuses it before looking at what is staged, and the spec's
// INVALID_ARGUMENT for an unsupported capability is as true of the repeat
// as of the first call. why is the note for the failure message.
//
// The probe stages (and, with publish, publishes) a new volume with c at
// fresh paths, undone when the case ends; it is how the harness learns
// what the driver serves without a list in Config.
func (s *suite) conflictCodes(t *testing.T, c *csi.VolumeCapability, publish bool) (want []codes.Code, why string) {
	t.Helper()
	want = []codes.Code{codes.AlreadyExists}
	v := s.createVolume(t, s.createReq(s.name("probe")))
	staging, target := s.caseDir(t)
	m := &mounted{vol: v, cap: c, target: target}
	if s.hasCtrl(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME) {
		m.pubCtx = s.controllerPublish(t, v, s.volCap(sw), false)
	}
	var err error
	if s.nodeCaps[ncStage] {
		m.staging = staging
		_, err = call(s, s.node.NodeStageVolume, s.stageReq(m))
		if err == nil {
			t.Cleanup(func() { s.unstage(t, m) })
		}
	}
	if err == nil && publish {
		_, err = call(s, s.node.NodePublishVolume, s.publishReq(m, false))
		if err == nil {
			s.unpublish(t, m)
		}
	}
	if status.Code(err) != codes.InvalidArgument {
		return want, ""
	}
	return append(want, codes.InvalidArgument), " (or INVALID_ARGUMENT: the driver refuses this capability on a fresh volume too, " + got(err) + ")"
}

// failedStageCase stages with a mount flag the kernel rejects: the call
// must fail and leave nothing behind — no mount, loop device or device
// mapping of the volume — so that DeleteVolume succeeds and a correct
// stage at the same path works.
func failedStageCase(t *testing.T, s *suite) {
	loops, maps := loopDevices(), deviceMappings()
	v := s.createVolume(t, s.createReq(s.name("badflag")))
	id := v.GetVolumeId()
	staging, _ := s.caseDir(t)
	m := &mounted{vol: v, cap: withMountFlags(s.volCap(sw), "", rejectedFlag), staging: staging}
	published := s.hasCtrl(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME)
	if published {
		m.pubCtx = s.controllerPublish(t, v, m.cap, false)
	}
	req := s.stageReq(m)
	_, err := call(s, s.node.NodeStageVolume, req)
	ignored := kube("StorageClass mountOptions", "they reach the driver as mount_flags unvalidated; if one is invalid, the mount fails")
	if err == nil {
		defer s.unstage(t, m)
		if mps, _ := mountsUnder(staging); len(mps) == 0 && dirEmpty(staging) {
			t.Skip("the driver stages nothing at the staging path, so no mount there can reject the flag (it is the publish's business)")
		}
		t.Error(describe("NodeStageVolume", req, nil, "an error: mount flag "+rejectedFlag+" is none the kernel knows, so the driver ignored mount_flags", ignored))
		return
	}
	residue := kube("NodeStageVolume", "a failed stage is retried, and the volume may be deleted instead; "+
		"what the failed call mounted or attached blocks both and leaks")
	if mps, err := mountsUnder(staging); err == nil && len(mps) > 0 {
		t.Errorf("NodeStageVolume: got %s mounted after the failed stage, want nothing\n\trule: %s", strings.Join(mps, ", "), residue)
		for _, mp := range mps {
			_ = detach(mp)
		}
	}
	for dev, file := range loopDevices() {
		if loops[dev] != file && strings.Contains(file, id) {
			t.Errorf("NodeStageVolume: got loop device %s on %s attached after the failed stage, want none\n\trule: %s", dev, file, residue)
		}
	}
	for dev, desc := range deviceMappings() {
		if maps[dev] != desc && strings.Contains(desc, id) {
			t.Errorf("NodeStageVolume: got device mapping %s (%s) after the failed stage, want none\n\trule: %s", dev, desc, residue)
		}
	}
	if published {
		ureq := &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: s.nodeInfo.GetNodeId(), Secrets: s.cfg.Secrets}
		_, err := retry(s, s.ctl.ControllerUnpublishVolume, ureq)
		must(t, "ControllerUnpublishVolume", ureq, err, rule("ControllerUnpublishVolume", "MUST succeed for a published volume"))
	}
	dreq := &csi.DeleteVolumeRequest{VolumeId: id, Secrets: s.cfg.Secrets}
	_, err = retry(s, s.ctl.DeleteVolume, dreq)
	if err != nil {
		t.Error(describe("DeleteVolume (after the failed stage)", dreq, err, "OK", residue))
	}
	for _, l := range orphanLoops(loops) {
		if !strings.Contains(l, id) {
			continue // another volume's or another process's loop device
		}
		t.Errorf("loop device %s left attached to the deleted volume's file after the failed stage\n\trule: %s", l, residue)
		if err := detachLoop(strings.Fields(l)[0]); err != nil {
			t.Errorf("detaching leaked loop device %s: %v", l, err)
		}
	}
	// The staging path is usable: a correct stage of another volume there
	// works (and is undone when the case ends).
	again := &mounted{vol: s.createVolume(t, s.createReq(s.name("afterbad"))), cap: s.volCap(sw), staging: staging}
	if published {
		again.pubCtx = s.controllerPublish(t, again.vol, again.cap, false)
	}
	s.stage(t, again)
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// dirEmpty reports whether dir is an empty directory (false when it
// cannot be read).
func dirEmpty(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && err != nil
}
