#!/usr/bin/python3
"""A small CSI driver in Python, for testing csikit against a driver not
written in Go: directory volumes under --state-dir, staged and published
with bind mounts. Identity, Node, and just enough Controller
(CREATE_DELETE_VOLUME) for the harness to have volumes to stage.

Its stubs come from the CSI spec's csi.proto (gen.sh); --stubs names their
directory. CSI_PY_BUG plants a bug `csikit sanity` must catch:
unpublish-notfound makes NodeUnpublishVolume answer NotFound for a target
that is not published, where the spec wants OK (it must be idempotent);
delete-leaks makes DeleteVolume forget a volume but keep its directory.
"""
import argparse, hashlib, json, logging, os, signal, subprocess, sys, threading
from concurrent import futures

import grpc

DEFAULT_SIZE, MAX_SIZE = 1 << 30, 1 << 40
SERVED_MODES = ("SINGLE_NODE_WRITER", "SINGLE_NODE_READER_ONLY")
log = logging.getLogger("csi-py")


def abort(ctx, code, msg):
    ctx.abort(getattr(grpc.StatusCode, code), msg)


def require(ctx, **fields):
    for name, value in fields.items():
        if not value:
            abort(ctx, "INVALID_ARGUMENT", name + " is required")


def mounts():
    """Mount points of this mount namespace (mountinfo's field 5, unescaped)."""
    with open("/proc/self/mountinfo") as f:
        return {l.split()[4].encode().decode("unicode_escape") for l in f}


