package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ceph/go-ceph/rados"
	"github.com/ceph/go-ceph/rbd"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/journal"
)

// DefaultFenceExpiry is how long a fence's blocklist entries last without
// an Unfence or a renewal (Options.FenceExpiry, RenewFences): long,
// because a fence that expires while its node is still hung lets that
// node's writes land again, and each renewal opens a moment without the
// entry; cheap, because an entry names one client instance (address and
// nonce), which no process started after the node's reboot reuses. See
// the README's "Node loss and fencing".
const DefaultFenceExpiry = 30 * 24 * time.Hour

var _ csikit.Fencer = (*Driver)(nil)

// rbdLockName is the cls_lock name of librbd's exclusive lock on an
// image's header object.
const rbdLockName = "rbd_lock"

// fenceState is the driver's memory for Holds, Fence and Unfence, which
// carry no secrets: the credentials last seen with each volume.
type fenceState struct {
	mu    sync.Mutex
	creds map[string]Credentials // volume ID → credentials
}

// rememberVolume keeps creds as the credentials of volume id.
func (d *Driver) rememberVolume(id volumeID, creds Credentials) {
	d.fence.mu.Lock()
	defer d.fence.mu.Unlock()
	if d.fence.creds == nil {
		d.fence.creds = map[string]Credentials{}
	}
	d.fence.creds[id.String()] = creds
}

// credsFor finds credentials for volume id: the secrets of the request
// running in ctx, those last seen with the volume (its
// ControllerPublish/Unpublish or NodeStage), the standing ones
// (Options.SecretsDir), or any connection's that can see the volume's
// pool. Secrets are kept in memory only, never journaled: after a
// restart, a call without a request (Server.Unfence, RenewFences) has
// the standing credentials.
func (d *Driver) credsFor(ctx context.Context, id volumeID) (Credentials, error) {
	if req, ok := journal.Request(ctx); ok {
		if c, err := CredentialsFromSecrets(secretsOf(req)); err == nil {
			return c, nil
		}
	}
	d.fence.mu.Lock()
	c, ok := d.fence.creds[id.String()]
	d.fence.mu.Unlock()
	if ok {
		return c, nil
	}
	c, ok, serr := d.standing()
	if ok {
		return c, nil
	}
	for _, c := range d.conns.Credentials() {
		if _, err := d.poolName(ctx, c, id.pool); err == nil {
			return c, nil
		}
	}
	if serr != nil {
		return Credentials{}, serr
	}
	return Credentials{}, status.Errorf(codes.Unavailable, "no Ceph credentials for volume %s yet: this process has not served a request with its secrets since it started, and has no standing credentials (--secrets-dir, a mounted Secret with userID and userKey); retry after the volume's ControllerPublish/Unpublish, or set --secrets-dir", id)
}

// liveClients returns the addresses of image name's watchers and of its
// exclusive-lock owners, and the lockers (for breaking the lock).
func liveClients(io *rados.IOContext, name string) (watchers []string, lockers []rbd.Locker, imageID string, err error) {
	img, err := rbd.OpenImageReadOnly(io, name, rbd.NoSnapshot)
	if errors.Is(err, rbd.ErrNotFound) {
		return nil, nil, "", nil
	}
	if err != nil {
		return nil, nil, "", backendError(err, "open image "+name)
	}
	defer img.Close()
	ws, err := img.ListWatchers()
	if err != nil {
		return nil, nil, "", backendError(err, "list the watchers of image "+name)
	}
	for _, w := range ws {
		watchers = append(watchers, w.Addr)
	}
	_, lockers, err = img.ListLockers()
	if err != nil {
		return nil, nil, "", backendError(err, "list the lockers of image "+name)
	}
	imageID, err = img.GetId()
	if err != nil {
		return nil, nil, "", backendError(err, "ID of image "+name)
	}
	return watchers, lockers, imageID, nil
}

// describeClients says which of addrs are live (watching, or owning the
// exclusive lock), for messages.
func describeClients(addrs, watchers []string, lockers []rbd.Locker) string {
	if len(addrs) == 0 {
		return "Ceph client not yet known: the stage is in progress or was interrupted"
	}
	var parts []string
	for _, a := range addrs {
		var what []string
		if slices.Contains(watchers, a) {
			what = append(what, "watching the image")
		}
		for _, l := range lockers {
			if l.Addr == a {
				what = append(what, "owning its exclusive lock")
			}
		}
		if len(what) == 0 {
			what = append(what, "no watch or lock now, but not fenced: it may still write")
		}
		parts = append(parts, "Ceph client "+a+" ("+strings.Join(what, ", ")+")")
	}
	return strings.Join(parts, "; ")
}

