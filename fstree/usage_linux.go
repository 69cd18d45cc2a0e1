//go:build linux

package fstree

import (
	"context"
	"errors"

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

// dir adds up everything below the directory open at fd, whose path is
// path, depth first with a stack of its own and a chain of descriptors (no
// tree is too deep for it).
func (u *usageWalk) dir(fd int, path string) error {
	ents, err := u.readDir(fd)
	if err != nil {
		return sysError("read directory", path, err)
	}
	ch := newChain(u.walker, path, fd)
	defer ch.close()
	type frame struct {
		ents []dirent
		i    int
	}
	stack := []frame{{ents: ents}}
	for {
		f := &stack[len(stack)-1]
		if f.i == len(f.ents) {
			if len(stack) == 1 {
				return nil
			}
			stack = stack[:len(stack)-1]
			if err := ch.pop(); err != nil {
				return err
			}
			continue
		}
		e := f.ents[f.i]
		f.i++
		if err := u.tick(ch, e.name); err != nil {
			return err
		}
		fd := ch.fd()
		if e.typ != unix.DT_DIR && e.typ != unix.DT_UNKNOWN {
			// statx tells a file bind-mounted here (a mount root) apart.
			var stx unix.Statx_t
			err := unix.Statx(fd, e.name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC,
				unix.STATX_TYPE|unix.STATX_INO|unix.STATX_NLINK|unix.STATX_BLOCKS, &stx)
			if err != nil {
				if isNotExist(err) {
					continue
				}
				return sysError("lstat", ch.path(e.name), err)
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
			return sysError("open", ch.path(e.name), err)
		}
		var st unix.Stat_t
		err = unix.Fstat(cfd, &st)
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(cfd)
			if err != nil {
				return sysError("stat", ch.path(e.name), err)
			}
			u.add(&st)
			continue
		}
		u.add(&st)
		dfd, err := unix.Openat(cfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(cfd)
		if isNotExist(err) {
			continue // removed meanwhile
		}
		if err != nil {
			return sysError("open", ch.path(e.name), err)
		}
		cents, err := u.readDir(dfd)
		if err != nil || len(cents) == 0 {
			unix.Close(dfd)
			if err != nil && !isNotExist(err) {
				return sysError("read directory", ch.path(e.name), err)
			}
			continue
		}
		if err := ch.push(e.name, dfd); err != nil {
			return err
		}
		stack = append(stack, frame{ents: cents})
	}
}
