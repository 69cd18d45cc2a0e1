package sanity

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// suite is the state of one Run, shared by its cases. The access field
// differs between the copies handed to the mount and block subtrees.
type suite struct {
	cfg    Config
	in     *instance
	id     csi.IdentityClient
	ctl    csi.ControllerClient
	node   csi.NodeClient
	grp    csi.GroupControllerClient
	base   string
	runID  string
	seq    *atomic.Int64
	access AccessType // MountAccess or BlockAccess in typed areas
	root   string     // name of the Run test, to name cases relative to it
	vols   *volumeLog // volumes each case created, by test name
	tally  *tally     // cases by outcome, shared by the copies
	leaks  *leakCheck // nil without Config.BackendObjects

	plugin    map[csi.PluginCapability_Service_Type]bool
	expansion csi.PluginCapability_VolumeExpansion_Type
	ctrlCaps  map[csi.ControllerServiceCapability_RPC_Type]bool
	nodeCaps  map[csi.NodeServiceCapability_RPC_Type]bool
	grpCaps   map[csi.GroupControllerServiceCapability_RPC_Type]bool
	hasNode   bool
	nodeInfo  *csi.NodeGetInfoResponse
}

// volumeLog records the volumes each case created, so that checks of
// system-wide state (loop devices) look only at what concerns them:
// other processes on the machine attach loop devices of their own.
type volumeLog struct {
	mu   sync.Mutex
	byTB map[string][]string
}

func (l *volumeLog) add(t testing.TB, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byTB == nil {
		l.byTB = map[string][]string{}
	}
	l.byTB[t.Name()] = append(l.byTB[t.Name()], id)
}

// concerns reports whether text (a loop device's backing file) names a
// volume the test created.
func (l *volumeLog) concerns(t testing.TB, text string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range l.byTB[t.Name()] {
		if id != "" && strings.Contains(text, id) {
			return true
		}
	}
	return false
}

// tally counts the cases of one Run by outcome. A case is a subtest run
// through suite.run that runs none of its own (groups are not counted).
type tally struct {
	mu                      sync.Mutex
	groups                  map[*testing.T]bool
	passed, failed, skipped int
}

// parent records that t runs cases of its own.
func (c *tally) parent(t *testing.T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups == nil {
		c.groups = map[*testing.T]bool{}
	}
	c.groups[t] = true
}

// done counts t once it and its cleanups have finished. A group counts
// as a failed case when a check of its own (leaked backend objects)
// failed it.
func (c *tally) done(t *testing.T, ownFailure bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.groups[t]:
		delete(c.groups, t)
		if ownFailure {
			c.failed++
		}
	case t.Failed():
		c.failed++
	case t.Skipped():
		c.skipped++
	default:
		c.passed++
	}
}

// String is the tally line Run logs.
func (c *tally) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%d passed, %d failed, %d skipped", c.passed, c.failed, c.skipped)
}

// run runs a case or group as a subtest, unless Config.Skip names it.
func (s *suite) run(t *testing.T, name string, f func(*testing.T)) bool {
	t.Helper()
	s.tally.parent(t)
	rel := strings.TrimPrefix(t.Name()+"/"+name, s.root+"/")
	leaks := s.leaks
	for pattern, reason := range s.cfg.Skip {
		if rel == pattern || (strings.HasSuffix(pattern, "/") && strings.HasPrefix(rel+"/", pattern)) {
			f = func(t *testing.T) { t.Skip("Config.Skip: " + reason) }
			leaks = nil
			break
		}
	}
	return t.Run(name, func(t *testing.T) {
		var before map[string]bool
		var listErr error
		if leaks != nil {
			before, listErr = leaks.snapshot()
		}
		// Registered first, so it runs after the case's own cleanups
		// (which may still fail it, and delete what it created).
		t.Cleanup(func() {
			own := false
			if leaks != nil {
				own = leaks.caseLeaks(t, before, listErr)
			}
			s.tally.done(t, own)
		})
		f(t)
	})
}