// openAccess parses volumeID and opens its pool's access namespace with
// the credentials credsFor finds; ok is false for an ID that is not ours
// or a pool that is gone (nothing to hold, fence or unfence).
func (d *Driver) openAccess(ctx context.Context, volumeID string) (id volumeID, io *rados.IOContext, creds Credentials, done func(), ok bool, err error) {
	id, ok = parseVolumeID(volumeID)
	if !ok {
		return id, nil, creds, nil, false, nil
	}
	creds, err = d.credsFor(ctx, id)
	if err != nil {
		return id, nil, creds, nil, false, err
	}
	io, done, err = d.accessIO(ctx, creds, id)
	if status.Code(err) == codes.NotFound {
		return id, nil, creds, nil, false, nil
	}
	if err != nil {
		return id, nil, creds, nil, false, err
	}
	return id, io, creds, done, true, nil
}

// eachNode runs f for every node the volume's access object lists under
// pick (nodeID "" in a csikit.Fencer call: every node), stopping at the
// first true or error.
func (d *Driver) eachNode(ctx context.Context, volumeID string, pick func(access) []string, f func(node string) (bool, error)) (bool, error) {
	id, io, _, done, ok, err := d.openAccess(ctx, volumeID)
	if err != nil || !ok {
		return false, err
	}
	a, err := readAccess(io, id)
	done()
	if err != nil {
		return false, err
	}
	for _, n := range pick(a) {
		if r, err := f(n); err != nil || r {
			return r, err
		}
	}
	return false, nil
}

// accessed is a volume's access object as withAccess read it, with
// what read it.
type accessed struct {
	id    volumeID
	io    *rados.IOContext // the pool's access namespace
	creds Credentials      // those that opened it
	a     access
}

// withAccess runs f, bounded by Options.OpTimeout, on volumeID's access
// object: the prologue Holds, Fence and Unfence share. An ID that is not
// ours, or a pool that is gone, runs nothing (nothing to hold, fence or
// unfence) and is no error.
func (d *Driver) withAccess(ctx context.Context, volumeID string, f func(ctx context.Context, v accessed) error) error {
	ctx, cancel := d.opCtx(ctx)
	defer cancel()
	id, io, creds, done, ok, err := d.openAccess(ctx, volumeID)
	if err != nil || !ok {
		return err
	}
	defer done()
	a, err := readAccess(io, id)
	if err != nil {
		return err
	}
	return f(ctx, accessed{id: id, io: io, creds: creds, a: a})
}

// Holds reports whether nodeID (every node, for "") may still write to
// volumeID (csikit.Fencer):
// the node staged the volume and has not unstaged it, and the Ceph
// clients its stage recorded are not all fenced. A node whose watch on the
// image lapsed still holds it: a hung node keeps its client, and its
// writes land when it wakes unless the client is blocklisted.
func (d *Driver) Holds(ctx context.Context, volumeID, nodeID string) (bool, error) {
	if nodeID == "" {
		return d.eachNode(ctx, volumeID, func(a access) []string { return nodes(a.stage) }, func(n string) (bool, error) {
			return d.Holds(ctx, volumeID, n)
		})
	}
	var holds bool
	err := d.withAccess(ctx, volumeID, func(_ context.Context, v accessed) error {
		s, ok := v.a.stage[nodeID]
		if !ok {
			return nil
		}
		f, fenced := v.a.fence[nodeID]
		holds = !fenced || len(s.Addrs) == 0 || !f.covers(s.Addrs, time.Now())
		return nil
	})
	return holds, err
}

// Fence cuts nodeID (every node that holds it, for "") off volumeID
// (csikit.Fencer): it blocklists the Ceph
// clients the node's stage recorded (osd blocklist add, for
// Options.FenceExpiry), breaks the exclusive lock they own so that the
// next node's stage can take it, and records the fence in the volume's
// access object, where a restarted controller finds it. A stage record
// without a client (the node died while mapping) fences the live clients
// no other node's record names. Idempotent: a node already fenced, or
// never staged, is fenced.
func (d *Driver) Fence(ctx context.Context, volumeID, nodeID string) error {
	if nodeID == "" {
		_, err := d.eachNode(ctx, volumeID, func(a access) []string { return nodes(a.stage) }, func(n string) (bool, error) {
			return false, d.Fence(ctx, volumeID, n)
		})
		return err
	}
	return d.withAccess(ctx, volumeID, func(ctx context.Context, v accessed) error { return d.fenceNode(ctx, v, nodeID) })
}

