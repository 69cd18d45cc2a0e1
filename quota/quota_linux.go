//go:build linux

package quota

import (
	"context"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/internal/codederr"
)

// quotactl commands and flags (linux/quota.h, linux/dqblk_xfs.h), which
// golang.org/x/sys/unix does not define.
const (
	prjQuota    = 2        // PRJQUOTA
	qGetQuota   = 0x800007 // Q_GETQUOTA
	qSetQuota   = 0x800008 // Q_SETQUOTA
	qXGetQStatV = 0x5808   // Q_XGETQSTATV: XQM_CMD(8)

	qifBLimits = 1 // QIF_BLIMITS
	qifSpace   = 2 // QIF_SPACE
	qifInodes  = 8 // QIF_INODES

	dqBlockSize = 1024 // QIF_DQBLKSIZE: the unit of if_dqblk's block limits

	fsQuotaPdqAcct = 1 << 4 // FS_QUOTA_PDQ_ACCT
	fsQuotaPdqEnfd = 1 << 5 // FS_QUOTA_PDQ_ENFD

	fsXflagProjInherit = 0x200 // FS_XFLAG_PROJINHERIT
)

// ifDqblk is struct if_dqblk.
type ifDqblk struct {
	bHardLimit, bSoftLimit, curSpace  uint64
	iHardLimit, iSoftLimit, curInodes uint64
	bTime, iTime                      uint64
	valid                             uint32
	_                                 uint32
}

// fsQfileStatv is struct fs_qfilestatv.
type fsQfileStatv struct {
	ino, nblks uint64
	nextents   uint32
	_          uint32
}

// fsQuotaStatv is struct fs_quota_statv (version 1).
type fsQuotaStatv struct {
	version                              int8
	_                                    uint8
	flags                                uint16
	incoredqs                            uint32
	uquota, gquota, pquota               fsQfileStatv
	bTimeLimit, iTimeLimit, rtbTimeLimit int32
	bWarnLimit, iWarnLimit, rtbWarnLimit uint16
	_                                    uint16
	_                                    uint32
	_                                    [7]uint64
}

// fsxattr is struct fsxattr.
type fsxattr struct {
	xflags, extsize, nextents, projid, cowextsize uint32
	_                                             [8]byte
}

// open opens path for the calls here: not following a symlink at its final
// element, refusing what is neither a directory nor a regular file.
func open(path string) (int, error) {
	if err := codederr.CheckPath("path", path); err != nil {
		return -1, err
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return -1, errorf(codes.NotFound, err, "open %s", path)
	case errors.Is(err, unix.ELOOP):
		return -1, errorf(codes.InvalidArgument, err, "%s is a symlink", path)
	case err != nil:
		return -1, errorf(codes.Internal, err, "open %s", path)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, errorf(codes.Internal, err, "stat %s", path)
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFDIR && t != unix.S_IFREG {
		unix.Close(fd)
		return -1, errorf(codes.InvalidArgument, nil, "%s is neither a directory nor a regular file", path)
	}
	return fd, nil
}

// quotactl runs quotactl_fd(2) for the project quota type.
func quotactl(fd, cmd int, id ProjectID, addr unsafe.Pointer) error {
	_, _, e := unix.Syscall6(unix.SYS_QUOTACTL_FD, uintptr(fd), uintptr(cmd<<8|prjQuota), uintptr(id), uintptr(addr), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// withFD runs f on a descriptor of path, honouring ctx before it starts.
func withFD(ctx context.Context, path string, f func(fd int) error) error {
	if err := ctx.Err(); err != nil {
		return codederr.FromContext(err, "quota on %s", path)
	}
	fd, err := open(path)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return f(fd)
}

// Check reports whether path's filesystem enforces project quotas: nil
// when it does, else a FailedPrecondition error that unwraps to
// ErrUnsupported and says why (quotactl_fd missing, project quotas off or
// only accounted). It needs no privilege.
func Check(ctx context.Context, path string) error {
	return withFD(ctx, path, func(fd int) error {
		st := fsQuotaStatv{version: 1}
		err := quotactl(fd, qXGetQStatV, 0, unsafe.Pointer(&st))
		switch {
		case errors.Is(err, unix.ENOSYS):
			return unsupported(path, "the filesystem has no quota operations, or the kernel no quotactl_fd (Linux 5.14 or later)")
		case errors.Is(err, unix.ENOTSUP), errors.Is(err, unix.EINVAL), errors.Is(err, unix.ESRCH):
			return unsupported(path, fmt.Sprintf("the filesystem has no quota support (%v)", err))
		case err != nil:
			return errorf(codes.Internal, err, "quota state of %s", path)
		case st.flags&fsQuotaPdqAcct == 0:
			return unsupported(path, "project quotas are off (xfs: mount with prjquota; ext4: mkfs -O project,quota and mount with prjquota)")
		case st.flags&fsQuotaPdqEnfd == 0:
			return unsupported(path, "project quotas are accounted but not enforced (mounted with pqnoenforce?)")
		}
		return nil
	})
}

// SetProject gives the directory or regular file at path project id and,
// for a directory, the inherit flag (FS_XFLAG_PROJINHERIT), so what is
// created below it later joins the project. Files already below it keep
// their project: set it on an empty directory. It needs CAP_FOWNER or
// ownership, in the initial user namespace.
func SetProject(ctx context.Context, path string, id ProjectID) error {
	return withFD(ctx, path, func(fd int) error {
		var x fsxattr
		if err := ioctl(fd, fsIocFsGetXattr, unsafe.Pointer(&x)); err != nil {
			return errorf(codes.Internal, err, "read the attributes of %s", path)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return errorf(codes.Internal, err, "stat %s", path)
		}
		x.projid = uint32(id)
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			x.xflags |= fsXflagProjInherit
		}
		if err := ioctl(fd, fsIocFsSetXattr, unsafe.Pointer(&x)); err != nil {
			if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP) {
				return unsupported(path, fmt.Sprintf("the filesystem cannot store project IDs (%v)", err))
			}
			return errorf(codes.Internal, err, "set project %d on %s", id, path)
		}
		return nil
	})
}

// Project returns the project ID of the directory or file at path.
func Project(ctx context.Context, path string) (ProjectID, error) {
	var id ProjectID
	err := withFD(ctx, path, func(fd int) error {
		var x fsxattr
		if err := ioctl(fd, fsIocFsGetXattr, unsafe.Pointer(&x)); err != nil {
			return errorf(codes.Internal, err, "read the attributes of %s", path)
		}
		id = ProjectID(x.projid)
		return nil
	})
	return id, err
}

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
	if e != 0 {
		return e
	}
	return nil
}