def run(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


class Driver:
    def __init__(self, name, node_id, state, bug):
        self.name, self.node_id, self.state, self.bug = name, node_id, state, bug
        self.lock = threading.Lock()  # one RPC at a time changes state
        for d in ("volumes", "staged", "published"):
            os.makedirs(os.path.join(state, d), exist_ok=True)

    # Records: one JSON file each, replaced atomically.
    def path(self, kind, key):
        return os.path.join(self.state, kind, hashlib.sha256(key.encode()).hexdigest()[:32] + ".json")

    def load(self, kind, key):
        try:
            with open(self.path(kind, key)) as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def save(self, kind, key, rec):
        p = self.path(kind, key)
        with open(p + ".tmp", "w") as f:
            json.dump(rec, f)
        os.replace(p + ".tmp", p)

    def drop(self, kind, key):
        try:
            os.remove(self.path(kind, key))
        except FileNotFoundError:
            pass

    def data_dir(self, vol_id):
        return os.path.join(self.state, "volumes", vol_id)

    def check_cap(self, ctx, cap):
        """Mount access in a single-node mode, no fs_type, no flags."""
        if not cap.HasField("mount"):
            abort(ctx, "INVALID_ARGUMENT", "only mount access is served (directory volumes)")
        if cap.mount.fs_type or cap.mount.mount_flags:
            abort(ctx, "INVALID_ARGUMENT", "directory volumes take no fs_type and no mount flags")
        mode = pb.VolumeCapability.AccessMode.Mode.Name(cap.access_mode.mode)
        if mode not in SERVED_MODES:
            abort(ctx, "INVALID_ARGUMENT", "access mode %s is not served" % mode)
        return mode

    def volume(self, ctx, vol_id):
        rec = self.load("volumes", vol_id)
        if rec is None:
            abort(ctx, "NOT_FOUND", "volume %s does not exist" % vol_id)
        return rec

    # Identity.
    def GetPluginInfo(self, req, ctx):
        return pb.GetPluginInfoResponse(name=self.name, vendor_version="0.1.0")

    def GetPluginCapabilities(self, req, ctx):
        svc = pb.PluginCapability.Service(type=pb.PluginCapability.Service.CONTROLLER_SERVICE)
        return pb.GetPluginCapabilitiesResponse(capabilities=[pb.PluginCapability(service=svc)])

    def Probe(self, req, ctx):
        return pb.ProbeResponse()

    # Controller.
    def ControllerGetCapabilities(self, req, ctx):
        rpc = pb.ControllerServiceCapability.RPC(type=pb.ControllerServiceCapability.RPC.CREATE_DELETE_VOLUME)
        return pb.ControllerGetCapabilitiesResponse(capabilities=[pb.ControllerServiceCapability(rpc=rpc)])

    def CreateVolume(self, req, ctx):
        require(ctx, name=req.name, volume_capabilities=req.volume_capabilities)
        for cap in req.volume_capabilities:
            self.check_cap(ctx, cap)
        if req.HasField("volume_content_source"):
            abort(ctx, "INVALID_ARGUMENT", "snapshots and clones are not served")
        want, limit = req.capacity_range.required_bytes, req.capacity_range.limit_bytes
        if want < 0 or limit < 0 or (limit and want > limit):
            abort(ctx, "INVALID_ARGUMENT", "capacity_range: want 0 <= required_bytes <= limit_bytes")
        size = want or (min(DEFAULT_SIZE, limit) if limit else DEFAULT_SIZE)
        if size > MAX_SIZE:
            abort(ctx, "OUT_OF_RANGE", "volumes hold at most %d bytes" % MAX_SIZE)
        vol_id = "pyvol-" + hashlib.sha256(req.name.encode()).hexdigest()[:24]
        log.info("CreateVolume name=%s id=%s size=%d", req.name, vol_id, size)
        with self.lock:
            rec = self.load("volumes", vol_id)
            if rec and not (want <= rec["size"] and (not limit or rec["size"] <= limit)):
                abort(ctx, "ALREADY_EXISTS", "volume %s exists with %d bytes" % (req.name, rec["size"]))
            if rec is None:
                os.makedirs(self.data_dir(vol_id), exist_ok=True)
                rec = {"name": req.name, "size": size}
                self.save("volumes", vol_id, rec)
        return pb.CreateVolumeResponse(volume=pb.Volume(volume_id=vol_id, capacity_bytes=rec["size"]))

    def DeleteVolume(self, req, ctx):
        require(ctx, volume_id=req.volume_id)
        log.info("DeleteVolume id=%s", req.volume_id)
        with self.lock:
            if self.load("volumes", req.volume_id) is not None:
                if self.load("staged", req.volume_id):
                    abort(ctx, "FAILED_PRECONDITION", "volume %s is staged on a node" % req.volume_id)
                if self.bug != "delete-leaks":  # the other planted bug
                    subprocess.run(["rm", "-rf", "--one-file-system", self.data_dir(req.volume_id)], check=True)
                self.drop("volumes", req.volume_id)
        return pb.DeleteVolumeResponse()

    def ValidateVolumeCapabilities(self, req, ctx):
        require(ctx, volume_id=req.volume_id, volume_capabilities=req.volume_capabilities)
        self.volume(ctx, req.volume_id)
        for cap in req.volume_capabilities:
            self.check_cap(ctx, cap)
        confirmed = pb.ValidateVolumeCapabilitiesResponse.Confirmed(volume_capabilities=req.volume_capabilities)
        return pb.ValidateVolumeCapabilitiesResponse(confirmed=confirmed)

    # Node.
    def NodeGetCapabilities(self, req, ctx):
        rpc = pb.NodeServiceCapability.RPC(type=pb.NodeServiceCapability.RPC.STAGE_UNSTAGE_VOLUME)
        return pb.NodeGetCapabilitiesResponse(capabilities=[pb.NodeServiceCapability(rpc=rpc)])

    def NodeGetInfo(self, req, ctx):
        return pb.NodeGetInfoResponse(node_id=self.node_id)

    def NodeStageVolume(self, req, ctx):
        require(ctx, volume_id=req.volume_id, staging_target_path=req.staging_target_path,
                volume_capability=req.HasField("volume_capability"))
        mode = self.check_cap(ctx, req.volume_capability)
        log.info("NodeStageVolume id=%s staging=%s", req.volume_id, req.staging_target_path)
        with self.lock:
            self.volume(ctx, req.volume_id)
            staged = self.load("staged", req.volume_id)
            path = os.path.realpath(req.staging_target_path)
            if staged:
                if staged["path"] != path or staged["mode"] != mode:
                    abort(ctx, "ALREADY_EXISTS", "volume %s is staged elsewhere or otherwise" % req.volume_id)
                if path in mounts():
                    return pb.NodeStageVolumeResponse()
            elif path in mounts():
                abort(ctx, "FAILED_PRECONDITION", "staging path %s holds another mount" % path)
            os.makedirs(path, exist_ok=True)
            run("mount", "--bind", self.data_dir(req.volume_id), path)
            self.save("staged", req.volume_id, {"path": path, "mode": mode})
        return pb.NodeStageVolumeResponse()

    def NodeUnstageVolume(self, req, ctx):
        require(ctx, volume_id=req.volume_id, staging_target_path=req.staging_target_path)
        log.info("NodeUnstageVolume id=%s staging=%s", req.volume_id, req.staging_target_path)
        with self.lock:
            path = os.path.realpath(req.staging_target_path)
            if path in mounts():
                run("umount", path)
            self.drop("staged", req.volume_id)
        return pb.NodeUnstageVolumeResponse()

    def NodePublishVolume(self, req, ctx):
        require(ctx, volume_id=req.volume_id, target_path=req.target_path,
                volume_capability=req.HasField("volume_capability"))
        mode = self.check_cap(ctx, req.volume_capability)
        ro = req.readonly or mode == "SINGLE_NODE_READER_ONLY"
        log.info("NodePublishVolume id=%s target=%s readonly=%s", req.volume_id, req.target_path, ro)
        with self.lock:
            self.volume(ctx, req.volume_id)
            if not req.staging_target_path:
                abort(ctx, "FAILED_PRECONDITION", "STAGE_UNSTAGE_VOLUME is advertised: staging_target_path is required")
            staging = os.path.realpath(req.staging_target_path)
            staged = self.load("staged", req.volume_id)
            if not staged or staged["path"] != staging or staging not in mounts():
                abort(ctx, "FAILED_PRECONDITION", "volume %s is not staged at %s" % (req.volume_id, staging))
            target = os.path.realpath(req.target_path)
            pub = self.load("published", target)
            if pub and target in mounts():
                if pub != {"volume_id": req.volume_id, "readonly": ro, "mode": mode}:
                    abort(ctx, "ALREADY_EXISTS", "%s is published otherwise" % target)
                return pb.NodePublishVolumeResponse()
            os.makedirs(target, exist_ok=True)
            run("mount", "--bind", staging, target)
            if ro:
                try:
                    run("mount", "-o", "remount,bind,ro", target)
                except subprocess.CalledProcessError:
                    run("umount", target)
                    raise
            self.save("published", target, {"volume_id": req.volume_id, "readonly": ro, "mode": mode})
        return pb.NodePublishVolumeResponse()

    def NodeUnpublishVolume(self, req, ctx):
        require(ctx, volume_id=req.volume_id, target_path=req.target_path)
        log.info("NodeUnpublishVolume id=%s target=%s", req.volume_id, req.target_path)
        with self.lock:
            target = os.path.realpath(req.target_path)
            if target not in mounts():
                if self.bug == "unpublish-notfound":
                    abort(ctx, "NOT_FOUND", "%s is not published" % target)  # the planted bug
            else:
                run("umount", target)
            if os.path.isdir(target):
                os.rmdir(target)
            self.drop("published", target)
        return pb.NodeUnpublishVolumeResponse()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--endpoint", required=True, help="unix:///path/csi.sock or tcp://host:port")
    p.add_argument("--nodeid", default=os.uname().nodename)
    p.add_argument("--state-dir", required=True)
    p.add_argument("--driver-name", default="python.csikit.dev")
    p.add_argument("--stubs", default=os.path.dirname(os.path.abspath(__file__)), help="directory of csi_pb2*.py")
    a = p.parse_args()
    sys.path.insert(0, a.stubs)
    global pb
    import csi_pb2 as pb, csi_pb2_grpc as pbg
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    # The generated servicers answer Unimplemented for every RPC not
    # overridden here.
    servicer = type("Servicer", (Driver, pbg.IdentityServicer, pbg.ControllerServicer, pbg.NodeServicer), {})
    d = servicer(a.driver_name, a.nodeid, os.path.abspath(a.state_dir), os.environ.get("CSI_PY_BUG", ""))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    pbg.add_IdentityServicer_to_server(d, server)
    pbg.add_ControllerServicer_to_server(d, server)
    pbg.add_NodeServicer_to_server(d, server)
    if a.endpoint.startswith("unix://"):
        sock = a.endpoint[len("unix://"):]
        if os.path.exists(sock):
            os.remove(sock)
        server.add_insecure_port("unix://" + sock)
    else:
        server.add_insecure_port(a.endpoint[len("tcp://"):])
    server.start()
    from google.protobuf.internal import api_implementation
    log.info("serving %s on %s (protobuf %s implementation; planted bug: %s)",
             a.driver_name, a.endpoint, api_implementation.Type(), d.bug or "none")
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    server.stop(2).wait()


if __name__ == "__main__":
    main()