// fenceNode is Fence of one node, on the access object withAccess read.
func (d *Driver) fenceNode(ctx context.Context, v accessed, nodeID string) error {
	id, io, creds, a := v.id, v.io, v.creds, v.a
	s, staged := a.stage[nodeID]
	if !staged {
		return nil
	}
	iio, _, idone, err := d.volumeIO(ctx, creds, id.pool)
	if err != nil {
		return err
	}
	defer idone()
	watchers, lockers, imageID, err := liveClients(iio, id.image())
	if err != nil {
		return err
	}
	addrs := slices.Clone(s.Addrs)
	if len(addrs) == 0 {
		// Whose are the live clients no other node's stage names? Only
		// this node's, which died between recording its stage and its
		// client.
		for _, c := range append(slices.Clone(watchers), lockerAddrs(lockers)...) {
			if !slices.Contains(addrs, c) && !recordedElsewhere(a, nodeID, c) {
				addrs = append(addrs, c)
			}
		}
	}
	conn, cdone, err := d.conns.Conn(ctx, creds)
	if err != nil {
		return err
	}
	defer cdone()
	expiry := d.opts.FenceExpiry
	for _, addr := range addrs {
		if err := blocklist(conn, "add", addr, expiry); err != nil {
			return err
		}
	}
	// Our next ops (the lock break) then carry the OSD map epoch of the
	// blocklist, so an OSD they reach applies it before them; the next
	// node's ops do the same, so no op of a fenced client lands after any
	// of theirs.
	if len(addrs) > 0 {
		if err := conn.WaitForLatestOSDMap(); err != nil {
			return backendError(err, "wait for the OSD map with the blocklist")
		}
	}
	// The lock of a blocklisted owner: broken, so the next owner need not
	// wait for librbd to find its owner dead.
	for _, l := range lockers {
		if !slices.Contains(addrs, l.Addr) {
			continue
		}
		if _, err := iio.BreakLock("rbd_header."+imageID, rbdLockName, l.Client, l.Cookie); err != nil && !errors.Is(err, rados.ErrNotFound) {
			return backendError(err, "break the exclusive lock of "+l.Client+" on volume "+id.String())
		}
	}
	now := time.Now()
	f := fenceRecord{Addrs: addrs, At: now, Until: now.Add(expiry)}
	if old, ok := a.fence[nodeID]; ok {
		for _, x := range old.Addrs { // an Unfence must lift these too
			if !slices.Contains(f.Addrs, x) {
				f.Addrs = append(f.Addrs, x)
			}
		}
	}
	if err := updateAccess(io, id, map[string]any{fenceKey + nodeID: f}, stageKey+nodeID); err != nil {
		return err
	}
	d.opts.Logger.WarnContext(ctx, "fenced a node off a volume", "volume", id.String(), "node", nodeID, "clients", addrs, "until", f.Until)
	return nil
}

func lockerAddrs(ls []rbd.Locker) []string {
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		out = append(out, l.Addr)
	}
	return out
}

// recordedElsewhere reports whether a node other than node recorded addr.
func recordedElsewhere(a access, node, addr string) bool {
	for n, s := range a.stage {
		if n != node && slices.Contains(s.Addrs, addr) {
			return true
		}
	}
	return false
}

// Unfence lifts nodeID's fence (every node's, for "") on volumeID
// (csikit.Fencer): osd blocklist
// rm of every client it blocklisted (needs the cap `allow command "osd
// blocklist" with blocklistop=rm`, which profile rbd lacks: without it the
// entries stay until they expire, harmlessly, and Unfence is
// PermissionDenied) and the fence record removed. Idempotent.
func (d *Driver) Unfence(ctx context.Context, volumeID, nodeID string) error {
	if nodeID == "" {
		_, err := d.eachNode(ctx, volumeID, func(a access) []string { return nodes(a.fence) }, func(n string) (bool, error) {
			return false, d.Unfence(ctx, volumeID, n)
		})
		return err
	}
	return d.withAccess(ctx, volumeID, func(ctx context.Context, v accessed) error { return d.unfenceNode(ctx, v, nodeID) })
}

// unfenceNode is Unfence of one node, on the access object withAccess
// read.
func (d *Driver) unfenceNode(ctx context.Context, v accessed, nodeID string) error {
	id, io, creds, a := v.id, v.io, v.creds, v.a
	f, ok := a.fence[nodeID]
	if !ok {
		return nil
	}
	conn, cdone, err := d.conns.Conn(ctx, creds)
	if err != nil {
		return err
	}
	defer cdone()
	for _, addr := range f.Addrs {
		if err := blocklist(conn, "rm", addr, 0); err != nil {
			return err
		}
	}
	return updateAccess(io, id, nil, fenceKey+nodeID)
}

