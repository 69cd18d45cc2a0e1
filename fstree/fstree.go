package fstree

import (
	"context"

	"github.com/csikit/csikit/internal/codederr"
	"google.golang.org/grpc/codes"
)

// RemoveOptions tunes Remove.
type RemoveOptions struct {
	// KeepRoot removes only what is below dir and leaves dir itself (an
	// empty directory) in place.
	KeepRoot bool
}

// CopyOptions tunes Copy.
type CopyOptions struct {
	// MaxBytes limits the data bytes Copy writes, summed over all regular
	// files (holes in sparse files are not written and do not count; a
	// file's size beyond its data does not count either). A tree needing
	// more fails with codes.OutOfRange before the byte that would exceed
	// the budget is written, and the destination is removed. Zero means no
	// limit.
	MaxBytes int64
	// CopyDevices copies character and block device nodes as device nodes
	// (mknod with the same numbers). By default a device node in the
	// source fails the copy with codes.FailedPrecondition: a device node
	// carried into another volume can hand a workload access to a host
	// device it could not reach before. FIFOs and sockets are always
	// re-created as empty nodes of the same type; they hold no data and are
	// never opened.
	CopyDevices bool
	// SkipVanished makes Copy skip a source entry that vanishes while it
	// runs (listed in its directory, gone when opened). It is for copies
	// of live trees, such as cloning a volume in use, where files come and
	// go and a copy is only ever a moment's view. By default such an entry
	// fails the copy with codes.Aborted: a source that loses entries
	// mid-copy is usually being deleted (a snapshot deleted during a
	// restore), and a partial copy must not pass for a complete one.
	SkipVanished bool
}

// CopyStats says what Copy did.
type CopyStats struct {
	// Bytes is the number of data bytes written (holes excluded).
	Bytes int64
	// Files is the number of regular files copied.
	Files int64
	// Dirs is the number of directories created, the root included.
	Dirs int64
	// Symlinks is the number of symlinks re-created.
	Symlinks int64
	// Specials is the number of FIFOs, sockets and device nodes re-created.
	Specials int64
}

// UsageStats is what a tree occupies on disk, as Usage reports it. (The
// function has the short name, so the type cannot.)
type UsageStats struct {
	// Bytes is the space allocated to the tree (the sum of st_blocks*512
	// over its inodes, each hard-linked inode counted once), so holes of
	// sparse files do not count.
	Bytes int64
	// Inodes is the number of distinct inodes in the tree, the root
	// included.
	Inodes int64
}

// Remove removes dir and everything below it, without following symlinks
// and without crossing a mount boundary: a mount point at dir or anywhere
// below it makes Remove refuse with codes.FailedPrecondition naming the
// mount, and nothing below that mount is removed. A missing dir is success.
// When dir's last component is a symlink or a file, that entry alone is
// removed (the symlink, never its target). dir must be absolute and clean
// (codes.InvalidArgument otherwise).
//
// Entries that appear while Remove runs (the tree's workload is still
// writing) are removed too, a few rounds at most; a directory that keeps
// refilling gives codes.Aborted.
//
// Remove walks a tree of any depth holding at most 16 directory
// descriptors (see the package documentation), so a chain of directories
// deeper than the descriptor limit is removed too; a directory on the way
// back up that was moved away or replaced while Remove was below it gives
// codes.Aborted (a retry removes the rest).
func Remove(ctx context.Context, dir string, opts RemoveOptions) error {
	if err := codederr.CheckPath("directory", dir); err != nil {
		return err
	}
	return remove(ctx, dir, opts)
}

// Copy copies the tree at src into dst, which Copy creates (its parent must
// exist) or which must be an empty directory. It never follows a symlink
// below src: every entry is opened relative to its parent with
// RESOLVE_NO_SYMLINKS|RESOLVE_NO_XDEV and O_NOFOLLOW (names
// from getdents, one component each, so nothing resolves outside the tree), so a
// file swapped for a symlink mid-copy is copied as that symlink, never
// read through. It keeps holes (SEEK_DATA/SEEK_HOLE, data moved with
// copy_file_range), permission bits (setuid, setgid and sticky included),
// ownership and modification times; it does not copy extended attributes
// (ACLs, SELinux labels) and copies each hard link as a file of its own.
// Device nodes follow opts.CopyDevices; FIFOs and sockets are re-created.
//
// A mount point below src gives codes.FailedPrecondition naming it; a dst
// inside src codes.InvalidArgument; a
// tree over opts.MaxBytes codes.OutOfRange; a full destination
// codes.ResourceExhausted; a missing src codes.NotFound; a dst that exists
// and is not an empty directory codes.AlreadyExists; a source entry or
// directory that vanishes during the copy codes.Aborted naming it
// (relative to src), unless opts.SkipVanished; a source more than 16,384
// directories deep codes.FailedPrecondition. On every error,
// whatever Copy created below dst is removed (and dst too if Copy created
// it), so a retry starts clean.
//
// A dst that does not exist is built under a hidden sibling name
// (".<name>.fstree-partial") and renamed into place (RENAME_NOREPLACE) once
// complete, so even a process killed mid-copy never leaves a partial dst;
// the next Copy to that dst removes the sibling first. An existing empty
// dst is filled in place, where a crash can leave a partial copy (Remove
// with KeepRoot clears it). Calls for one dst must be serialized by the
// caller (a per-volume lock does it).
//
// While Copy runs, dst is mode 0700 and every directory in it is too, so
// no other user can reach the half-made copy; each gets its real mode once
// its contents are complete.
func Copy(ctx context.Context, src, dst string, opts CopyOptions) (CopyStats, error) {
	if err := codederr.CheckPath("source", src); err != nil {
		return CopyStats{}, err
	}
	if err := codederr.CheckPath("destination", dst); err != nil {
		return CopyStats{}, err
	}
	if opts.MaxBytes < 0 {
		return CopyStats{}, codederr.Errorf(codes.InvalidArgument, nil, "MaxBytes %d is negative", opts.MaxBytes)
	}
	return copyTree(ctx, src, dst, opts)
}

// Usage returns the space allocated to the tree at dir (st_blocks*512, so
// holes do not count) and its number of inodes, without following symlinks
// (a symlink counts as itself) and without crossing mounts: a mount point
// below dir and everything under it are left out, as du -x does. A missing
// dir gives codes.NotFound.
func Usage(ctx context.Context, dir string) (UsageStats, error) {
	if err := codederr.CheckPath("directory", dir); err != nil {
		return UsageStats{}, err
	}
	return usage(ctx, dir)
}
