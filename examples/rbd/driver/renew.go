package driver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/ceph/go-ceph/rados"
)

// RenewFences keeps every fence in force while its node stays fenced: a
// loop, until ctx ends (it then returns nil), that every quarter of
// Options.FenceExpiry (at most hourly) finds the fences of every pool its
// credentials can list — the standing ones (Options.SecretsDir) and those
// requests brought since the start — and renews each whose blocklist
// entries have less than half of Options.FenceExpiry left. Run it in the
// controller (cmd: a part of the runner group, stopped on shutdown); its
// errors are logged and retried at the next tick.
//
// Ceph cannot extend a blocklist entry: `osd blocklist add` of a listed
// address keeps the old expiry (the OSD map inserts new entries without
// overwriting). So a renewal removes each entry and adds it back with
// the full expiry, two OSD map epochs apart: for that moment (about a
// second, once every half expiry) the fenced client is not blocklisted.
// Without renewal, a node hung for longer than the expiry would write
// again freely once it woke. The README's "How long a fence lasts" weighs
// the two.
func (d *Driver) RenewFences(ctx context.Context) error {
	every := min(d.opts.FenceExpiry/4, time.Hour)
	every = max(every, time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, err := d.renewFences(ctx); err != nil && ctx.Err() == nil {
			d.opts.Logger.WarnContext(ctx, "fence renewal failed; trying again later", "renewed", n, "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// renewFences is one pass of RenewFences: it returns how many fences it
// renewed.
func (d *Driver) renewFences(ctx context.Context) (int, error) {
	var cands []Credentials
	if c, ok, err := d.standing(); ok {
		cands = append(cands, c)
	} else if err != nil {
		d.opts.Logger.WarnContext(ctx, "fence renewal: no standing credentials", "error", err)
	}
	d.fence.mu.Lock()
	for _, c := range d.fence.creds {
		cands = append(cands, c)
	}
	d.fence.mu.Unlock()
	for _, s := range d.seenPools() {
		cands = append(cands, s.creds)
	}
	cands = append(cands, d.conns.Credentials()...)
	seen := map[string]bool{} // credentials and pools done
	renewed := 0
	var errs []error
	for _, c := range cands {
		if seen[c.fingerprint()] {
			continue
		}
		seen[c.fingerprint()] = true
		n, err := d.renewWith(ctx, c, seen)
		renewed += n
		errs = append(errs, err)
	}
	return renewed, errors.Join(errs...)
}

// renewWith renews the fences of the pools creds can list that no
// earlier credentials covered (done).
func (d *Driver) renewWith(ctx context.Context, creds Credentials, done map[string]bool) (int, error) {
	conn, release, err := d.conns.Conn(ctx, creds)
	if err != nil {
		return 0, err
	}
	defer release()
	pools, err := conn.ListPools()
	if err != nil {
		return 0, backendError(err, "list the pools")
	}
	renewed := 0
	var errs []error
	for _, pool := range pools {
		if done["pool\x00"+pool] || ctx.Err() != nil {
			continue
		}
		n, ok, err := d.renewPool(ctx, conn, pool)
		renewed += n
		if ok {
			done["pool\x00"+pool] = true
		}
		errs = append(errs, err)
	}
	return renewed, errors.Join(errs...)
}

// renewPool renews the fences recorded in pool's access objects. ok is
// false if these credentials may not list the pool's access namespace
// (other credentials may).
func (d *Driver) renewPool(ctx context.Context, conn *rados.Conn, pool string) (n int, ok bool, err error) {
	// A private I/O context: the renewal reads object versions, which a
	// shared one would mix up.
	io, err := conn.OpenIOContext(pool)
	if err != nil {
		return 0, false, nil
	}
	defer io.Destroy()
	io.SetNamespace(AccessNamespace)
	it, err := io.Iter()
	if err != nil {
		return 0, false, nil
	}
	defer it.Close()
	var objs []string
	for it.Next() {
		objs = append(objs, it.Value())
	}
	if err := it.Err(); err != nil {
		d.opts.Logger.DebugContext(ctx, "fence renewal: cannot list a pool's access objects", "pool", pool, "error", err)
		return 0, false, nil
	}
	var errs []error
	for _, oid := range objs {
		if ctx.Err() != nil {
			break
		}
		r, err := d.renewObject(ctx, conn, io, pool, oid)
		n += r
		errs = append(errs, err)
	}
	return n, true, errors.Join(errs...)
}

// renewObject renews the fences of one access object that are due. Each
// renewal is claimed first (the record's renewing time, written onto the
// version read), so that of several renewers (controller replicas) one
// removes and re-adds the entries: two would each open a moment without
// them. A claim older than renewClaim is taken over (its renewer died).
func (d *Driver) renewObject(ctx context.Context, conn *rados.Conn, io *rados.IOContext, pool, oid string) (int, error) {
	fences, ver, err := readFences(io, oid)
	if err != nil || len(fences) == 0 {
		return 0, err
	}
	expiry := d.opts.FenceExpiry
	claimFor := min(time.Minute+4*d.opts.OpTimeout, expiry/4)
	renewed := 0
	for _, node := range nodes(fences) {
		f := fences[node]
		now := time.Now()
		if f.Until.Sub(now) >= expiry/2 || (f.Renewing != nil && now.Sub(*f.Renewing) < claimFor) {
			continue
		}
		f.Renewing = &now
		switch v, err := writeFence(io, oid, node, f, ver); {
		case raced(err):
			return renewed, nil // another renewer, or a fence or unfence: next tick
		case err != nil:
			return renewed, err
		default:
			ver = v
		}
		d.opts.Logger.DebugContext(ctx, "renewing a fence: its blocklist entries are removed and added back", "pool", pool, "object", oid, "node", node, "clients", f.Addrs)
		var gap time.Duration
		for _, addr := range f.Addrs {
			// rm and add are two proposals, so two epochs: an rm and an
			// add in one epoch would leave no entry at all. Each command
			// answers once its proposal is committed.
			if err := blocklist(conn, "rm", addr, 0); err != nil {
				return renewed, err
			}
			t0 := time.Now()
			if err := blocklist(conn, "add", addr, expiry); err != nil {
				return renewed, err
			}
			gap = max(gap, time.Since(t0))
		}
		if err := conn.WaitForLatestOSDMap(); err != nil {
			return renewed, backendError(err, "wait for the OSD map with the renewed blocklist")
		}
		f.Until, f.Renewing = time.Now().Add(expiry), nil
		// Only onto the claimed record: an Unfence since then removed
		// the record and the entries, and the entries just added go too.
		v, err := writeFence(io, oid, node, f, ver)
		if raced(err) {
			if now, _, rerr := readFences(io, oid); rerr == nil {
				if _, still := now[node]; !still {
					for _, addr := range f.Addrs {
						_ = blocklist(conn, "rm", addr, 0)
					}
					continue
				}
			}
			// A fence of the node meanwhile (new clients): the entries
			// are renewed; the record is, once its claim is stale.
			d.opts.Logger.DebugContext(ctx, "fence renewal: the access object changed meanwhile", "pool", pool, "object", oid)
			return renewed + 1, nil
		}
		if err != nil {
			return renewed, err
		}
		ver = v
		renewed++
		d.opts.Logger.InfoContext(ctx, "renewed a fence", "pool", pool, "object", oid, "node", node, "clients", f.Addrs, "until", f.Until, "unlisted_for", gap)
	}
	return renewed, nil
}

// writeFence writes node's fence record f into access object oid if the
// object is still at version ver, and returns the new version.
func writeFence(io *rados.IOContext, oid, node string, f fenceRecord, ver uint64) (uint64, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return 0, err
	}
	op := rados.CreateWriteOp()
	defer op.Release()
	op.AssertVersion(ver)
	op.SetOmap(map[string][]byte{fenceKey + node: b})
	if err := op.Operate(io, oid, rados.OperationNoFlag); err != nil {
		if raced(err) {
			return 0, err
		}
		return 0, backendError(err, "record the fence of node "+node+" in "+oid)
	}
	v, err := io.GetLastVersion()
	if err != nil {
		return 0, backendError(err, "version of access object "+oid)
	}
	return v, nil
}

// raced reports whether err is a failed version assertion: the object
// was written since it was read (ERANGE, or EOVERFLOW for an older one).
func raced(err error) bool {
	n := cephErrno(err)
	return n == 34 || n == 75
}

// readFences reads the fence/<node> records of access object oid and the
// object's version.
func readFences(io *rados.IOContext, oid string) (map[string]fenceRecord, uint64, error) {
	m, ver, ok, err := readOmapPrefix(io, oid, fenceKey)
	if err != nil {
		return nil, 0, backendError(err, "read access object "+oid)
	}
	if !ok {
		return nil, 0, nil
	}
	out := map[string]fenceRecord{}
	for k, v := range m {
		var f fenceRecord
		if err := json.Unmarshal(v, &f); err != nil {
			continue
		}
		out[strings.TrimPrefix(k, fenceKey)] = f
	}
	return out, ver, nil
}