// blocklist runs `osd blocklist add|rm addr [expire]` on the monitors. An
// rm of an entry that is gone (expired) succeeds.
func blocklist(conn *rados.Conn, op, addr string, expire time.Duration) error {
	cmd := map[string]any{"prefix": "osd blocklist", "blocklistop": op, "addr": addr}
	if op == "add" {
		// A JSON real: the monitor refuses an integer for a float field.
		cmd["expire"] = json.RawMessage(strconv.FormatFloat(expire.Seconds(), 'f', 1, 64))
	}
	b, _ := json.Marshal(cmd)
	_, info, err := conn.MonCommand(b)
	if err == nil {
		return nil
	}
	switch cephErrno(err) {
	case 2: // ENOENT: not listed (expired, or removed already)
		if op == "rm" {
			return nil
		}
	case 1, 13:
		if op == "rm" {
			return status.Errorf(codes.PermissionDenied, "osd blocklist rm %s: %s (%v): the Ceph user needs mon cap `allow command \"osd blocklist\" with blocklistop=rm` to lift a fence; without it the entry expires by itself", addr, info, err)
		}
	}
	return backendError(fmt.Errorf("%w: %s", err, info), "osd blocklist "+op+" "+addr)
}

// claimStage is NodeStageVolume's check and record before it maps: a
// volume another node staged, and that node not fenced, is
// FailedPrecondition naming the node and its client; otherwise this
// node's stage is recorded (with the clients known from an earlier stage,
// or none yet) and the image's watchers listed, for recordStageClients to
// tell this mapping's client by.
func (d *Driver) claimStage(ctx context.Context, creds Credentials, id volumeID) (before []string, err error) {
	d.rememberVolume(id, creds)
	aio, done, err := d.accessIO(ctx, creds, id)
	if err != nil {
		return nil, err
	}
	defer done()
	a, err := readAccess(aio, id)
	if err != nil {
		return nil, err
	}
	iio, _, idone, err := d.volumeIO(ctx, creds, id.pool)
	if err != nil {
		return nil, err
	}
	defer idone()
	watchers, lockers, _, err := liveClients(iio, id.image())
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for _, n := range nodes(a.stage) {
		s := a.stage[n]
		if n == d.opts.NodeID {
			continue
		}
		if f, ok := a.fence[n]; ok && f.covers(s.Addrs, now) {
			continue
		}
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is staged on node %s (%s) and RBD volumes are single-node: unstage it there, or ControllerUnpublishVolume it from %s, which fences that node", id, n, describeClients(s.Addrs, watchers, lockers), n)
	}
	if _, ok := a.stage[d.opts.NodeID]; !ok {
		if err := updateAccess(aio, id, map[string]any{stageKey + d.opts.NodeID: stageRecordCeph{Since: now}}); err != nil {
			return nil, err
		}
	}
	return append(watchers, lockerAddrs(lockers)...), nil
}

// recordStageClients records, after the map, the Ceph clients of this
// node's mapping: the watchers of the image that were not there before.
func (d *Driver) recordStageClients(ctx context.Context, creds Credentials, id volumeID, before []string) error {
	iio, _, idone, err := d.volumeIO(ctx, creds, id.pool)
	if err != nil {
		return err
	}
	defer idone()
	var mine []string
	// librbd registers the watch when it opens the image; the map tools
	// open it before they answer, but give a slow one a moment.
	for deadline := time.Now().Add(5 * time.Second); ; {
		watchers, _, _, err := liveClients(iio, id.image())
		if err != nil {
			return err
		}
		for _, w := range watchers {
			if !slices.Contains(before, w) && !slices.Contains(mine, w) {
				mine = append(mine, w)
			}
		}
		if len(mine) > 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(mine) == 0 {
		return nil // mapped before (a repeated stage): the record stands
	}
	aio, done, err := d.accessIO(ctx, creds, id)
	if err != nil {
		return err
	}
	defer done()
	a, err := readAccess(aio, id)
	if err != nil {
		return err
	}
	s := a.stage[d.opts.NodeID]
	for _, m := range mine {
		if !slices.Contains(s.Addrs, m) {
			s.Addrs = append(s.Addrs, m)
		}
	}
	if s.Since.IsZero() {
		s.Since = time.Now()
	}
	return updateAccess(aio, id, map[string]any{stageKey + d.opts.NodeID: s})
}

// releaseStage removes this node's stage record after an unstage (or a
// failed stage); the credentials are those of the stage, if this process
// served it, else any it has. One it cannot remove stays: the node then
// looks like one that still holds the volume, and is fenced, harmlessly
// (its clients are gone), at the next ControllerUnpublishVolume.
func (d *Driver) releaseStage(ctx context.Context, id volumeID) {
	creds, err := d.credsFor(ctx, id)
	if err == nil {
		var io *rados.IOContext
		var done func()
		if io, done, err = d.accessIO(ctx, creds, id); err == nil {
			err = updateAccess(io, id, nil, stageKey+d.opts.NodeID)
			done()
		}
	}
	if err != nil && status.Code(err) != codes.NotFound {
		d.opts.Logger.WarnContext(ctx, "could not remove the stage record of an unstaged volume; the node will be fenced (harmlessly) at its ControllerUnpublishVolume", "volume", id.String(), "error", err)
	}
}
