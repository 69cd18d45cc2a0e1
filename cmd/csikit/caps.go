package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// capRPCs maps each capability to the RPCs it says are served. The
// capabilities missing here change how RPCs behave (CLONE_VOLUME,
// VOLUME_CONDITION, …) rather than whether they are served.
var capRPCs = map[string][]string{
	"Controller/" + csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME.String():     {"Controller.CreateVolume", "Controller.DeleteVolume"},
	"Controller/" + csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME.String(): {"Controller.ControllerPublishVolume", "Controller.ControllerUnpublishVolume"},
	"Controller/" + csi.ControllerServiceCapability_RPC_LIST_VOLUMES.String():             {"Controller.ListVolumes"},
	"Controller/" + csi.ControllerServiceCapability_RPC_GET_CAPACITY.String():             {"Controller.GetCapacity"},
	"Controller/" + csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT.String():   {"Controller.CreateSnapshot", "Controller.DeleteSnapshot"},
	"Controller/" + csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS.String():           {"Controller.ListSnapshots"},
	"Controller/" + csi.ControllerServiceCapability_RPC_EXPAND_VOLUME.String():            {"Controller.ControllerExpandVolume"},
	"Controller/" + csi.ControllerServiceCapability_RPC_GET_VOLUME.String():               {"Controller.ControllerGetVolume"},
	"Controller/" + csi.ControllerServiceCapability_RPC_MODIFY_VOLUME.String():            {"Controller.ControllerModifyVolume"},
	"Controller/" + csi.ControllerServiceCapability_RPC_GET_SNAPSHOT.String():             {"Controller.GetSnapshot"},
	"Controller/" + csi.ControllerServiceCapability_RPC_GET_VOLUME_HEALTH.String():        {"Controller.ControllerGetVolumeHealth"},
	"Controller/" + csi.ControllerServiceCapability_RPC_LIST_VOLUME_HEALTH.String():       {"Controller.ControllerListVolumeHealth"},
	"Controller/" + csi.ControllerServiceCapability_RPC_GET_NODE_INFO.String():            {"Controller.ControllerGetNodeInfo"},
	"Node/" + csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH.String():                    {"Node.NodeGetVolumeHealth"},
	"Node/" + csi.NodeServiceCapability_RPC_GET_STORAGE_HEALTH.String():                   {"Node.NodeGetStorageHealth"},
	"Node/" + csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME.String():                 {"Node.NodeStageVolume", "Node.NodeUnstageVolume"},
	"Node/" + csi.NodeServiceCapability_RPC_GET_VOLUME_STATS.String():                     {"Node.NodeGetVolumeStats"},
	"Node/" + csi.NodeServiceCapability_RPC_EXPAND_VOLUME.String():                        {"Node.NodeExpandVolume"},
	"GroupController/" + csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT.String(): {
		"GroupController.CreateVolumeGroupSnapshot", "GroupController.DeleteVolumeGroupSnapshot", "GroupController.GetVolumeGroupSnapshot"},
	"Plugin/" + csi.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE.String(): {"SnapshotMetadata.GetMetadataAllocated", "SnapshotMetadata.GetMetadataDelta"},
}

// requiredRPCs are served by every plugin that serves the service, with
// no capability of their own.
var requiredRPCs = map[string][]string{
	"Controller": {"Controller.ValidateVolumeCapabilities"},
	"Node":       {"Node.NodePublishVolume", "Node.NodeUnpublishVolume", "Node.NodeGetInfo"},
}

// notProbed are RPCs caps does not call: the capability queries it makes
// anyway, and Identity, which every plugin serves.
var notProbed = []string{
	"Controller.ControllerGetCapabilities", "Node.NodeGetCapabilities", "GroupController.GroupControllerGetCapabilities",
	"Identity.GetPluginInfo", "Identity.GetPluginCapabilities", "Identity.Probe",
}

