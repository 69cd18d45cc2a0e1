package driver

import (
	"strconv"
	"strings"
)

// Volume and snapshot IDs name where the object lives, so that every call
// finds it without a lookup:
//
//	volume   <pool ID>-<a><32 hex digits>                  image csi-vol-<a><hex>
//	snapshot <pool ID>-<a><volume hex>-<32 hex digits>     snapshot csi-snap-<hex> of that image
//
// The pool is named by its numeric ID, which survives a pool rename; <a>
// is the access type, "m" (mount) or "b" (block), upper case ("M", "B")
// for a volume made from a snapshot or volume: a clone or restore of the
// other type is refused, and DeleteVolume looks for a parent to reap,
// without a lookup.
const (
	imagePrefix   = "csi-vol-"
	deletedPrefix = "csi-del-" // a deleted volume kept for its snapshots or clones
	snapPrefix    = "csi-snap-"
	clonePrefix   = "csi-clone-" // the short-lived snapshot a volume clone is made from
)

// volumeID is a parsed volume ID.
type volumeID struct {
	pool  int64
	block bool
	clone bool // made from a content source: has (or had) a parent image
	hex   string
}

// kindChar is "m" or "b" for a mount or block volume, upper case for one
// made from a content source.
func kindChar(block, clone bool) string {
	c := "m"
	if block {
		c = "b"
	}
	if clone {
		c = strings.ToUpper(c)
	}
	return c
}

func (v volumeID) String() string    { return itoa(v.pool) + "-" + v.local() }
func (v volumeID) local() string     { return kindChar(v.block, v.clone) + v.hex }
func (v volumeID) image() string     { return imagePrefix + v.local() }
func (v volumeID) deleted() string   { return deletedPrefix + v.local() }
func (v volumeID) cloneSnap() string { return clonePrefix + v.local() }

// snapshotID is a parsed snapshot ID.
type snapshotID struct {
	vol volumeID
	hex string
}

func (s snapshotID) String() string { return s.vol.String() + "-" + s.hex }
func (s snapshotID) snap() string   { return snapPrefix + s.hex }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func isHex32(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

func parsePool(s string) (int64, bool) {
	if s == "" || len(s) > 19 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

// parseLocal parses the part of a volume ID after the pool, as image
// names carry it.
func parseLocal(pool int64, h string) (volumeID, bool) {
	if len(h) != 33 || !strings.ContainsRune("bmBM", rune(h[0])) || !isHex32(h[1:]) {
		return volumeID{}, false
	}
	return volumeID{pool: pool, block: h[0] == 'b' || h[0] == 'B', clone: h[0] < 'a', hex: h[1:]}, true
}

// parseVolumeID parses an ID from a request; anything else is not ours.
func parseVolumeID(s string) (volumeID, bool) {
	p, h, ok := strings.Cut(s, "-")
	if !ok {
		return volumeID{}, false
	}
	pool, ok := parsePool(p)
	if !ok {
		return volumeID{}, false
	}
	return parseLocal(pool, h)
}

// parseSnapshotID parses a snapshot ID from a request.
func parseSnapshotID(s string) (snapshotID, bool) {
	i := strings.LastIndexByte(s, '-')
	if i < 0 {
		return snapshotID{}, false
	}
	v, ok := parseVolumeID(s[:i])
	if !ok || !isHex32(s[i+1:]) {
		return snapshotID{}, false
	}
	return snapshotID{vol: v, hex: s[i+1:]}, true
}