// discover reads what the driver advertises.
func (s *suite) discover(t *testing.T) {
	t.Helper()
	s.plugin = map[csi.PluginCapability_Service_Type]bool{}
	s.ctrlCaps = map[csi.ControllerServiceCapability_RPC_Type]bool{}
	s.nodeCaps = map[csi.NodeServiceCapability_RPC_Type]bool{}
	s.grpCaps = map[csi.GroupControllerServiceCapability_RPC_Type]bool{}
	preq := &csi.GetPluginCapabilitiesRequest{}
	pc, err := call(s, s.id.GetPluginCapabilities, preq)
	must(t, "GetPluginCapabilities", preq, err, rule("GetPluginCapabilities", "every plugin MUST implement the Identity service"))
	for _, c := range pc.GetCapabilities() {
		if sv := c.GetService(); sv != nil {
			s.plugin[sv.GetType()] = true
		}
		if ve := c.GetVolumeExpansion(); ve != nil {
			s.expansion = ve.GetType()
		}
	}
	if s.plugin[csi.PluginCapability_Service_CONTROLLER_SERVICE] {
		req := &csi.ControllerGetCapabilitiesRequest{}
		cc, err := call(s, s.ctl.ControllerGetCapabilities, req)
		must(t, "ControllerGetCapabilities", req, err, rule("ControllerGetCapabilities", "a plugin advertising CONTROLLER_SERVICE MUST answer it"))
		for _, c := range cc.GetCapabilities() {
			s.ctrlCaps[c.GetRpc().GetType()] = true
		}
	}
	if s.plugin[csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE] {
		req := &csi.GroupControllerGetCapabilitiesRequest{}
		gc, err := call(s, s.grp.GroupControllerGetCapabilities, req)
		must(t, "GroupControllerGetCapabilities", req, err, rule("GroupControllerGetCapabilities", "a plugin advertising GROUP_CONTROLLER_SERVICE MUST answer it"))
		for _, c := range gc.GetCapabilities() {
			s.grpCaps[c.GetRpc().GetType()] = true
		}
	}
	nreq := &csi.NodeGetCapabilitiesRequest{}
	nc, err := call(s, s.node.NodeGetCapabilities, nreq)
	switch status.Code(err) {
	case codes.OK:
		s.hasNode = true
		for _, c := range nc.GetCapabilities() {
			s.nodeCaps[c.GetRpc().GetType()] = true
		}
		ireq := &csi.NodeGetInfoRequest{}
		s.nodeInfo, err = call(s, s.node.NodeGetInfo, ireq)
		must(t, "NodeGetInfo", ireq, err, rule("NodeGetInfo", "every node plugin MUST implement it"))
	case codes.Unimplemented:
	default:
		must(t, "NodeGetCapabilities", nreq, err, rule("NodeGetCapabilities", "MUST succeed or, for a controller-only plugin, be Unimplemented"))
	}
}

// with returns a copy of s for one access type.
func (s *suite) with(a AccessType) *suite {
	c := *s
	c.access = a
	return &c
}

// hasCtrl reports whether the controller capability is advertised.
func (s *suite) hasCtrl(c csi.ControllerServiceCapability_RPC_Type) bool { return s.ctrlCaps[c] }

// needCtrl skips the case unless the driver advertises every capability.
func (s *suite) needCtrl(t testing.TB, caps ...csi.ControllerServiceCapability_RPC_Type) {
	t.Helper()
	if !s.plugin[csi.PluginCapability_Service_CONTROLLER_SERVICE] {
		t.Skip("driver does not advertise CONTROLLER_SERVICE")
	}
	for _, c := range caps {
		if !s.ctrlCaps[c] {
			t.Skipf("driver does not advertise controller capability %s", c)
		}
	}
}

// needNode skips the case unless the driver serves the node service and
// advertises every node capability.
func (s *suite) needNode(t testing.TB, caps ...csi.NodeServiceCapability_RPC_Type) {
	t.Helper()
	if !s.hasNode {
		t.Skip("driver has no node service (NodeGetCapabilities is Unimplemented)")
	}
	for _, c := range caps {
		if !s.nodeCaps[c] {
			t.Skipf("driver does not advertise node capability %s", c)
		}
	}
}