func capsCommand() *command {
	return &command{
		name:     "caps",
		summary:  "list the capabilities a driver advertises and check that it serves them",
		synopsis: []string{"csikit caps [OPTIONS] ENDPOINT"},
		description: `Prints the driver's plugin info (GetPluginInfo), its Probe answer, and
the plugin, controller, node and group controller capabilities it
advertises. Then it calls every CSI RPC with an empty request, which a
driver must refuse (InvalidArgument, NotFound, …) without doing
anything: an RPC that answers Unimplemented is not served, any other
answer means it is. Each answer is checked against the capabilities:

  - an RPC a capability advertises (CREATE_DELETE_VOLUME: CreateVolume
    and DeleteVolume; STAGE_UNSTAGE_VOLUME: NodeStageVolume and
    NodeUnstageVolume; SNAPSHOT_METADATA_SERVICE: the SnapshotMetadata
    service; …) must be served, and so must the RPCs every served
    service has (ValidateVolumeCapabilities; NodePublishVolume,
    NodeUnpublishVolume, NodeGetInfo);
  - an RPC that is served although no capability advertises it is
    flagged: a CO never calls it, so the code behind it is never used,
    or the capability was forgotten.

The controller and group controller services count as served when the
plugin advertises CONTROLLER_SERVICE or GROUP_CONTROLLER_SERVICE; the
node service when NodeGetCapabilities is served.

Every RPC gets an empty request: point caps only at a driver that
validates its requests, as the CSI spec demands (csikit sanity checks
that it does).`,
		exitStatus: `0      every advertised RPC is served and every served RPC advertised.
1      a mismatch (each is printed with MISMATCH), or an Identity RPC or
       capability query failed.
2      bad options.`,
		examples: `csikit caps /run/csi/csi.sock
csikit caps tcp://127.0.0.1:10000 --timeout 5s`,
		flags: func(fs *flag.FlagSet) func(*env, []string) int {
			timeout := fs.Duration("timeout", defaultTimeout, "give up on each call after `DURATION`")
			return func(e *env, args []string) int {
				if len(args) != 1 {
					e.errorf("caps: want ENDPOINT (see csikit caps --help)")
					return exitUsage
				}
				conn, err := dial(args[0])
				if err != nil {
					e.errorf("caps: %v", err)
					return exitUsage
				}
				defer conn.Close()
				return caps(e, conn, *timeout)
			}
		},
	}
}

// advertised is what a driver says about itself.
type advertised struct {
	name, version string
	manifest      map[string]string
	plugin        []string
	caps          map[string]bool // "Service/CAP"
	services      map[string]bool // services the driver serves per its capabilities
	lists         map[string][]string
	pluginCaps    []*csi.PluginCapability
	ctrlCaps      []*csi.ControllerServiceCapability
	nodeCaps      []*csi.NodeServiceCapability
	groupCaps     []*csi.GroupControllerServiceCapability
}

