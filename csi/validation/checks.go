package validation

import (
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// The checks below look at one value each and never echo a string of the
// request back: problems carry field sizes, indexes, integers, enum names and
// the code point of a banned character only.

const isRequired = "is required"

// checkID checks an opaque identifier: non-empty when required, at most
// limit bytes, no NUL.
func checkID(s string, limit int, required bool) problem {
	if s == "" {
		if required {
			return invalid(isRequired)
		}
		return passed
	}
	if len(s) > limit {
		return invalid("is %d bytes, want at most %d", len(s), limit)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return invalid("contains a NUL byte")
	}
	return passed
}

// checkName checks a CO-chosen name: required, at most limit bytes, valid
// UTF-8 and free of the control characters the spec bans (U+0000–U+0008,
// U+000B, U+000C, U+000E–U+001F, U+007F–U+009F).
func checkName(s string, limit int) problem {
	if s == "" {
		return invalid(isRequired)
	}
	if len(s) > limit {
		return invalid("is %d bytes, want at most %d", len(s), limit)
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return invalid("is not valid UTF-8")
			}
		}
		if bannedRune(r) {
			return invalid("contains control character U+%04X, which the spec bans", r)
		}
	}
	return passed
}

func bannedRune(r rune) bool {
	return r <= 0x08 || r == 0x0B || r == 0x0C ||
		(r >= 0x0E && r <= 0x1F) || (r >= 0x7F && r <= 0x9F)
}

// checkPath checks a node path. Paths have no length cap (kubelet's exceed
// 128 bytes); they must be absolute, without NUL and without ".." elements.
// A relative path yields relative, which lets lookups answer NotFound.
func checkPath(p string, required bool, relative func(string, ...any) problem) problem {
	if p == "" {
		if required {
			return invalid(isRequired)
		}
		return passed
	}
	if strings.IndexByte(p, 0) >= 0 {
		return invalid("contains a NUL byte")
	}
	if !filepath.IsAbs(p) {
		return relative("must be an absolute path, got a relative one")
	}
	if hasDotDot(p) {
		return invalid(`must not contain ".." elements`)
	}
	return passed
}

// hasDotDot reports whether a path element of p is "..". Elements are split
// at '/' and at the OS separator.
func hasDotDot(p string) bool {
	if !strings.Contains(p, "..") {
		return false
	}
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' || p[i] == filepath.Separator {
			if i-start == 2 && p[start] == '.' && p[start+1] == '.' {
				return true
			}
			start = i + 1
		}
	}
	return false
}

// checkCapability checks one VolumeCapability: an access type and an access
// mode must be set. With supported, both must also be ones cfg allows;
// without, only presence is checked (ValidateVolumeCapabilities, GetCapacity).
func checkCapability(c *csi.VolumeCapability, cfg *Config, supported bool) problem {
	if c == nil {
		return invalid(isRequired)
	}
	var t AccessType
	switch {
	case c.GetMount() != nil:
		t = Mount
		n := 0
		for _, f := range c.GetMount().GetMountFlags() {
			n += len(f)
		}
		if n > MaxMountFlagsBytes {
			return invalid("total %d bytes, want at most %d", n, MaxMountFlagsBytes).under(".mount.mount_flags")
		}
	case c.GetBlock() != nil:
		t = Block
	default:
		return invalid("is required: set mount or block").under(".access_type")
	}
	if supported && cfg.accessTypes()&t == 0 {
		return invalid("access type is not supported by this driver (supported: %s)", cfg.accessTypes()).under("." + t.String())
	}
	if c.GetAccessMode() == nil {
		return invalid(isRequired).under(".access_mode")
	}
	m := c.GetAccessMode().GetMode()
	if m == csi.VolumeCapability_AccessMode_UNKNOWN {
		return invalid("is required (UNKNOWN is not a mode)").under(".access_mode.mode")
	}
	if supported && !cfg.modeAllowed(m) {
		return invalid("%s is not supported by this driver", m).under(".access_mode.mode")
	}
	return passed
}

// checkCapabilities checks a repeated VolumeCapability field.
func checkCapabilities(cs []*csi.VolumeCapability, cfg *Config, required, supported bool) problem {
	if len(cs) == 0 {
		if required {
			return invalid(isRequired)
		}
		return passed
	}
	for i, c := range cs {
		if p := checkCapability(c, cfg, supported); p.failed() {
			return p.at(i)
		}
	}
	return passed
}

// checkCapacity checks a CapacityRange. Neither bound may be negative and
// limit_bytes, when set, may not be below required_bytes. A required range
// must set at least one bound; an optional all-zero range means "unspecified".
func checkCapacity(r *csi.CapacityRange, required bool) problem {
	if r == nil {
		if required {
			return invalid(isRequired)
		}
		return passed
	}
	req, lim := r.GetRequiredBytes(), r.GetLimitBytes()
	switch {
	case req < 0:
		return invalid("must not be negative, got %d", req).under(".required_bytes")
	case lim < 0:
		return invalid("must not be negative, got %d", lim).under(".limit_bytes")
	case required && req == 0 && lim == 0:
		return invalid("must set required_bytes or limit_bytes")
	case lim > 0 && req > lim:
		return invalid("(%d) is less than required_bytes (%d)", lim, req).under(".limit_bytes")
	}
	return passed
}

// checkContentSource checks CreateVolume's volume_content_source against the
// kinds cfg enables.
func checkContentSource(s *csi.VolumeContentSource, cfg *Config) problem {
	switch {
	case s == nil:
		return passed
	case s.GetSnapshot() != nil:
		if !cfg.ContentSources.Snapshot {
			return invalid("is not supported: this driver cannot create volumes from snapshots").under(".snapshot")
		}
		return checkID(s.GetSnapshot().GetSnapshotId(), cfg.maxID(), true).under(".snapshot.snapshot_id")
	case s.GetVolume() != nil:
		if !cfg.ContentSources.Volume {
			return invalid("is not supported: this driver cannot clone volumes").under(".volume")
		}
		return checkID(s.GetVolume().GetVolumeId(), cfg.maxID(), true).under(".volume.volume_id")
	}
	return invalid("must name a snapshot or a volume")
}

// checkTopology checks a TopologyRequirement: when present it lists
// requisite or preferred topologies.
func checkTopology(t *csi.TopologyRequirement) problem {
	if t != nil && len(t.GetRequisite()) == 0 && len(t.GetPreferred()) == 0 {
		return invalid("must list requisite or preferred topologies")
	}
	return passed
}

// checkIDs checks a repeated ID field: non-empty when required, each element
// a valid ID.
func checkIDs(ids []string, limit int, required bool) problem {
	if len(ids) == 0 {
		if required {
			return invalid(isRequired)
		}
		return passed
	}
	for i, id := range ids {
		if p := checkID(id, limit, true); p.failed() {
			return p.at(i)
		}
	}
	return passed
}

func checkNonNegative(n int64) problem {
	if n < 0 {
		return invalid("must not be negative, got %d", n)
	}
	return passed
}
