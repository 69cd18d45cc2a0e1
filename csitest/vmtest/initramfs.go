//go:build linux

package vmtest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// bootModules are the modules the initramfs loads before it can reach the
// host's root: virtio PCI, 9p over virtio, virtio-serial (the agent's
// channel) and virtio-rng (entropy for Ceph's keys).
var bootModules = []string{"virtio_pci", "9pnet_virtio", "9p", "virtio_console", "virtio_rng"}

// moduleFiles lists the .ko files (dependencies first, each once) that
// insmod needs to load mods on kernel kver; built-in modules need none.
func moduleFiles(kver string, mods []string) ([]string, error) {
	var files []string
	seen := map[string]bool{}
	for _, m := range mods {
		out, err := exec.Command("modprobe", "-S", kver, "--show-depends", m).Output()
		if err != nil {
			return nil, fmt.Errorf("modprobe -S %s --show-depends %s: %v", kver, m, err)
		}
		s := bufio.NewScanner(bytes.NewReader(out))
		for s.Scan() {
			f := strings.Fields(s.Text())
			if len(f) >= 2 && f[0] == "insmod" && !seen[f[1]] {
				seen[f[1]] = true
				files = append(files, f[1])
			}
		}
	}
	return files, nil
}

// cpioWriter writes a "newc" cpio archive, the format the kernel unpacks
// as an initramfs.
type cpioWriter struct {
	w   io.Writer
	ino int
	err error
}

func (c *cpioWriter) entry(name string, mode uint32, data []byte) {
	if c.err != nil {
		return
	}
	c.ino++
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	var b bytes.Buffer
	b.WriteString(hdr)
	b.WriteString(name)
	b.WriteByte(0)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	b.Write(data)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	_, c.err = c.w.Write(b.Bytes())
}

func (c *cpioWriter) dir(name string)                      { c.entry(name, 0o040755, nil) }
func (c *cpioWriter) file(name string, p uint32, d []byte) { c.entry(name, 0o100000|p, d) }
func (c *cpioWriter) close() error {
	c.entry("TRAILER!!!", 0, nil)
	return c.err
}

// writeInitramfs writes the guest's initramfs to path: static busybox,
// the boot modules of kver, init.sh as /init and its configuration.
func writeInitramfs(path, busybox, kver, conf string) error {
	mods, err := moduleFiles(kver, bootModules)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	c := &cpioWriter{w: zw}
	for _, d := range []string{"bin", "mods", "proc", "sys", "dev", "newroot"} {
		c.dir(d)
	}
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	c.file("bin/busybox", 0o755, bb)
	var order strings.Builder
	for _, m := range mods {
		if strings.HasSuffix(m, ".ko.xz") || strings.HasSuffix(m, ".ko.zst") || strings.HasSuffix(m, ".ko.gz") {
			return fmt.Errorf("module %s is compressed; busybox insmod wants a plain .ko", m)
		}
		b, err := os.ReadFile(m)
		if err != nil {
			return err
		}
		c.file("mods/"+filepath.Base(m), 0o644, b)
		order.WriteString(filepath.Base(m) + "\n")
	}
	c.file("mods/order", 0o644, []byte(order.String()))
	c.file("init", 0o755, initScript)
	c.file("vmtest.conf", 0o644, []byte(conf))
	if err := c.close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}