// discover asks the driver for its info and capabilities; failures are
// printed and returned as an error.
func discover(ctx context.Context, conn *grpc.ClientConn, timeout time.Duration) (*advertised, error) {
	ask := func(f func(context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return f(ctx)
	}
	id := csi.NewIdentityClient(conn)
	a := &advertised{caps: map[string]bool{}, services: map[string]bool{}, lists: map[string][]string{}}
	var info *csi.GetPluginInfoResponse
	if err := ask(func(ctx context.Context) (err error) {
		info, err = id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
		return
	}); err != nil {
		return nil, fmt.Errorf("Identity.GetPluginInfo: %s", errText(err))
	}
	a.name, a.version, a.manifest = info.GetName(), info.GetVendorVersion(), info.GetManifest()
	var pc *csi.GetPluginCapabilitiesResponse
	if err := ask(func(ctx context.Context) (err error) {
		pc, err = id.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
		return
	}); err != nil {
		return nil, fmt.Errorf("Identity.GetPluginCapabilities: %s", errText(err))
	}
	a.pluginCaps = pc.GetCapabilities()
	for _, c := range pc.GetCapabilities() {
		if s := c.GetService(); s != nil {
			a.plugin = append(a.plugin, "service "+s.GetType().String())
			a.caps["Plugin/"+s.GetType().String()] = true
			switch s.GetType() {
			case csi.PluginCapability_Service_CONTROLLER_SERVICE:
				a.services["Controller"] = true
			case csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE:
				a.services["GroupController"] = true
			}
		}
		if x := c.GetVolumeExpansion(); x != nil {
			a.plugin = append(a.plugin, "volume expansion "+x.GetType().String())
		}
	}
	if a.services["Controller"] {
		var r *csi.ControllerGetCapabilitiesResponse
		if err := ask(func(ctx context.Context) (err error) {
			r, err = csi.NewControllerClient(conn).ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
			return
		}); err != nil {
			return nil, fmt.Errorf("Controller.ControllerGetCapabilities (CONTROLLER_SERVICE is advertised): %s", errText(err))
		}
		a.ctrlCaps = r.GetCapabilities()
		for _, c := range r.GetCapabilities() {
			a.add("Controller", c.GetRpc().GetType().String())
		}
	}
	var nr *csi.NodeGetCapabilitiesResponse
	err := ask(func(ctx context.Context) (err error) {
		nr, err = csi.NewNodeClient(conn).NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
		return
	})
	switch {
	case status.Code(err) == codes.Unimplemented:
	case err != nil:
		return nil, fmt.Errorf("Node.NodeGetCapabilities: %s", errText(err))
	default:
		a.services["Node"] = true
		a.nodeCaps = nr.GetCapabilities()
		for _, c := range nr.GetCapabilities() {
			a.add("Node", c.GetRpc().GetType().String())
		}
	}
	if a.services["GroupController"] {
		var r *csi.GroupControllerGetCapabilitiesResponse
		if err := ask(func(ctx context.Context) (err error) {
			r, err = csi.NewGroupControllerClient(conn).GroupControllerGetCapabilities(ctx, &csi.GroupControllerGetCapabilitiesRequest{})
			return
		}); err != nil {
			return nil, fmt.Errorf("GroupController.GroupControllerGetCapabilities (GROUP_CONTROLLER_SERVICE is advertised): %s", errText(err))
		}
		a.groupCaps = r.GetCapabilities()
		for _, c := range r.GetCapabilities() {
			a.add("GroupController", c.GetRpc().GetType().String())
		}
	}
	return a, nil
}

func (a *advertised) add(service, c string) {
	a.caps[service+"/"+c] = true
	a.lists[service] = append(a.lists[service], c)
}

// errText renders an RPC error as its code and message.
func errText(err error) string {
	st := status.Convert(err)
	return st.Code().String() + ": " + st.Message()
}

// caps runs the caps command on conn.
func caps(e *env, conn *grpc.ClientConn, timeout time.Duration) int {
	a, err := discover(e.ctx, conn, timeout)
	if err != nil {
		e.errorf("caps: %v", err)
		return exitFail
	}
	w := e.stdout
	fmt.Fprintf(w, "plugin:  %s %s\n", a.name, a.version)
	for _, k := range sortedKeys(a.manifest) {
		fmt.Fprintf(w, "  manifest %s=%s\n", k, a.manifest[k])
	}
	probeCtx, cancel := context.WithTimeout(e.ctx, timeout)
	_, perr := csi.NewIdentityClient(conn).Probe(probeCtx, &csi.ProbeRequest{})
	cancel()
	if perr != nil {
		fmt.Fprintf(w, "probe:   %s\n", errText(perr))
	} else {
		fmt.Fprintf(w, "probe:   OK\n")
	}
	list := func(title string, cs []string) {
		fmt.Fprintf(w, "%s\n", title)
		if len(cs) == 0 {
			fmt.Fprintf(w, "  (none)\n")
		}
		for _, c := range cs {
			fmt.Fprintf(w, "  %s\n", c)
		}
	}
	list("plugin capabilities:", a.plugin)
	if a.services["Controller"] {
		list("controller capabilities:", a.lists["Controller"])
	}
	if a.services["Node"] {
		list("node capabilities:", a.lists["Node"])
	} else {
		fmt.Fprintf(w, "node service: not served (NodeGetCapabilities answers Unimplemented)\n")
	}
	if a.services["GroupController"] {
		list("group controller capabilities:", a.lists["GroupController"])
	}

	// Which RPCs the capabilities say are served, and by what.
	want := map[string]string{}
	for c, rpcs := range capRPCs {
		if a.caps[c] {
			for _, r := range rpcs {
				want[r] = strings.Replace(c, "/", " ", 1)
			}
		}
	}
	for svc, rpcs := range requiredRPCs {
		if a.services[svc] {
			for _, r := range rpcs {
				want[r] = "required of the " + svc + " service"
			}
		}
	}
	fmt.Fprintf(w, "\nRPCs (called with an empty request; Unimplemented means not served):\n")
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	mismatches := 0
	for _, m := range csiMethods() {
		if m.Service() == "Identity" || slices.Contains(notProbed, m.Name()) {
			continue
		}
		served, answer := probe(e.ctx, conn, m, timeout)
		why, advertisedRPC := want[m.Name()]
		verdict := "ok"
		switch {
		case advertisedRPC && !served:
			verdict = "MISMATCH: advertised (" + why + ") but not served"
			mismatches++
		case !advertisedRPC && served:
			verdict = "MISMATCH: served but not advertised" + advertiseHint(m.Name())
			mismatches++
		}
		state := "not served"
		if served {
			state = "served"
		}
		adv := "not advertised"
		if advertisedRPC {
			adv = "advertised: " + why
		}
		fmt.Fprintf(tw, "  %s\t%s (%s)\t%s\t%s\n", m.Name(), state, answer, adv, verdict)
	}
	tw.Flush()
	if mismatches > 0 {
		fmt.Fprintf(w, "\n%d mismatch(es) between the capabilities advertised and the RPCs served\n", mismatches)
		return exitFail
	}
	fmt.Fprintf(w, "\nevery advertised RPC is served, and every served RPC advertised\n")
	return exitOK
}

// advertiseHint names the capability that would advertise rpc.
func advertiseHint(rpc string) string {
	for c, rpcs := range capRPCs {
		if slices.Contains(rpcs, rpc) {
			return " (advertise " + strings.Replace(c, "/", " ", 1) + ")"
		}
	}
	for svc, rpcs := range requiredRPCs {
		if slices.Contains(rpcs, rpc) {
			if svc == "Controller" {
				return " (advertise the plugin capability CONTROLLER_SERVICE)"
			}
			return " (serve NodeGetCapabilities)"
		}
	}
	return ""
}

// probe calls m with an empty request and reports whether it is served
// and the code it answered with.
func probe(ctx context.Context, conn *grpc.ClientConn, m method, timeout time.Duration) (served bool, answer string) {
	req, err := m.NewRequest()
	if err != nil {
		return false, err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = invoke(ctx, conn, m, req, func(proto.Message) error { return errStop })
	if err == errStop {
		err = nil
	}
	c := status.Code(err)
	return c != codes.Unimplemented, c.String()
}

// errStop ends a probe's stream after its first message.
var errStop = fmt.Errorf("stop")

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