// name returns a unique volume or snapshot name.
func (s *suite) name(what string) string {
	return fmt.Sprintf("sanity-%s-%s-%d", s.runID, what, s.seq.Add(1))
}

// longName returns a unique name of exactly n bytes.
func (s *suite) longName(n int) string {
	b := s.name("max")
	if len(b) < n {
		b += strings.Repeat("x", n-len(b))
	}
	return b[:n]
}

// missingVolumeID is a well-formed ID no driver has issued.
func (s *suite) missingVolumeID() string { return "sanity-missing-volume-" + s.runID }

// volCap is a capability of the current access type.
func (s *suite) volCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return capOf(s.access, s.cfg.FsType, mode)
}

func capOf(a AccessType, fsType string, mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
	if a == BlockAccess {
		c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType}}
	}
	return c
}

// sw is the access mode the lifecycle cases use.
const sw = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER

// createReq is a CreateVolume request with the configured size,
// parameters, secrets and the node's topology.
func (s *suite) createReq(name string) *csi.CreateVolumeRequest {
	r := &csi.CreateVolumeRequest{
		Name:               name,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: s.cfg.VolumeSize},
		VolumeCapabilities: []*csi.VolumeCapability{s.volCap(sw)},
		Parameters:         s.cfg.Parameters,
		Secrets:            s.cfg.Secrets,
	}
	if topo := s.nodeInfo.GetAccessibleTopology(); topo != nil {
		r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{topo}, Preferred: []*csi.Topology{topo}}
	}
	return r
}

// caseDir creates a fresh directory for one case's node paths and
// returns the staging directory (created, as the CO must) and the target
// path (only its parent exists, as the spec says). When the case ends the
// directory must hold no mount: a leftover mount fails the case, is
// detached, and the directory is removed.
func (s *suite) caseDir(t *testing.T) (staging, target string) {
	t.Helper()
	dir := filepath.Join(s.base, strconv.FormatInt(s.seq.Add(1), 10))
	staging = filepath.Join(dir, "staging")
	if err := s.cfg.NodeFS.MkdirAll(staging); err != nil {
		t.Fatalf("creating staging directory: %v", err)
	}
	var loops map[string]string
	if s.access == BlockAccess {
		loops = loopDevices()
	}
	t.Cleanup(func() {
		if loops != nil {
			for _, l := range orphanLoops(loops) {
				if !s.vols.concerns(t, l) {
					continue // another process's, or a driver whose image paths do not name the volume
				}
				t.Errorf("loop device %s left attached to a deleted file after the case\n\trule: %s", l,
					rule("DeleteVolume/NodeUnstageVolume", "a volume in use is not deleted (FAILED_PRECONDITION), and unstaging releases what staging attached"))
				if err := detachLoop(strings.Fields(l)[0]); err != nil {
					t.Errorf("detaching leaked loop device %s: %v", l, err)
				}
			}
		}
		mps, err := mountsUnder(dir)
		if err != nil {
			t.Errorf("reading mounts: %v", err)
			return
		}
		if len(mps) > 0 {
			t.Errorf("mounts left under %s after the case unpublished and unstaged everything: %s\n\trule: %s", dir, strings.Join(mps, ", "),
				rule("NodeUnpublishVolume/NodeUnstageVolume", "the SP MUST undo what publish/stage did, so the CO can remove the path"))
			for _, mp := range mps {
				if err := detach(mp); err != nil {
					t.Errorf("detaching leaked mount %s: %v", mp, err)
				}
			}
		}
		if left, _ := mountsUnder(dir); len(left) > 0 {
			t.Errorf("not removing %s: mounts still below it: %s", dir, strings.Join(left, ", "))
			return
		}
		if err := s.cfg.NodeFS.RemoveAll(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
	return staging, filepath.Join(dir, "target")
}
