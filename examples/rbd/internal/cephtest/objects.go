package cephtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ceph/go-ceph/rados"
	"github.com/ceph/go-ceph/rbd"
)

// BackendObjects returns a sanity.Config.BackendObjects for the rbd
// driver's objects in pool, read through conn (an admin connection): every
// image ("image <name>"), every snapshot of an image ("snapshot
// <image>@<snap>"), every image in the RBD trash ("trash <name> <id>"), and
// every object in the journal's RADOS namespace, named with the CSI name
// and ID its omap holds ("journal <oid> name=<name> id=<id>"). Images
// deleted while it looks at them are skipped.
//
// One kind of journal record is left out: a reservation that was never
// committed (with its ID object). The SDK keeps such a reservation on
// purpose after a create failed with an error that does not prove no
// object was made (idempotency's releasable: NotFound for a missing
// content source is one), so that a retry reuses the ID; the driver's
// Sweep removes it once its lease expires, minutes later. Listing it only
// after the lease would blame whichever case runs then. What such a create
// may have made in the pool (an image) is listed like any other image.
func BackendObjects(conn *rados.Conn, pool, journalNamespace string) func(context.Context) ([]string, error) {
	return func(context.Context) ([]string, error) {
		io, err := conn.OpenIOContext(pool)
		if err != nil {
			return nil, fmt.Errorf("open pool %s: %w", pool, err)
		}
		defer io.Destroy()
		var out []string
		images, err := rbd.GetImageNames(io)
		if err != nil {
			return nil, fmt.Errorf("list images: %w", err)
		}
		for _, name := range images {
			out = append(out, "image "+name)
			img, err := rbd.OpenImageReadOnly(io, name, rbd.NoSnapshot)
			if errors.Is(err, rbd.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("open image %s: %w", name, err)
			}
			snaps, err := img.GetSnapshotNames()
			_ = img.Close()
			if err != nil && !errors.Is(err, rbd.ErrNotFound) {
				return nil, fmt.Errorf("list snapshots of %s: %w", name, err)
			}
			for _, s := range snaps {
				out = append(out, "snapshot "+name+"@"+s.Name)
			}
		}
		trash, err := rbd.GetTrashList(io)
		if err != nil {
			return nil, fmt.Errorf("list trash: %w", err)
		}
		for _, e := range trash {
			out = append(out, "trash "+e.Name+" "+e.Id)
		}
		io.SetNamespace(journalNamespace)
		journal, err := journalObjects(io)
		if err != nil {
			return nil, fmt.Errorf("the journal namespace %s: %w", journalNamespace, err)
		}
		out = append(out, journal...)
		slices.Sort(out)
		return out, nil
	}
}

// journalObjects lists the journal objects in io's namespace, less
// uncommitted reservations and their ID objects.
func journalObjects(io *rados.IOContext) ([]string, error) {
	var oids []string
	if err := io.ListObjects(func(oid string) { oids = append(oids, oid) }); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	omaps := map[string]map[string][]byte{}
	uncommitted := map[string]bool{} // kind + " " + name
	for _, oid := range oids {
		m, err := io.GetAllOmapValues(oid, "", "", 256)
		if errors.Is(err, rados.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the omap of %s: %w", oid, err)
		}
		omaps[oid] = m
		kind, what, _ := strings.Cut(oid, ".")
		if !strings.HasPrefix(what, "name.") || string(m["committed"]) == "1" {
			continue
		}
		uncommitted[kind+" "+string(m["name"])] = true
	}
	var out []string
	for _, oid := range oids {
		m, ok := omaps[oid]
		if !ok {
			continue
		}
		kind, _, _ := strings.Cut(oid, ".")
		if uncommitted[kind+" "+string(m["name"])] {
			continue
		}
		desc := fmt.Sprintf("journal %s name=%q", oid, m["name"])
		if id, ok := m["id"]; ok {
			desc += fmt.Sprintf(" id=%q", id)
		}
		out = append(out, desc)
	}
	return out, nil
}
