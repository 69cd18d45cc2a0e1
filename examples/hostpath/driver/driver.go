//go:build linux

// Package driver is the hostpath reference driver: volumes are directories,
// loop-backed block devices, or real ext4/xfs filesystems on loop-backed
// files, all under one state directory on this node.
//
// It is built only on csikit's public API: the server validates requests,
// serializes calls per volume and reserves names in a crash-safe journal
// before CreateVolume and CreateSnapshot run, so the driver holds no global
// lock and creates every object under the ID the journal reserved. Its own
// metadata lives in KV spaces of that same journal file
// (journal.File.KV), so every change is durable and concurrent
// changes — the driver's and the journal's — share flushes. Inside the
// create and delete calls its writes are deferred (KV.DeferPut) into the
// journal's own commit or release: the metadata and the journal record
// land in one atomic transaction. The driver reads only what is durable
// (see store), so a write that failed at that commit is redone by the
// CO's retry, never answered from memory.
//
// Invariants: every path the driver builds comes from an ID that passed
// validID, so nothing outside the state directory is ever touched; data is
// never removed with os.RemoveAll below a path that may still be a mount.
package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/csikit/csikit/crypt"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/mount"
	"github.com/csikit/csikit/quota"
)

// TopologyKey is the topology segment key of the node a volume lives on.
const TopologyKey = "topology.hostpath.csikit.dev/node"

// Parameter keys understood in CreateVolume's parameters.
const (
	// ParamFSType selects a real filesystem ("ext4" or "xfs") on a
	// loop-backed file instead of a plain directory. The capacity is then
	// enforced and expansion is real.
	ParamFSType = "fsType"
	// ParamKind may force "directory" for mount volumes.
	ParamKind = "kind"
	// ParamEncrypted "true" encrypts a filesystem or block volume at rest
	// with LUKS2 (package crypt). The passphrase comes from the
	// node-stage secret's crypt.SecretKey ("encryptionPassphrase"), and
	// for expansion from the node-expand secret's.
	ParamEncrypted = "encrypted"
)

// Options configure the driver.
type Options struct {
	// StateDir holds all volumes, snapshots and metadata. Required.
	StateDir string
	// NodeID is this node's ID. Required.
	NodeID string
	// Capacity is the total number of bytes offered; 0 means the free
	// space of the filesystem holding StateDir.
	Capacity int64
	// MaxVolumeSize caps a single volume (default 1 TiB).
	MaxVolumeSize int64
	// MaxVolumesPerNode is the attach limit with EnableAttach (0 = none).
	MaxVolumesPerNode int64
	// EnableAttach makes ControllerPublish/Unpublish part of the driver.
	EnableAttach bool
	// EnableModify makes ControllerModifyVolume part of the driver.
	EnableModify bool
	// MutableParameters lists the parameters ControllerModifyVolume may
	// change; empty means all.
	MutableParameters []string
	// Logger receives the driver's own lines; nil discards.
	Logger *slog.Logger
	// EncryptionPBKDF is the key derivation of encrypted volumes' key
	// slots (default: crypt's argon2id cost).
	EncryptionPBKDF crypt.PBKDF
	// Step, when set, is called at each step of the create-like calls
	// (CreateVolume, CreateSnapshot, CreateVolumeGroupSnapshot) and of
	// the delete calls with the step's name, such as "volume:data-made"
	// or "snapshot:copied": a test
	// hook, for crash tests that kill the driver between two steps and
	// for tests that change the world there (fill the disk, hold a call).
	// Nil in production.
	Step func(step string)
}

// Driver implements the controller and node services. Create it with New;
// Close it after the server has stopped.
type Driver struct {
	opts    Options
	log     *slog.Logger
	store   *store
	journal *journal.File
	mounter *mount.Mounter
	ledger  *ledger // capacity given to volumes and snapshots, durable and reserved

	// quotas is set when the state directory's filesystem enforces project
	// quotas: directory volumes then get one project each, limited to
	// their capacity (projects hands out the IDs).
	quotas   bool
	projects *projects

	// capMu serializes the attach-limit count in ControllerPublishVolume.
	capMu sync.Mutex
}

