//go:build linux

package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/sanity"
)

// daemonsOf returns the PIDs of the processes named comm whose command
// line names dir (a node's state directory: rbd-fuse's mount point and
// rbd-nbd's --keyfile are under it): that node's mappings only, never
// another node's or test's.
func daemonsOf(comm, dir string) []string {
	var pids []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		c, err := os.ReadFile(filepath.Join(p, "comm"))
		if err != nil || strings.TrimSpace(string(c)) != comm {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join(p, "cmdline"))
		if strings.Contains(string(cmd), dir+"/") {
			pids = append(pids, filepath.Base(p))
		}
	}
	return pids
}

// splitBrainTrials is RBD_SPLITBRAIN_TRIALS, else def.
func splitBrainTrials(t *testing.T, def int) int {
	t.Helper()
	v := os.Getenv("RBD_SPLITBRAIN_TRIALS")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("RBD_SPLITBRAIN_TRIALS=%q: want a positive number", v)
	}
	return n
}

// TestSplitBrainRBDFuse runs csikit sanity's SplitBrain area against the
// driver with the rbd-fuse mapper (splitBrain). The freeze stops A's
// rbd-fuse (and the harness A's writer). RBD_SPLITBRAIN_TRIALS sets the
// number of trials (default 3; the bar is 20). krbd and rbd-nbd
// run the same in the VM lane (TestKernelMappers/*/splitbrain).
func TestSplitBrainRBDFuse(t *testing.T) {
	c := cephtest.Require(t)
	requireNode(t)
	splitBrain(t, c, driver.MapperFUSE, splitBrainTrials(t, 3), 0)
}

// splitBrain runs csikit sanity's SplitBrain area against the driver
// with mapper: node A (the in-process target, which serves the controller
// too) and node B (a second node plugin on a socket of its own, node ID
// node-b), each with its own state directory and so its own Ceph client
// per mapping (krbd maps with noshare; rbd-nbd and rbd-fuse are a process
// per mapping). The freeze stops A's rbd-fuse or rbd-nbd daemons (krbd
// has none: the kernel is A's data path, and only the writer stops);
// ControllerUnpublishVolume(A) fences A's client; B stages, writes, and
// A's late writes must not land. The filesystem is checked (e2fsck -n)
// on an export of the image. opTimeout and the calls' bound are for slow
// emulation (0: the defaults).
func splitBrain(t *testing.T, c cephtest.Cluster, mapper string, trials int, opTimeout time.Duration) {
	stateA, stateB := t.TempDir(), t.TempDir()
	dA, err := driver.New(driver.Options{Monitors: c.Monitors, DefaultPool: c.Pool, NodeID: "node-a", StateDir: stateA, Mapper: mapper, OpTimeout: opTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dA.Close() })
	dB, err := driver.New(driver.Options{Monitors: c.Monitors, DefaultPool: c.Pool, NodeID: "node-b", StateDir: stateB, Mapper: mapper, OpTimeout: opTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dB.Close() })
	srvB := csitest.NewServer(t, dB.Service(), dB.ServerOptions(csikit.Options{Name: "rbd.csikit.dev", Version: "v0.0.0-sanity", NodeID: "node-b"}))
	daemon := map[string]string{driver.MapperFUSE: "rbd-fuse", driver.MapperNBD: "rbd-nbd"}[mapper]
	probe := mapper != driver.MapperFUSE
	var probes probeTally
	freeze := func(ctx context.Context) (func() error, error) {
		resume := func() error { return nil }
		if daemon != "" {
			pids := daemonsOf(daemon, stateA)
			if len(pids) == 0 {
				return nil, fmt.Errorf("no %s of node A (state directory %s) to freeze", daemon, stateA)
			}
			var err error
			if resume, err = sanity.StopProcesses(pids...)(ctx); err != nil {
				return nil, err
			}
		}
		if !probe {
			return resume, nil
		}
		return func() error {
			err := resume()
			probes.add(t, probeLateWrite(stateA, time.Minute))
			return err
		}, nil
	}
	exportDir := t.TempDir()
	cfg := sanity.Config{
		Areas:      sanity.SplitBrain,
		VolumeSize: 16 << 20,
		Parameters: map[string]string{driver.ParamPool: c.Pool},
		Secrets:    c.Secrets(),
		SplitBrain: &sanity.SplitBrainConfig{
			NodeB:  srvB.Endpoint,
			Trials: trials,
			Freeze: freeze,
			Check: func(ctx context.Context, id string) error {
				img := "csi-vol-" + id[strings.IndexByte(id, '-')+1:]
				file := filepath.Join(exportDir, img)
				defer os.Remove(file)
				out, err := exec.CommandContext(ctx, "rbd", "-c", c.Conf, "-n", "client.admin", "-k", c.AdminKeyring,
					"export", c.Pool+"/"+img, file).CombinedOutput()
				if err != nil {
					return fmt.Errorf("rbd export %s: %v: %s", img, err, out)
				}
				if head, err := os.ReadFile(file); err == nil && strings.HasPrefix(string(head), probeMark) {
					return fmt.Errorf("node A's probe write through its fenced %s device landed on the image", mapper)
				}
				return sanity.CheckFilesystem(ctx, file)
			},
		},
	}
	if opTimeout > 0 {
		cfg.CallTimeout = opTimeout
		cfg.SplitBrain.Settle = 5 * time.Second
	}
	start := time.Now()
	sanity.Run(t, sanity.Driver(dA.Service(), dA.ServerOptions(csikit.Options{Name: "rbd.csikit.dev", Version: "v0.0.0-sanity", NodeID: "node-a"})), cfg)
	took := time.Since(start)
	t.Logf("split-brain: mapper=%s trials=%d failed=%v took=%v per_trial=%v%s", mapper, trials, t.Failed(), took.Round(time.Second), (took / time.Duration(trials)).Round(time.Second), probes.String())
}

