package sanity

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/internal/mountpoint"
)

// capacity returns the size of the filesystem at a directory or of a block
// device.
func capacity(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	if fi.Mode()&os.ModeDevice != 0 {
		size, err := block.DeviceSize(path) // BLKGETSIZE64
		if err != nil {
			return 0, fmt.Errorf("measuring block device %s: %w", path, err)
		}
		return size, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return int64(st.Blocks) * int64(st.Bsize), nil
}

// mountsUnder lists the mount points at or below dir, deepest first, read
// from /proc/self/mountinfo.
func mountsUnder(dir string) ([]string, error) { return mountpoint.Under(dir) }

// detach lazily unmounts path, so a leak the harness found does not
// outlive the test.
func detach(path string) error { return unix.Unmount(path, unix.MNT_DETACH) }

// loopDevices returns the attached loop devices and their backing files,
// read from /sys/block/loop*/loop/backing_file.
func loopDevices() map[string]string {
	out := map[string]string{}
	ms, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, m := range ms {
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(m)))
		out[dev] = strings.TrimSpace(string(b))
	}
	return out
}

// orphanLoops returns the loop devices attached since before whose backing
// file has been deleted: nobody can reach them any more, so they leaked.
func orphanLoops(before map[string]string) []string {
	var out []string
	for dev, file := range loopDevices() {
		if before[dev] != file && strings.HasSuffix(file, " (deleted)") {
			out = append(out, dev+" ("+file+")")
		}
	}
	sort.Strings(out)
	return out
}

// detachLoop detaches a leaked loop device.
func detachLoop(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0)
}

// fsTypesAt returns the filesystem type of every mount stacked at path,
// bottom first, read from /proc/self/mountinfo.
func fsTypesAt(path string) ([]string, error) {
	path = filepath.Clean(path)
	if r, err := filepath.EvalSymlinks(path); err == nil {
		path = r
	}
	all, err := mountpoint.List()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range all {
		if e.Point == path {
			out = append(out, e.FSType)
		}
	}
	return out, nil
}

// deviceMappings returns the device-mapper devices (dm-N) and, for each,
// its name and the block devices below it, read from /sys/block.
func deviceMappings() map[string]string {
	out := map[string]string{}
	ms, _ := filepath.Glob("/sys/block/dm-*/dm/name")
	for _, m := range ms {
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		dir := filepath.Dir(filepath.Dir(m))
		desc := strings.TrimSpace(string(b))
		if slaves, _ := os.ReadDir(filepath.Join(dir, "slaves")); len(slaves) > 0 {
			var names []string
			for _, sl := range slaves {
				names = append(names, "/dev/"+sl.Name())
			}
			desc += " on " + strings.Join(names, ",")
		}
		out["/dev/"+filepath.Base(dir)] = desc
	}
	return out
}
