package driver

import (
	"context"
	"sort"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/topology"
)

// requestFrom is the request of the create or delete whose journal call
// runs in ctx: csikit's idempotency layer puts it there.
func requestFrom(ctx context.Context) any {
	req, _ := journal.Request(ctx)
	return req
}

// Journal returns the journal csikit's idempotency layer uses: it routes
// every call to the OmapJournal of the pool the request concerns, with the
// request's credentials, and makes the reserved IDs carry the pool (see
// ids.go).
func (d *Driver) Journal() journal.Journal { return requestJournal{d} }

type requestJournal struct{ d *Driver }

func secretsOf(req any) map[string]string {
	if r, ok := req.(interface{ GetSecrets() map[string]string }); ok {
		return r.GetSecrets()
	}
	return nil
}

func (j requestJournal) creds(ctx context.Context) (Credentials, error) {
	req := requestFrom(ctx)
	if req == nil {
		return Credentials{}, status.Error(codes.Internal, "journal: called outside a request: the journal needs the request's secrets and pool")
	}
	return CredentialsFromSecrets(secretsOf(req))
}

// byPoolID returns the journal of the pool with the given ID.
func (j requestJournal) byPoolID(ctx context.Context, pool int64) (*OmapJournal, error) {
	creds, err := j.creds(ctx)
	if err != nil {
		return nil, err
	}
	name, err := j.d.poolName(ctx, creds, pool)
	if err != nil {
		return nil, err
	}
	return j.d.journal(creds, name), nil
}

// byID returns the journal of an ID's pool, or nil for an ID not ours.
func (j requestJournal) byID(ctx context.Context, kind journal.Kind, id string) (*OmapJournal, error) {
	var pool int64
	switch kind {
	case journal.KindVolume:
		v, ok := parseVolumeID(id)
		if !ok {
			return nil, nil
		}
		pool = v.pool
	case journal.KindSnapshot:
		s, ok := parseSnapshotID(id)
		if !ok {
			return nil, nil
		}
		pool = s.vol.pool
	default:
		return nil, status.Errorf(codes.Unimplemented, "journal: %s is not supported", kind)
	}
	j2, err := j.byPoolID(ctx, pool)
	if status.Code(err) == codes.NotFound {
		return nil, nil // the pool is gone, and everything in it
	}
	return j2, err
}

// forName returns the journal a create's name is reserved in, and the ID
// prefix the pool gives the reserved ID.
func (j requestJournal) forName(ctx context.Context, kind journal.Kind) (*OmapJournal, string, error) {
	creds, err := j.creds(ctx)
	if err != nil {
		return nil, "", err
	}
	switch r := requestFrom(ctx).(type) {
	case *csi.CreateVolumeRequest:
		if kind != journal.KindVolume {
			break
		}
		pool, _, err := j.d.choosePool(r)
		if err != nil {
			return nil, "", err
		}
		id, err := j.d.poolID(ctx, creds, pool)
		if err != nil {
			return nil, "", err
		}
		return j.d.journal(creds, pool), itoa(id) + "-" + kindChar(wantsBlock(r.GetVolumeCapabilities()), r.GetVolumeContentSource() != nil), nil
	case *csi.CreateSnapshotRequest:
		if kind != journal.KindSnapshot {
			break
		}
		v, ok := parseVolumeID(r.GetSourceVolumeId())
		if !ok {
			return nil, "", status.Errorf(codes.NotFound, "source volume %q does not exist", r.GetSourceVolumeId())
		}
		jr, err := j.byPoolID(ctx, v.pool)
		if err != nil {
			return nil, "", err
		}
		return jr, v.String() + "-", nil
	}
	return nil, "", status.Errorf(codes.Internal, "journal: no create request for a %s in the context", kind)
}

// Reserve implements journal.Journal: r.ID (32 hex digits from
// csikit's RandomID) becomes the local part of a pool-qualified ID.
func (j requestJournal) Reserve(ctx context.Context, r journal.Reservation) (journal.Record, error) {
	if r.Kind == journal.KindFence {
		return fenceJournal(j).reserve(ctx, r)
	}
	jr, prefix, err := j.forName(ctx, r.Kind)
	if err != nil {
		return journal.Record{}, err
	}
	if !isHex32(r.ID) {
		return journal.Record{}, status.Errorf(codes.Internal, "journal: NewID gave %q, want 32 hex digits", r.ID)
	}
	r.ID = prefix + r.ID
	rec, err := jr.Reserve(ctx, r)
	if err == nil {
		// Only now is the pool known to be this user's to write: the
		// calls without secrets (ListVolumes, GetCapacity, the sweep)
		// may use it with these credentials.
		j.d.remember(jr.creds, jr.pool)
	}
	return rec, err
}

