package driver

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ceph/go-ceph/rados"
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
// by ID; the token is the ID to continue from. A page costs what its
// entries cost, wherever it starts: each pool's volumes are read from
// librbd's directory object (rbd_directory, whose omap keys
// "name_<image>" are sorted) from the token on, and each entry's size is
// the one the driver recorded in the journal at create or expand
// (sizesObject, one read per page); a volume without one (made by an
// older version) has its size read from its image header's omap (one
// read, several at a time), not by opening the image.
func (d *Driver) ListVolumes(ctx context.Context, r *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	tok := r.GetStartingToken()
	var from volumeID
	if tok != "" {
		var ok bool
		if from, ok = parseVolumeID(tok); !ok {
			return nil, status.Errorf(codes.Aborted, "starting_token %q was not returned by ListVolumes", tok)
		}
	}
	pools, err := d.listPools(ctx, nil)
	if err != nil {
		return nil, err
	}
	ctx, cancel := d.opCtx(ctx)
	defer cancel()
	max := int(r.GetMaxEntries())
	// IDs are "<pool ID>-<local>": pools in the order of that prefix,
	// then each pool's volumes in the order of their image names.
	type poolAt struct {
		p  seenPool
		id int64
	}
	var ordered []poolAt
	for _, p := range pools {
		io, done, err := d.conns.IOContext(ctx, p.creds, p.pool, "")
		if d.skipPool(err, p.pool) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ordered = append(ordered, poolAt{p, io.GetPoolID()})
		done()
	}
	slices.SortFunc(ordered, func(a, b poolAt) int { return strings.Compare(itoa(a.id)+"-", itoa(b.id)+"-") })
	out := &csi.ListVolumesResponse{}
	for _, pa := range ordered {
		startKey := ""
		if tok != "" {
			switch c := strings.Compare(itoa(pa.id)+"-", itoa(from.pool)+"-"); {
			case c < 0:
				continue
			case c == 0:
				startKey = dirKeyFrom(from.local())
			}
		}
		want := 0 // all
		if max > 0 {
			want = max - len(out.Entries) + 1 // one more: the next token
		}
		entries, err := d.poolVolumes(ctx, pa.p, pa.id, startKey, want)
		if d.skipPool(err, pa.p.pool) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if max > 0 && len(out.Entries) == max {
				out.NextToken = e.GetVolumeId()
				return out, nil
			}
			out.Entries = append(out.Entries, &csi.ListVolumesResponse_Entry{Volume: e})
		}
	}
	return out, nil
}

// dirEntryPrefix is what the rbd_directory omap keys of the driver's
// images start with.
const dirEntryPrefix = "name_" + imagePrefix

// dirKeyFrom is the omap start_after for a listing of rbd_directory from
// the image of local on, included: the greatest key before it among keys
// of that length (every local has the same length, its last character a
// hex digit).
func dirKeyFrom(local string) string {
	k := dirEntryPrefix + local
	return k[:len(k)-1] + string(k[len(k)-1]-1) + "\xff"
}

// listWorkers is how many header reads a ListVolumes page has in flight.
const listWorkers = 16