// New opens (or creates) the state under opts.StateDir and re-attaches the
// loop devices of volumes that were staged before a restart.
func New(ctx context.Context, opts Options) (*Driver, error) {
	if opts.StateDir == "" || !filepath.IsAbs(opts.StateDir) {
		return nil, fmt.Errorf("hostpath: state dir %q must be an absolute path", opts.StateDir)
	}
	if opts.NodeID == "" {
		return nil, errors.New("hostpath: node ID is required")
	}
	if opts.MaxVolumeSize <= 0 {
		opts.MaxVolumeSize = 1 << 40
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	for _, dir := range []string{"", "volumes", "images", "snapshots"} {
		if err := os.MkdirAll(filepath.Join(opts.StateDir, dir), 0o750); err != nil {
			return nil, fmt.Errorf("hostpath: %w", err)
		}
	}
	j, err := journal.OpenFile(filepath.Join(opts.StateDir, "journal.db"), journal.FileOptions{Volatile: volatileKinds})
	if err != nil {
		return nil, fmt.Errorf("hostpath: journal: %w", err)
	}
	st, err := openStore(j)
	if err != nil {
		j.Close()
		return nil, err
	}
	d := &Driver{
		opts: opts, log: opts.Logger, store: st, journal: j,
		mounter:  newMounter(opts),
		projects: newProjects(),
	}
	// The ledger's total and the start's pass each decode every volume
	// record: on two cores, side by side (both only read the journal).
	ledger := make(chan *ledger, 1)
	go func() { ledger <- newLedger(st) }()
	images, err := d.startVolumes()
	d.ledger = <-ledger
	if err != nil {
		j.Close()
		return nil, err
	}
	if err := d.removeOrphans(ctx); err != nil {
		j.Close()
		return nil, fmt.Errorf("hostpath: remove the data of creates a crash cut short: %w", err)
	}
	d.checkQuotas(ctx)
	d.measureSnapshots(ctx)
	d.reattach(ctx, images)
	return d, nil
}

// startVolumes is the start's one pass over the volumes: every record
// must decode, the projects in use are noted, and the volumes with a
// backing image are returned (to re-attach those staged). It holds no
// copy of the records: at 100,000 volumes a slice of them was tens of
// megabytes the process kept as RSS after the start.
func (d *Driver) startVolumes() (images []string, err error) {
	err = d.store.volumes.scan(func(id string, v *volume) {
		if v.ProjectID != 0 {
			d.projects.taken[quota.ProjectID(v.ProjectID)] = v.ID
		}
		if v.Kind != kindDir {
			images = append(images, id)
		}
	})
	slices.Sort(images) // the scan's order is the file's
	return images, err
}

// step calls Options.Step, if set.
func (d *Driver) step(name string) {
	if d.opts.Step != nil {
		d.opts.Step(name)
	}
}

// Journal is the crash-safe name→ID journal to hand to csikit.Options.
func (d *Driver) Journal() journal.Journal { return d.journal }

// Close releases the state files.
func (d *Driver) Close() error {
	return d.journal.Close()
}

// paths of one volume or snapshot; id must have passed validID.
func (d *Driver) volumesRoot() string        { return filepath.Join(d.opts.StateDir, "volumes") }
func (d *Driver) volumeDir(id string) string { return filepath.Join(d.volumesRoot(), id) }
func (d *Driver) volumeImage(id string) string {
	return filepath.Join(d.opts.StateDir, "images", id+".img")
}
func (d *Driver) snapshotPath(id string, k kind) string {
	if k == kindDir {
		return filepath.Join(d.opts.StateDir, "snapshots", id)
	}
	return filepath.Join(d.opts.StateDir, "snapshots", id+".img")
}

// validID reports whether id is safe to use as a single path element: 1–128
// of [A-Za-z0-9._-], and not "." or "..". IDs the CO sends are untrusted.
func validID(id string) bool {
	if id == "" || len(id) > 128 || id == "." || id == ".." {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// newMounter is the driver's Mounter, whose Crypt derives keys with
// opts.EncryptionPBKDF.
func newMounter(opts Options) *mount.Mounter {
	c := crypt.New(crypt.Options{Prober: mount.New(mount.Options{Logger: opts.Logger}), PBKDF: opts.EncryptionPBKDF, Logger: opts.Logger})
	return mount.New(mount.Options{Logger: opts.Logger, Crypt: c})
}
