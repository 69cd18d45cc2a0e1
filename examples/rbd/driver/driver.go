// Package driver is a Ceph RBD CSI driver on csikit: each volume is an RBD
// image, snapshots are RBD snapshots, restores and clones are clone-v2
// images (flattened past a configurable chain depth), the idempotency
// journal lives in RADOS omap objects in each pool, and the node maps
// images with krbd, rbd-nbd or rbd-fuse plus a loop device.
//
// Credentials come from the CSI secrets of each request (userID,
// userKey) and, for the work no request carries secrets to (lifting and
// renewing fences after a restart, registering a node), from
// Options.SecretsDir, a mounted Secret read at each use; the controller
// keeps one RADOS connection per set of credentials. The key is handed to librados as a config option and to the
// node's map tools in a root-only file removed right after the tool read
// it; it never appears in logs, errors, argument lists or environments.
package driver

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/crypt"
	"github.com/csikit/csikit/mount"
)

// StorageClass (CreateVolume) parameters.
const (
	// ParamPool is the pool new images go to (default Options.DefaultPool).
	ParamPool = "pool"
	// ParamDataPool puts image data in another (e.g. erasure-coded) pool.
	ParamDataPool = "dataPool"
	// ParamImageFeatures is a comma-separated feature list: layering
	// (always on), exclusive-lock, object-map, fast-diff, deep-flatten,
	// journaling (default DefaultImageFeatures).
	ParamImageFeatures = "imageFeatures"
	// ParamMapper chooses how nodes map the image: krbd, rbd-nbd or
	// rbd-fuse (default the node's --mapper).
	ParamMapper = "mapper"
	// ParamFsType is the file system of mount volumes, "ext4" (default)
	// or "xfs", used when the CO's capability names none (a
	// StorageClass's csi.storage.k8s.io/fstype fills the capability and
	// wins). xfs volumes are mounted with nouuid: a clone or restore has
	// its source's file system UUID and may be mounted beside it.
	ParamFsType = "fsType"
	// ParamZonePools names a pool per topology zone, "zone=pool,zone=pool":
	// the volume goes to the pool of the first zone the request's
	// topology prefers (or allows).
	ParamZonePools = "zonePools"
)

// DefaultImageFeatures are the features of images whose StorageClass
// names none (ParamImageFeatures), the same as deploy/storageclass.yaml's.
// object-map (which needs exclusive-lock; fast-diff needs object-map) lets
// a remove skip the objects never written instead of deleting every object
// the image could have, one per 4 MiB: a 1 GiB volume is deleted in about
// a third of the time. krbd maps such images from Linux 5.3 on; for older
// kernels set imageFeatures to "layering".
const DefaultImageFeatures = "layering,exclusive-lock,object-map,fast-diff,deep-flatten"

// TopologyKey is the topology segment key of zones (ParamZonePools).
const TopologyKey = "topology.rbd.csikit.dev/zone"

// Options configure a Driver.
type Options struct {
	// Monitors is the comma-separated list of monitor addresses. Required.
	Monitors string
	// DefaultPool is the pool used without ParamPool (default "rbd").
	DefaultPool string
	// NodeID names this node (node plugins).
	NodeID string
	// Zone is the node's zone for topology (empty: no topology).
	Zone string
	// StateDir holds the node's root-only working files: rbd-fuse mount
	// points and, for the moment a map tool reads them, key files
	// (default /var/lib/csikit-rbd).
	StateDir string
	// NBDLockFile is the host-wide lock under which rbd-nbd stages pick
	// and map their /dev/nbdN (default DefaultNBDLockFile). Every node
	// plugin on a host must use the same file (in a container: the
	// host's path, mounted), or two can pick the same device.
	NBDLockFile string
	// Mapper is the node's default mapper: "krbd" (default), "rbd-nbd"
	// or "rbd-fuse".
	Mapper string
	// MaxCloneDepth is how long a chain of clones may grow before a new
	// clone is flattened (default 8; 0 means the default, negative
	// flattens every clone).
	MaxCloneDepth int
	// MaxVolumeSize is the largest volume CreateVolume and
	// ControllerExpandVolume accept (default 64 TiB): without an object
	// map, removing an image visits every object it could have.
	MaxVolumeSize int64
	// CreateLease is how long a create's journal reservation stays its
	// own without renewal (default DefaultCreateLease); a running create
	// renews it every third of that. The sweep of abandoned creates only
	// takes over reservations whose lease expired.
	CreateLease time.Duration
	// FenceExpiry is how long a fence's blocklist entries last unless
	// Unfence lifts them first, or RenewFences renews them (default
	// DefaultFenceExpiry).
	FenceExpiry time.Duration
	// SecretsDir, when set, is a directory holding the files userID and
	// userKey (SecretUserID, SecretUserKey): a Kubernetes Secret mounted
	// as a volume. They are the plugin's standing Ceph credentials, read
	// at each use (a rotated Secret applies without a restart) and never
	// copied elsewhere, for the calls that carry no secrets: Unfence (the
	// csikit Fencing service) and the fence journal after a restart,
	// RenewFences, and a node plugin's registration at NodeGetInfo. The
	// secrets of a request, when it has them, are used first.
	SecretsDir string
	// RequireNodeRegistration makes ControllerPublishVolume answer
	// NOT_FOUND for a node that no node plugin registered: node plugins
	// register their ID at NodeGetInfo when they have SecretsDir (see
	// NodesObject). Every node plugin then needs SecretsDir and the same
	// DefaultPool as the controller.
	RequireNodeRegistration bool
	// OpTimeout bounds every Ceph operation (default 30s).
	OpTimeout time.Duration
	// Runner, when set, runs every external tool of the node, the
	// mounter's and the mappers' (a test's script; its output is taken as
	// the tool's stdout). By default the mounter uses mount.ExecRunner()
	// and the mappers command.Run, which gives them stdout apart from
	// stderr (rbd-nbd's JSON parses from clean stdout) and bounds each run
	// by OpTimeout, killing the tool's whole process group.
	Runner mount.Runner
	// Logger receives the driver's own lines (default: discard).
	Logger *slog.Logger
	// EncryptionPBKDF is the key derivation of the LUKS2 key slots of
	// encrypted volumes (ParamEncrypted); the zero value is crypt's
	// default, argon2id with 64 MiB, 4 passes, 1 thread.
	EncryptionPBKDF crypt.PBKDF
}