// poolVolumes returns up to want (0: all) of the volumes in pool p (ID
// id) whose rbd_directory key sorts after startKey, in order, with their
// sizes (recorded, else from the header).
func (d *Driver) poolVolumes(ctx context.Context, p seenPool, id int64, startKey string, want int) ([]*csi.Volume, error) {
	io, done, err := d.conns.IOContext(ctx, p.creds, p.pool, "")
	if err != nil {
		return nil, err
	}
	defer done()
	type entry struct {
		vol     volumeID
		imageID string
	}
	// The sizes the driver recorded (sizesObject) are read alongside:
	// one chunk from the same start, in flight with the directory read.
	jio, jdone, err := d.conns.IOContext(ctx, p.creds, p.pool, JournalNamespace)
	if err != nil {
		return nil, err
	}
	defer jdone()
	sizeChunk := int64(1000)
	if want > 0 {
		sizeChunk = int64(want)
	}
	sizes := map[string]int64{}
	var sizesAfter string
	var sizesRead int
	var sizesErr error
	sizesDone := make(chan struct{})
	go func() {
		defer close(sizesDone)
		sizesAfter, sizesRead, sizesErr = sizesChunk(jio, imageFromDirKey(startKey), sizeChunk, sizes)
	}()
	defer func() { <-sizesDone }()
	var found []entry
	for after := startKey; want == 0 || len(found) < want; {
		chunk := int64(1000)
		if want > 0 {
			chunk = min(chunk, int64(want-len(found)))
		}
		n := 0
		err := io.ListOmapValues("rbd_directory", after, dirEntryPrefix, chunk, func(k string, v []byte) {
			n++
			after = k
			if vol, ok := parseLocal(id, strings.TrimPrefix(k, dirEntryPrefix)); ok {
				if imageID, ok := decodeString(v); ok {
					found = append(found, entry{vol, imageID})
				}
			}
		})
		if errors.Is(err, rados.ErrNotFound) {
			break // no image ever made in the pool
		}
		if err != nil {
			return nil, backendError(err, "list images of pool "+p.pool)
		}
		if n == 0 { // the OSD may return fewer than asked: stop at none
			break
		}
	}
	out := make([]*csi.Volume, len(found))
	if len(found) == 0 {
		return out, nil
	}
	// The recorded sizes the first chunk did not reach (stale records
	// in the range, or a listing of more than a chunk); then the headers
	// of the volumes without one (made by older versions), several at a
	// time.
	<-sizesDone
	if sizesErr == nil && sizesRead > 0 {
		sizesErr = moreSizes(jio, sizesAfter, found[len(found)-1].vol.image(), sizeChunk, sizes)
	}
	if sizesErr != nil {
		return nil, backendError(sizesErr, "journal: read the sizes of pool "+p.pool)
	}
	var missing []int
	for i, e := range found {
		out[i] = &csi.Volume{VolumeId: e.vol.String()}
		if s, ok := sizes[e.vol.image()]; ok {
			out[i].CapacityBytes = s
		} else {
			missing = append(missing, i)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(listWorkers, len(missing)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := int(next.Add(1)) - 1; j < len(missing); j = int(next.Add(1)) - 1 {
				e := found[missing[j]]
				out[missing[j]].CapacityBytes = int64(headerSize(io, e.vol.image(), e.imageID))
			}
		}()
	}
	wg.Wait()
	return out, nil
}

// headerSize is the size of the image named name with ID imageID: the
// "size" key of its header object's omap (format 2 images; one read), or,
// failing that, what opening the image says (0 if neither answers: the
// image was removed meanwhile).
func headerSize(io *rados.IOContext, name, imageID string) uint64 {
	op := rados.CreateReadOp()
	step := op.GetOmapValuesByKeys([]string{"size"})
	err := op.Operate(io, "rbd_header."+imageID, rados.OperationNoFlag)
	var size []byte
	if err == nil {
		for {
			kv, err := step.Next()
			if err != nil || kv == nil {
				break
			}
			if kv.Key == "size" {
				size = append([]byte(nil), kv.Value...)
			}
		}
	}
	op.Release()
	if len(size) == 8 {
		return binary.LittleEndian.Uint64(size)
	}
	img, err := rbd.OpenImageReadOnly(io, name, rbd.NoSnapshot)
	if err != nil {
		return 0
	}
	defer img.Close()
	n, _ := img.GetSize()
	return n
}

// decodeString decodes a string as Ceph's encoding writes it (a 32-bit
// little-endian length, then the bytes), as rbd_directory's values are.
func decodeString(b []byte) (string, bool) {
	if len(b) < 4 || uint64(len(b)-4) != uint64(binary.LittleEndian.Uint32(b)) {
		return "", false
	}
	return string(b[4:]), true
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