// probeMark starts the sector probeLateWrite writes.
const probeMark = "csikit-split-brain-late-write-probe"

// probeLateWrite is node A's explicit late write, once it is resumed
// after the fence: one 512-byte sector, O_DIRECT|O_DSYNC, at offset 0 of
// the device A's stage recorded (krbd, rbd-nbd) — bytes ext4 leaves
// unused, so the probe cannot corrupt anything, and the trial's Check
// finds it on the image if it landed. It returns what the write did:
// "EIO" is the fence working. A write still blocked after limit is
// reported as such and left to finish (its descriptor holds the device
// open).
func probeLateWrite(stateA string, limit time.Duration) string {
	recs, _ := filepath.Glob(filepath.Join(stateA, "staged", "*.json"))
	if len(recs) != 1 {
		return fmt.Sprintf("no probe: %d stage records in %s", len(recs), stateA)
	}
	b, _ := os.ReadFile(recs[0])
	var rec struct{ Device string }
	if err := json.Unmarshal(b, &rec); err != nil || rec.Device == "" {
		return fmt.Sprintf("no probe: stage record %s names no device (%v)", b, err)
	}
	began := time.Now()
	res := make(chan string, 1)
	go func() {
		fd, err := unix.Open(rec.Device, unix.O_WRONLY|unix.O_DIRECT|unix.O_DSYNC|unix.O_CLOEXEC, 0)
		if err != nil {
			res <- "open: " + err.Error()
			return
		}
		defer unix.Close(fd)
		raw := make([]byte, 8192)
		buf := raw[4096-int(uintptr(unsafe.Pointer(&raw[0]))&4095):][:512]
		copy(buf, probeMark)
		if _, err := unix.Pwrite(fd, buf, 0); err != nil {
			res <- errnoName(err)
			return
		}
		res <- "written"
	}()
	select {
	case r := <-res:
		return fmt.Sprintf("%s after %v", r, time.Since(began).Round(10*time.Millisecond))
	case <-time.After(limit):
		return fmt.Sprintf("blocked beyond %v", limit)
	}
}

// errnoName is EIO for unix.EIO, else the error's text.
func errnoName(err error) string {
	if errors.Is(err, unix.EIO) {
		return "EIO"
	}
	return err.Error()
}

// probeTally counts probeLateWrite's results over the trials.
type probeTally struct {
	mu sync.Mutex
	n  map[string]int
}

// add counts and logs one result; a probe that was written fails t.
func (p *probeTally) add(t *testing.T, r string) {
	t.Logf("node A's late write through its fenced device: %s", r)
	if strings.HasPrefix(r, "written") {
		t.Errorf("node A's probe write through its fenced device succeeded (%s): its Ceph client is not cut off", r)
	}
	kind, _, _ := strings.Cut(r, " after ")
	if strings.HasPrefix(kind, "blocked") {
		kind = "blocked"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = map[string]int{}
	}
	p.n[kind]++
}

func (p *probeTally) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.n) == 0 {
		return ""
	}
	var parts []string
	for k, v := range p.n {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	slices.Sort(parts)
	return " late_write_probe: " + strings.Join(parts, " ")
}
