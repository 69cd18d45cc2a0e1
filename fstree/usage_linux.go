//go:build linux

package fstree

import (
	"context"
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/internal/codederr"
)

type inode struct{ dev, ino uint64 }

func usage(ctx context.Context, dir string) (UsageStats, error) {
	if err := ctx.Err(); err != nil {
		return UsageStats{}, codederr.FromContext(err, "usage of %s", dir)
	}
	fd, err := openRoot(dir)
	switch {
	case isNotExist(err):
		return UsageStats{}, codederr.Errorf(codes.NotFound, err, "directory %s", dir)
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return UsageStats{}, codederr.Errorf(codes.InvalidArgument, err, "%s is not a directory", dir)
	case err != nil:
		return UsageStats{}, sysError("open", dir, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return UsageStats{}, sysError("stat", dir, err)
	}
	u := &usageWalk{walker: newWalker(ctx), seen: map[inode]bool{}}
	defer u.release()
	u.add(&st)
	if err := u.dir(fd, dir); err != nil {
		return UsageStats{}, err
	}
	return u.UsageStats, nil
}

type usageWalk struct {
	*walker
	UsageStats
	seen map[inode]bool // hard-linked inodes already counted
}

func (u *usageWalk) add(st *unix.Stat_t) {
	if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		k := inode{st.Dev, st.Ino}
		if u.seen[k] {
			return
		}
		u.seen[k] = true
	}
	u.Bytes += st.Blocks * 512
	u.Inodes++
}

func (u *usageWalk) dir(fd int, path string) error {
	ents, err := u.readDir(fd)
	if err != nil {
		return sysError("read directory", path, err)
	}
	for _, e := range ents {
		p := filepath.Join(path, e.name)
		if err := u.tick(p); err != nil {
			return err
		}
		if e.typ != unix.DT_DIR && e.typ != unix.DT_UNKNOWN {
			// statx tells a file bind-mounted here (a mount root) apart.
			var stx unix.Statx_t
			err := unix.Statx(fd, e.name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC,
				unix.STATX_TYPE|unix.STATX_INO|unix.STATX_NLINK|unix.STATX_BLOCKS, &stx)
			if err != nil {
				if isNotExist(err) {
					continue
				}
				return sysError("lstat", p, err)
			}
			if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0 {
				continue // a mount: not counted
			}
			if uint32(stx.Mode)&unix.S_IFMT != unix.S_IFDIR {
				u.add(&unix.Stat_t{Dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor), Ino: stx.Ino,
					Nlink: uint64(stx.Nlink), Mode: uint32(stx.Mode), Blocks: int64(stx.Blocks)})
				continue
			}
		}
		// A directory (or an entry of unknown type): open it without
		// following a symlink or entering a mount.
		cfd, err := u.openAt(fd, e.name, unix.O_PATH)
		switch {
		case isNotExist(err), errors.Is(err, unix.EXDEV):
			continue // gone, or a mount: not counted
		case err != nil:
			return sysError("open", p, err)
		}
		var st unix.Stat_t
		err = unix.Fstat(cfd, &st)
		if err == nil {
			u.add(&st)
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				var dfd int
				dfd, err = unix.Openat(cfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err == nil {
					err = u.dir(dfd, p)
					unix.Close(dfd)
				}
			}
		}
		unix.Close(cfd)
		if err != nil {
			if _, ok := err.(*codederr.Error); ok {
				return err
			}
			return sysError("walk", p, err)
		}
	}
	return nil
}
