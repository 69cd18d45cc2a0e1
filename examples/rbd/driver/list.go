package driver

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/ceph/go-ceph/rbd"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/csi/validation"
)

// listPools returns the pools a listing covers: with secrets, the pools
// served with them so far (the request names no pool); without (ListVolumes
// and GetCapacity carry none), every pool served so far with the
// credentials it was served with.
func (d *Driver) listPools(_ context.Context, secrets map[string]string) ([]seenPool, error) {
	pools := d.seenPools()
	if len(secrets) > 0 {
		creds, err := CredentialsFromSecrets(secrets)
		if err != nil {
			return nil, err
		}
		for i := range pools {
			pools[i].creds = creds
		}
	}
	slices.SortFunc(pools, func(a, b seenPool) int { return strings.Compare(a.pool, b.pool) })
	return pools, nil
}

// skipPool reports whether a listing leaves pool out after err: a pool
// whose credentials may not (or no longer) list it is logged and skipped,
// so one pool cannot make every listing fail; a pool deleted since is
// skipped too.
func (d *Driver) skipPool(err error, pool string) bool {
	switch status.Code(err) {
	case codes.PermissionDenied, codes.NotFound:
		d.opts.Logger.Warn("listing skips a pool", "pool", pool, "error", err)
		return true
	}
	return false
}

func sortBy[T any](s []T, key func(T) string) {
	slices.SortFunc(s, func(a, b T) int { return strings.Compare(key(a), key(b)) })
}

// paginate returns the entries from the one whose key is tok (or the first
// after it) on, at most max (0 = all), and the key of the next one.
func paginate[T any](s []T, key func(T) string, tok string, max int32) ([]T, string) {
	start := 0
	if tok != "" {
		start, _ = slices.BinarySearchFunc(s, tok, func(e T, t string) int { return strings.Compare(key(e), t) })
	}
	s = s[start:]
	if max > 0 && int(max) < len(s) {
		return s[:max], key(s[max])
	}
	return s, ""
}

// ListVolumes lists the volumes in the pools this driver served, ordered
// by ID; the token is the ID to continue from.
func (d *Driver) ListVolumes(ctx context.Context, r *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	tok := r.GetStartingToken()
	if tok != "" {
		if _, ok := parseVolumeID(tok); !ok {
			return nil, status.Errorf(codes.Aborted, "starting_token %q was not returned by ListVolumes", tok)
		}
	}
	pools, err := d.listPools(ctx, nil)
	if err != nil {
		return nil, err
	}
	ctx, cancel := d.opCtx(ctx)
	defer cancel()
	type entry struct {
		id   volumeID
		pool seenPool
	}
	var all []entry
	for _, p := range pools {
		io, done, err := d.conns.IOContext(ctx, p.creds, p.pool, "")
		if d.skipPool(err, p.pool) {
			continue
		}
		if err != nil {
			return nil, err
		}
		names, err := rbd.GetImageNames(io)
		poolID := io.GetPoolID()
		done()
		if err != nil {
			err = backendError(err, "list images of pool "+p.pool)
			if d.skipPool(err, p.pool) {
				continue
			}
			return nil, err
		}
		for _, n := range names {
			if local, ok := strings.CutPrefix(n, imagePrefix); ok {
				if v, ok := parseLocal(poolID, local); ok {
					all = append(all, entry{id: v, pool: p})
				}
			}
		}
	}
	key := func(e entry) string { return e.id.String() }
	sortBy(all, key)
	page, next := paginate(all, key, tok, r.GetMaxEntries())
	out := &csi.ListVolumesResponse{NextToken: next}
	for _, e := range page {
		io, done, err := d.conns.IOContext(ctx, e.pool.creds, e.pool.pool, "")
		if err != nil {
			return nil, err
		}
		var size uint64
		if img, err := rbd.OpenImageReadOnly(io, e.id.image(), rbd.NoSnapshot); err == nil {
			size, _ = img.GetSize()
			_ = img.Close()
		}
		done()
		out.Entries = append(out.Entries, &csi.ListVolumesResponse_Entry{Volume: &csi.Volume{VolumeId: e.id.String(), CapacityBytes: int64(size)}})
	}
	return out, nil
}

// GetCapacity reports the pool's max_avail from `ceph df` (what the pool
// can still take, after replication). Without credentials served so far
// it reports 0: the request carries no secrets.
func (d *Driver) GetCapacity(ctx context.Context, r *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	params := r.GetParameters()
	pool := params[ParamPool]
	if pool == "" {
		pool = d.opts.DefaultPool
	}
	if zp := params[ParamZonePools]; zp != "" {
		pool = ""
		zone := r.GetAccessibleTopology().GetSegments()[TopologyKey]
		for _, kv := range strings.Split(zp, ",") {
			if z, p, ok := strings.Cut(strings.TrimSpace(kv), "="); ok && (z == zone || zone == "") {
				pool = p
				break
			}
		}
		if pool == "" {
			return &csi.GetCapacityResponse{}, nil
		}
	}
	pools := d.seenPools()
	if len(pools) == 0 {
		return &csi.GetCapacityResponse{}, nil
	}
	ctx, cancel := d.opCtx(ctx)
	defer cancel()
	conn, done, err := d.conns.Conn(ctx, pools[0].creds)
	if err != nil {
		return nil, err
	}
	defer done()
	cmd, _ := json.Marshal(map[string]string{"prefix": "df", "format": "json"})
	out, _, err := conn.MonCommand(cmd)
	if err != nil {
		return nil, backendError(err, "ceph df")
	}
	var df struct {
		Pools []struct {
			Name  string
			Stats struct {
				MaxAvail int64 `json:"max_avail"`
			}
		}
	}
	if err := json.Unmarshal(out, &df); err != nil {
		return nil, status.Errorf(codes.Internal, "ceph df: %v", err)
	}
	for _, p := range df.Pools {
		if p.Name == pool {
			return &csi.GetCapacityResponse{AvailableCapacity: p.Stats.MaxAvail}, nil
		}
	}
	return &csi.GetCapacityResponse{}, nil
}

// ValidateVolumeCapabilities confirms capabilities of an existing volume.
func (d *Driver) ValidateVolumeCapabilities(ctx context.Context, r *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	ctx, cancel := d.opCtx(ctx)
	defer cancel()
	_, closeImg, err := d.openVolume(ctx, r.GetVolumeId(), r.GetSecrets(), true)
	if err != nil {
		return nil, err
	}
	closeImg()
	if err := checkCaps(r.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	return validation.Confirm(r, &validation.Config{}), nil
}