// Commit implements journal.Journal.
func (j requestJournal) Commit(ctx context.Context, kind journal.Kind, name, id string, response []byte) error {
	if kind == journal.KindFence {
		return fenceJournal(j).commit(ctx, name)
	}
	jr, err := j.byID(ctx, kind, id)
	if err != nil {
		return err
	}
	if jr == nil {
		return status.Errorf(codes.Internal, "journal: commit of %s %q: not an ID of this driver", kind, id)
	}
	return jr.Commit(ctx, kind, name, id, response)
}

// LookupName implements journal.Journal.
func (j requestJournal) LookupName(ctx context.Context, kind journal.Kind, name string) (journal.Record, bool, error) {
	if kind == journal.KindFence {
		return fenceJournal(j).read(ctx, name)
	}
	jr, _, err := j.forName(ctx, kind)
	if err != nil {
		return journal.Record{}, false, err
	}
	return jr.LookupName(ctx, kind, name)
}

// LookupID implements journal.Journal.
func (j requestJournal) LookupID(ctx context.Context, kind journal.Kind, id string) (journal.Record, bool, error) {
	if kind == journal.KindFence {
		return fenceJournal(j).read(ctx, id)
	}
	jr, err := j.byID(ctx, kind, id)
	if err != nil || jr == nil {
		return journal.Record{}, false, err
	}
	return jr.LookupID(ctx, kind, id)
}

// Release implements journal.Journal.
func (j requestJournal) Release(ctx context.Context, kind journal.Kind, id string) error {
	if kind == journal.KindFence {
		return fenceJournal(j).release(ctx, id)
	}
	jr, err := j.byID(ctx, kind, id)
	if err != nil || jr == nil {
		return err
	}
	return jr.Release(ctx, kind, id)
}

// poolName resolves a pool ID; a missing pool is NotFound.
func (d *Driver) poolName(ctx context.Context, creds Credentials, id int64) (string, error) {
	conn, done, err := d.conns.Conn(ctx, creds)
	if err != nil {
		return "", err
	}
	defer done()
	name, err := conn.GetPoolByID(id)
	if err != nil {
		if cephErrno(err) == 2 {
			return "", status.Errorf(codes.NotFound, "Ceph pool %d does not exist", id)
		}
		return "", backendError(err, "look up pool")
	}
	return name, nil
}

// poolID resolves a pool name; a missing pool is InvalidArgument (it came
// from the StorageClass).
func (d *Driver) poolID(ctx context.Context, creds Credentials, name string) (int64, error) {
	conn, done, err := d.conns.Conn(ctx, creds)
	if err != nil {
		return 0, err
	}
	defer done()
	id, err := conn.GetPoolByName(name)
	if err != nil {
		if cephErrno(err) == 2 {
			return 0, status.Errorf(codes.InvalidArgument, "Ceph pool %q (parameter %q) does not exist", name, ParamPool)
		}
		return 0, backendError(err, "look up pool")
	}
	return id, nil
}

// choosePool picks the pool of a new volume and, with ParamZonePools, the
// zone it is accessible from.
func (d *Driver) choosePool(r *csi.CreateVolumeRequest) (pool, zone string, err error) {
	params := r.GetParameters()
	zp := params[ParamZonePools]
	if zp == "" {
		if p := params[ParamPool]; p != "" {
			return p, "", nil
		}
		return d.opts.DefaultPool, "", nil
	}
	pools := map[string]string{}
	var avail []*csi.Topology
	for _, kv := range strings.Split(zp, ",") {
		z, p, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || z == "" || p == "" {
			return "", "", status.Errorf(codes.InvalidArgument, "parameter %q: %q is not zone=pool", ParamZonePools, kv)
		}
		pools[z] = p
	}
	zones := make([]string, 0, len(pools))
	for z := range pools {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	for _, z := range zones {
		avail = append(avail, &csi.Topology{Segments: map[string]string{TopologyKey: z}})
	}
	sel, err := topology.Select(r.GetAccessibilityRequirements(), avail, 1)
	if err != nil {
		return "", "", err
	}
	z := sel[0].GetSegments()[TopologyKey]
	return pools[z], z, nil
}