// SetLimit sets project id's hard limit to bytes (rounded up to whole KiB,
// the unit of the kernel's interface) on the filesystem holding path; 0
// removes the limit. It needs CAP_SYS_ADMIN.
func SetLimit(ctx context.Context, path string, id ProjectID, bytes int64) error {
	if id == 0 || bytes < 0 {
		return errorf(codes.InvalidArgument, nil, "project %d, limit %d bytes: want a project ID above 0 and a limit of 0 or more", id, bytes)
	}
	return withFD(ctx, path, func(fd int) error {
		q := ifDqblk{valid: qifBLimits}
		q.bHardLimit = uint64((bytes + dqBlockSize - 1) / dqBlockSize)
		err := quotactl(fd, qSetQuota, id, unsafe.Pointer(&q))
		switch {
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.ESRCH), errors.Is(err, unix.ENOTSUP):
			return unsupported(path, fmt.Sprintf("cannot set a project limit (%v)", err))
		case err != nil:
			return errorf(codes.Internal, err, "set the limit of project %d on %s to %d bytes", id, path, bytes)
		}
		return nil
	})
}

// Get returns project id's usage and hard limit on the filesystem holding
// path. A project nothing belongs to and no limit was set for reports
// zeros (xfs has no record of it: ENOENT).
func Get(ctx context.Context, path string, id ProjectID) (Usage, error) {
	var u Usage
	err := withFD(ctx, path, func(fd int) error {
		var q ifDqblk
		err := quotactl(fd, qGetQuota, id, unsafe.Pointer(&q))
		switch {
		case errors.Is(err, unix.ENOENT):
			return nil // no record: nothing used, no limit
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.ESRCH), errors.Is(err, unix.ENOTSUP):
			return unsupported(path, fmt.Sprintf("cannot read project quotas (%v)", err))
		case err != nil:
			return errorf(codes.Internal, err, "read project %d on %s", id, path)
		}
		if q.valid&qifSpace != 0 {
			u.Bytes = clamp(q.curSpace)
		}
		if q.valid&qifInodes != 0 {
			u.Inodes = clamp(q.curInodes)
		}
		if q.valid&qifBLimits != 0 && q.bHardLimit <= math.MaxInt64/dqBlockSize {
			u.LimitBytes = int64(q.bHardLimit) * dqBlockSize
		}
		return nil
	})
	return u, err
}

func clamp(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}
