package csikit

import (
	"log/slog"
	"os"
	"reflect"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/journal"

	"github.com/csikit/csikit/locks"
)

// VolumeMode is a set of volume access types a driver supports.
type VolumeMode uint8

// Volume access types. Combine them with |.
const (
	// Mount volumes are presented as a mounted filesystem.
	Mount VolumeMode = 1 << iota
	// Block volumes are presented as a raw block device.
	Block
)

// Expansion says how a driver expands volumes.
type Expansion uint8

// Expansion kinds, advertised as the plugin's VolumeExpansion capability
// when the driver is a ControllerExpander or a NodeExpander.
const (
	// ExpansionOnline expands volumes while they are published (the default).
	ExpansionOnline Expansion = iota
	// ExpansionOffline expands only volumes that are not published.
	ExpansionOffline
)

// Options configure a Server. Name and Version are required; every other
// field has a documented default.
type Options struct {
	// Name is the driver name answered by GetPluginInfo: at most 63
	// characters, a domain name (e.g. "block.vendor.example").
	Name string
	// Version is the vendor version; required (every CSI sidecar exits on
	// an empty one).
	Version string
	// Manifest is optional opaque information returned by GetPluginInfo.
	Manifest map[string]string

	// NodeID answers NodeGetInfo for node plugins that do not implement
	// NodeInfoer; required then.
	NodeID string
	// MaxVolumesPerNode is NodeGetInfo's max_volumes_per_node (0 = no limit).
	MaxVolumesPerNode int64
	// Topology is the node's accessible topology segment in NodeGetInfo.
	// Setting it on a node or controller plugin advertises
	// VOLUME_ACCESSIBILITY_CONSTRAINTS.
	Topology map[string]string
	// AccessibilityConstraints advertises VOLUME_ACCESSIBILITY_CONSTRAINTS
	// without a node Topology (e.g. a controller-only plugin).
	AccessibilityConstraints bool

	// VolumeModes are the access types the driver serves (default Mount).
	VolumeModes VolumeMode
	// AccessModes are the access modes the driver serves. Default:
	// SINGLE_NODE_WRITER and SINGLE_NODE_READER_ONLY, plus
	// SINGLE_NODE_SINGLE_WRITER and SINGLE_NODE_MULTI_WRITER when
	// SingleNodeMultiWriter is set.
	AccessModes []csi.VolumeCapability_AccessMode_Mode

	// Clone advertises CLONE_VOLUME and accepts volumes as CreateVolume
	// content sources.
	Clone bool
	// ReadOnlyPublish advertises PUBLISH_READONLY, a capability of
	// ControllerPublishVolume: NewServer refuses it for a controller that
	// does not serve that RPC (a node needs no option to honour a
	// request's readonly field).
	ReadOnlyPublish bool
	// ListPublishedNodes advertises LIST_VOLUMES_PUBLISHED_NODES; NewServer
	// refuses it for a controller that does not serve ListVolumes.
	ListPublishedNodes bool
	// SingleNodeMultiWriter advertises SINGLE_NODE_MULTI_WRITER on the
	// controller and node services (alpha in v1.14: needs Alpha).
	SingleNodeMultiWriter bool
	// VolumeMountGroup advertises the node's VOLUME_MOUNT_GROUP.
	VolumeMountGroup bool
	// Expansion is advertised for expanders (default ExpansionOnline).
	Expansion Expansion
	// Disable switches off driver interfaces the driver value implements,
	// for features chosen at run time (a flag, a config file): the server
	// serves, advertises and derives capabilities as if the value lacked
	// them. One driver type then covers every combination, e.g.
	//
	//	if !cfg.attach {
	//		opts.Disable = append(opts.Disable, reflect.TypeFor[csikit.ControllerPublisher]())
	//	}
	//
	// Each entry must be one of this package's driver interfaces
	// (Provisioner, ControllerPublisher, Modifier, NodeStager, VolumeLookup,
	// Fencer, …); NewServer refuses anything else.
	Disable []reflect.Type

	// Alpha opts in to alpha RPCs and capabilities of the spec. Without it
	// they are neither advertised nor served, whatever the driver
	// implements.
	Alpha bool

	// Logger receives one line per call and every error; nil discards.
	// Secrets are stripped from everything it is given.
	Logger *slog.Logger
	// LogLevel picks the level of each call's "call finished" line from its
	// full method name and status code. Nil means DefaultLogLevel: Debug for
	// successful polling and read RPCs, Info for successful mutating ones.
	LogLevel func(fullMethod string, code codes.Code) slog.Level
	// Registry, when set, gets the csi_plugin_operations_seconds histogram
	// and the other server metrics, and csikit_journal_healthy (1 or 0)
	// when Journal reports its health (journal.HealthReporter, as
	// journal.File does); nil costs nothing per call.
	Registry prometheus.Registerer

	// Journal makes CreateVolume and CreateSnapshot idempotent across
	// retries and restarts: names are reserved before the driver runs and
	// the reserved ID reaches it through journal.ReservedID. Nil turns
	// the journal off (per-volume locking stays on). A Journal that is an
	// journal.HealthReporter makes Probe answer FailedPrecondition
	// while it cannot write.
	Journal journal.Journal
	// NewID chooses IDs for journal reservations (default: random,
	// path-safe IDs).
	NewID func(name string) string
	// LockKeys overrides the lock keys of some RPCs, by full method name
	// (see LockKeys); a nil function turns locking off for
	// that RPC.
	LockKeys map[string]locks.KeyFunc

	// SocketMode is the unix socket's mode (default 0660).
	SocketMode os.FileMode
	// DrainTimeout bounds the graceful drain of in-flight calls at
	// shutdown before they are cancelled (default 30s).
	DrainTimeout time.Duration
	// MetadataSendTimeout bounds how long one SnapshotMetadata message may
	// wait for the client to accept it (default
	// DefaultMetadataSendTimeout, 10 minutes). A client that stops reading
	// would otherwise hold the call — and its snapshots' locks, so that
	// DeleteSnapshot answers Aborted — until it disconnects; past the
	// timeout the call ends with DeadlineExceeded, the driver's context is
	// cancelled and the locks are released. A client that does not read
	// may not see that status: it waits behind the unread messages.
	MetadataSendTimeout time.Duration
	// UnaryInterceptors run after csikit's own, just before the driver.
	UnaryInterceptors []grpc.UnaryServerInterceptor
	// StreamInterceptors run after csikit's own stream interceptors, just
	// before the handler, for the SnapshotMetadata service and streaming
	// services registered through GRPCServer.
	StreamInterceptors []grpc.StreamServerInterceptor
	// ServerOptions are passed to grpc.NewServer after csikit's own
	// (which serve calls on a pool of 16 goroutines, grpc.NumStreamWorkers;
	// an option here may set another size).
	// Interceptors given here (grpc.ChainUnaryInterceptor) run before
	// csikit's chain for the CSI RPCs; use UnaryInterceptors to run after
	// it.
	ServerOptions []grpc.ServerOption
}