// Driver is the RBD driver. Create it with New; close it with Close.
type Driver struct {
	opts    Options
	conns   *ConnPool
	mounter *mount.Mounter
	mappers map[string]Mapper

	mu   sync.Mutex
	seen map[string]seenPool // pools requests named, for the calls without secrets

	fence fenceState
}

// seenPool is a pool the driver served with some credentials.
type seenPool struct {
	creds Credentials
	pool  string
}

// New returns a Driver.
func New(o Options) (*Driver, error) {
	if o.Monitors == "" {
		return nil, errors.New("rbd driver: Options.Monitors is required")
	}
	if o.DefaultPool == "" {
		o.DefaultPool = "rbd"
	}
	if o.StateDir == "" {
		o.StateDir = "/var/lib/csikit-rbd"
	}
	if o.NBDLockFile == "" {
		o.NBDLockFile = DefaultNBDLockFile
	}
	if o.Mapper == "" {
		o.Mapper = MapperKRBD
	}
	if o.MaxCloneDepth == 0 {
		o.MaxCloneDepth = 8
	}
	if o.MaxVolumeSize <= 0 {
		o.MaxVolumeSize = 64 << 40
	}
	if o.CreateLease <= 0 {
		o.CreateLease = DefaultCreateLease
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = 30 * time.Second
	}
	if o.FenceExpiry <= 0 {
		o.FenceExpiry = DefaultFenceExpiry
	}
	run := execTools(o.OpTimeout)
	if o.Runner != nil {
		run = o.Runner.Run
	} else {
		o.Runner = mount.ExecRunner()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(o.StateDir)
	if err != nil {
		return nil, err
	}
	o.StateDir = filepath.Clean(abs)
	d := &Driver{
		opts: o, conns: NewConnPool(o.Monitors, o.OpTimeout, 10*time.Minute),
		mounter: newMounter(o),
		seen:    map[string]seenPool{},
	}
	d.mappers = map[string]Mapper{
		MapperKRBD: &krbdMapper{run: run, keys: d.keyDir(), sysfs: "/sys/bus/rbd/devices"},
		MapperNBD:  &nbdMapper{run: run, keys: d.keyDir(), state: o.StateDir, lockFile: o.NBDLockFile, sysfs: "/sys/block", module: "/sys/module/nbd", mountinfo: "/proc/self/mountinfo"},
		MapperFUSE: &fuseMapper{run: run, keys: d.keyDir(), dir: filepath.Join(o.StateDir, "fuse")},
	}
	if _, ok := d.mappers[o.Mapper]; !ok {
		d.conns.Close()
		return nil, errors.New("rbd driver: unknown mapper " + o.Mapper + ": want krbd, rbd-nbd or rbd-fuse")
	}
	return d, nil
}

// Close releases every RADOS connection.
func (d *Driver) Close() error {
	d.conns.Close()
	return nil
}

// keyDir is the root-only directory for key files of map tools.
func (d *Driver) keyDir() string { return filepath.Join(d.opts.StateDir, "keys") }

// prepareStateDir creates the node's working directories, root-only.
func (d *Driver) prepareStateDir() error {
	for _, dir := range []string{d.opts.StateDir, d.keyDir(), filepath.Join(d.opts.StateDir, "fuse")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// Service is the value to hand to csikit.NewServer.
func (d *Driver) Service() any { return d }

// ServerOptions returns the csikit options this driver needs on top of
// the caller's: the journal (which reads each request's secrets and
// parameters through journal.Request) and the capabilities.
func (d *Driver) ServerOptions(o csikit.Options) csikit.Options {
	o.Journal = d.Journal()
	// csikit reads its fence records before the driver runs; the journal
	// needs the request's secrets (fencejournal.go).
	o.ServerOptions = append(o.ServerOptions, grpc.ChainUnaryInterceptor(withRequest))
	o.VolumeModes = csikit.Mount | csikit.Block
	o.Clone = true
	o.Expansion = csikit.ExpansionOnline
	o.AccessModes = []csi.VolumeCapability_AccessMode_Mode{
		csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
	}
	if d.opts.Zone != "" {
		o.Topology = map[string]string{TopologyKey: d.opts.Zone}
	}
	return o
}

// remember records that pool was served with creds.
func (d *Driver) remember(creds Credentials, pool string) {
	k := creds.fingerprint() + "\x00" + pool
	d.mu.Lock()
	d.seen[k] = seenPool{creds: creds, pool: pool}
	d.mu.Unlock()
}

// seenPools returns the pools served so far, one credential set each.
func (d *Driver) seenPools() []seenPool {
	d.mu.Lock()
	defer d.mu.Unlock()
	by := map[string]seenPool{}
	for _, s := range d.seen {
		by[s.pool] = s
	}
	out := make([]seenPool, 0, len(by))
	for _, s := range by {
		out = append(out, s)
	}
	return out
}

// opCtx bounds a backend call.
func (d *Driver) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.opts.OpTimeout)
}
