//go:build linux

// Package vmtest runs commands, and tests that need a real kernel, in a
// virtual machine: Debian's stock kernel (package linux-image-amd64) under
// qemu (KVM where /dev/kvm works and boots the guest, TCG otherwise,
// VM.KVMError saying why), with the host's root
// shared read-only over 9p, so the host's tools and test binaries run
// unchanged, a writable scratch directory shared at the same path, tmpfs
// on /run (TMPDIR is /run/tmp) and no network device: a guest test's
// servers (a throwaway Ceph cluster) run on the guest's loopback. Commands
// run as root with every capability, and the kernel's modules (rbd, nbd,
// dm-mod, xfs, quota_v2, …) load from the host's /lib/modules.
//
// The guest's agent is the host's own binary, re-executed in the guest
// (an init hook of this package), reached over virtio-serial. A test that
// needs the VM starts with
//
//	if vmtest.Delegate(t, vmtest.Options{Modules: []string{"rbd"}}) {
//		return // ran in the VM: its result is this test's
//	}
//
// and its package's TestMain calls Main. Without the lane (no root, qemu,
// kernel or static busybox) Delegate skips, and fails under
// CSIKIT_STRICT_TESTS=1 or CI=true.
package vmtest

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

//go:embed init.sh
var initScript []byte

// Options configure a VM.
type Options struct {
	// Modules are kernel modules loaded (modprobe) once the guest is up.
	Modules []string
	// MemoryMiB is the guest's memory (default 2048). tmpfs (TMPDIR) is
	// part of it.
	MemoryMiB int
	// CPUs is the guest's processor count (default 2).
	CPUs int
	// Udev starts systemd-udevd in the guest (tools such as `rbd device
	// map` wait for udev's events).
	Udev bool
	// Setup is a bash script run in the guest once after boot, in the
	// directory of the process that started the VM; the KEY=VALUE lines
	// it appends to the file named by $VMTEST_ENV join the environment of
	// every later command. A failed setup fails the boot.
	Setup string
	// BootTimeout bounds the boot, up to the agent's first word (default
	// 5 minutes: TCG is slow).
	BootTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.MemoryMiB == 0 {
		o.MemoryMiB = 2048
	}
	if o.CPUs == 0 {
		o.CPUs = 2
	}
	if o.BootTimeout == 0 {
		o.BootTimeout = 5 * time.Minute
	}
	return o
}

// key identifies Options that can share a VM.
func (o Options) key() string {
	o = o.withDefaults()
	mods := append([]string(nil), o.Modules...)
	sort.Strings(mods)
	b, _ := json.Marshal(struct {
		M      []string
		Mem, C int
		U      bool
		S      string
	}{mods, o.MemoryMiB, o.CPUs, o.Udev, o.Setup})
	return string(b)
}

// Lane is what the VM lane uses on this host.
type Lane struct {
	Qemu, Kernel, KernelVersion, Busybox string
	// KVM is true when /dev/kvm works (else TCG).
	KVM bool
}

// Available finds qemu, a Debian kernel whose modules are installed and a
// static busybox; the error says what is missing and which package has it.
func Available() (Lane, error) {
	var l Lane
	if os.Geteuid() != 0 {
		return l, errors.New("the VM lane needs root (9p passthrough writes as root)")
	}
	var missing []string
	var err error
	if l.Qemu, err = exec.LookPath("qemu-system-x86_64"); err != nil {
		missing = append(missing, "qemu-system-x86_64 (package qemu-system-x86)")
	}
	kernels, _ := filepath.Glob("/boot/vmlinuz-*")
	sort.Slice(kernels, func(i, j int) bool { return versionLess(kernels[i], kernels[j]) })
	for i := len(kernels) - 1; i >= 0; i-- {
		kver := strings.TrimPrefix(kernels[i], "/boot/vmlinuz-")
		if _, err := os.Stat(filepath.Join("/lib/modules", kver, "modules.dep")); err == nil {
			l.Kernel, l.KernelVersion = kernels[i], kver
			break
		}
	}
	if l.Kernel == "" {
		missing = append(missing, "a kernel in /boot with its modules in /lib/modules (package linux-image-amd64)")
	}
	l.Busybox, err = exec.LookPath("busybox")
	if err != nil || !isStatic(l.Busybox) {
		missing = append(missing, "a static busybox (package busybox-static)")
	}
	if len(missing) > 0 {
		return l, errors.New("the VM lane needs " + strings.Join(missing, ", "))
	}
	l.KVM = kvmWorks()
	return l, nil
}

// versionLess orders kernel file names by version, numerically.
func versionLess(a, b string) bool {
	split := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '-' })
	}
	x, y := split(a), split(b)
	for i := 0; i < len(x) && i < len(y); i++ {
		n, errN := strconv.Atoi(x[i])
		m, errM := strconv.Atoi(y[i])
		if errN == nil && errM == nil && n != m {
			return n < m
		}
		if (errN != nil || errM != nil) && x[i] != y[i] {
			return x[i] < y[i]
		}
	}
	return len(x) < len(y)
}

// isStatic reports whether the ELF file at p has no program interpreter.
func isStatic(p string) bool {
	out, err := os.ReadFile(p)
	if err != nil {
		return false
	}
	return !strings.Contains(string(out[:min(len(out), 4096)]), "/lib64/ld-linux")
}

// kvmWorks reports whether /dev/kvm opens and answers the API version.
func kvmWorks() bool {
	fd, err := unix.Open("/dev/kvm", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	v, err := unix.IoctlRetInt(fd, 0xAE00) // KVM_GET_API_VERSION
	return err == nil && v == 12
}

// kvmBootTimeout bounds a boot under KVM, which takes seconds when KVM
// works: past it, the lane falls back to TCG.
const kvmBootTimeout = 40 * time.Second

// kvmMarker is the file that records, for this boot of the host, that KVM
// did not boot a guest, so later VMs go straight to TCG.
func kvmMarker() string {
	id, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return filepath.Join(os.TempDir(), "csikit-vmtest-kvm-hangs-"+strings.TrimSpace(string(id)))
}

// VM is a running guest.
type VM struct {
	// BootTime is how long the guest took from qemu's start to the
	// agent's first word.
	BootTime time.Duration
	// SetupTime is how long, after BootTime, loading the modules,
	// starting udev and Options.Setup took: the guest is ready for its
	// first command BootTime+SetupTime after qemu's start.
	SetupTime time.Duration
	// Lane is what it runs on.
	Lane Lane
	// KVMError, when the guest runs under TCG, says why KVM was not used:
	// /dev/kvm missing, or the error of a KVM boot on this host (qemu's
	// abort, or a guest that did not reach its agent in time).
	KVMError error

	opts    Options
	dir     string // host working directory: sockets, console log
	scratch string
	qemu    *exec.Cmd
	exited  chan struct{}
	conn    net.Conn
	frames  *json.Decoder
	env     []string // from Setup
	mu      sync.Mutex
	closing sync.Once
}

// Start boots a VM with opts. Close it.
func Start(ctx context.Context, opts Options) (*VM, error) {
	lane, err := Available()
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	v, err := startOn(ctx, lane, opts, func(ctx context.Context, l Lane, o Options) (*VM, error) { return boot(ctx, l, o, exe) }, kvmMarker())
	if err != nil {
		return nil, err
	}
	began := time.Now()
	if err := v.prepare(ctx); err != nil {
		v.Close()
		return nil, err
	}
	v.SetupTime = time.Since(began)
	return v, nil
}

// startOn boots a VM on lane with boot, choosing the accelerator: KVM
// when /dev/kvm works and no earlier boot on this host found that it does
// not run the guest (the marker file exists), bounded by kvmBootTimeout;
// TCG otherwise, and after a KVM boot that fails, which writes the marker
// so that later VMs, in this process and others until the host reboots,
// go straight to TCG. The VM's KVMError says why KVM was not used.
func startOn(ctx context.Context, lane Lane, opts Options, boot func(context.Context, Lane, Options) (*VM, error), marker string) (*VM, error) {
	var kvmErr error
	if lane.KVM {
		if b, err := os.ReadFile(marker); err == nil {
			why := strings.TrimSpace(string(b))
			if why == "" {
				why = "its reason was not recorded"
			}
			lane.KVM = false
			kvmErr = fmt.Errorf("an earlier boot on this host (%s) found KVM unusable: %s", marker, why)
		}
	} else {
		kvmErr = errors.New("/dev/kvm does not open or answer KVM_GET_API_VERSION")
	}
	if lane.KVM {
		kvmOpts := opts
		if kvmOpts.BootTimeout > kvmBootTimeout {
			kvmOpts.BootTimeout = kvmBootTimeout
		}
		v, err := boot(ctx, lane, kvmOpts)
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		// A /dev/kvm that opens but does not run this guest (nested
		// virtualization without the features the kernel wants).
		_ = os.WriteFile(marker, []byte(err.Error()+"\n"), 0o644)
		lane.KVM = false
		kvmErr = err
	}
	v, err := boot(ctx, lane, opts)
	if err != nil {
		return nil, fmt.Errorf("%w (under TCG; KVM not used: %v)", err, kvmErr)
	}
	v.KVMError = kvmErr
	return v, nil
}

// boot starts qemu and waits for the guest's agent.
func boot(ctx context.Context, lane Lane, opts Options, exe string) (*VM, error) {
	dir, err := os.MkdirTemp("", "vmtest-")
	if err != nil {
		return nil, err
	}
	v := &VM{Lane: lane, opts: opts, dir: dir, scratch: filepath.Join(dir, "scratch"), exited: make(chan struct{})}
	if err := v.boot(ctx, exe); err != nil {
		v.Close()
		return nil, err
	}
	return v, nil
}

func (v *VM) boot(ctx context.Context, exe string) error {
	if err := os.Mkdir(v.scratch, 0o777); err != nil {
		return err
	}
	_ = os.Chmod(v.dir, 0o755)
	_ = os.Chmod(v.scratch, 0o1777)
	conf := fmt.Sprintf("AGENT='%s'\nSCRATCH='%s'\nBUSYBOX='%s'\nPORT=vmtest\n", exe, v.scratch, v.Lane.Busybox)
	if strings.ContainsAny(exe+v.scratch+v.Lane.Busybox, "'\"$`\\\n") {
		return fmt.Errorf("vmtest: paths with quotes or newlines: %q, %q", exe, v.scratch)
	}
	initrd := filepath.Join(v.dir, "initrd.gz")
	if err := writeInitramfs(initrd, v.Lane.Busybox, v.Lane.KernelVersion, conf); err != nil {
		return fmt.Errorf("vmtest: initramfs: %w", err)
	}
	sock := filepath.Join(v.dir, "ctl.sock")
	accel := []string{"-accel", "tcg,thread=multi", "-cpu", "max"}
	if v.Lane.KVM {
		// Without arch-capabilities: nested KVM (a CI runner in a VM)
		// refuses to set that MSR and qemu aborts.
		accel = []string{"-accel", "kvm", "-cpu", "host,-arch-capabilities"}
	}
	args := append(accel,
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		"-nic", "none", // no network device: guest servers use loopback only
		"-m", strconv.Itoa(v.opts.MemoryMiB), "-smp", strconv.Itoa(v.opts.CPUs),
		"-kernel", v.Lane.Kernel, "-initrd", initrd,
		"-append", "console=ttyS0 quiet loglevel=3 panic=-1",
		"-serial", "file:"+filepath.Join(v.dir, "console.log"),
		"-virtfs", "local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap",
		"-virtfs", "local,path="+v.scratch+",mount_tag=scratch,security_model=passthrough,multidevs=remap",
		"-device", "virtio-rng-pci",
		"-device", "virtio-serial-pci",
		"-chardev", "socket,id=ctl,path="+sock+",server=on,wait=off",
		"-device", "virtserialport,chardev=ctl,name=vmtest",
	)
	qlog, err := os.Create(filepath.Join(v.dir, "qemu.log"))
	if err != nil {
		return err
	}
	defer qlog.Close()
	start := time.Now()
	v.qemu = exec.Command(v.Lane.Qemu, args...)
	v.qemu.Stdout, v.qemu.Stderr = qlog, qlog
	// qemu dies with the process that started it, whatever happens.
	v.qemu.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := v.qemu.Start(); err != nil {
		return fmt.Errorf("vmtest: start qemu: %w", err)
	}
	go func() { _ = v.qemu.Wait(); close(v.exited) }()
	bootCtx, cancel := context.WithTimeout(ctx, v.opts.BootTimeout)
	defer cancel()
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			v.conn = c
			break
		}
		select {
		case <-v.exited:
			return fmt.Errorf("vmtest: qemu exited at start: %s", v.tail("qemu.log"))
		case <-bootCtx.Done():
			return fmt.Errorf("vmtest: qemu's control socket: %w", bootCtx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	v.frames = json.NewDecoder(bufio.NewReaderSize(v.conn, 1<<20))
	ready := make(chan error, 1)
	go func() {
		var f frame
		err := v.frames.Decode(&f)
		if err == nil && !f.Ready {
			err = fmt.Errorf("unexpected first frame %+v", f)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			return fmt.Errorf("vmtest: the guest's agent: %v; console: %s; qemu: %s", err, v.tail("console.log"), v.tail("qemu.log"))
		}
	case <-v.exited:
		return fmt.Errorf("vmtest: the guest stopped before its agent answered; console: %s", v.tail("console.log"))
	case <-bootCtx.Done():
		return fmt.Errorf("vmtest: boot: %w; console: %s", bootCtx.Err(), v.tail("console.log"))
	}
	v.BootTime = time.Since(start)
	return nil
}

// prepare loads the modules, starts udev and runs Setup.
func (v *VM) prepare(ctx context.Context) error {
	if len(v.opts.Modules) > 0 {
		if err := v.check(ctx, append([]string{"modprobe", "-a"}, v.opts.Modules...)...); err != nil {
			return err
		}
	}
	if v.opts.Udev {
		script := `/lib/systemd/systemd-udevd --daemon && udevadm trigger --action=add && udevadm settle --timeout=60`
		if err := v.check(ctx, "bash", "-c", script); err != nil {
			return err
		}
	}
	if v.opts.Setup == "" {
		return nil
	}
	envFile := "/run/vmtest.env"
	wd, _ := os.Getwd()
	res, err := v.Run(ctx, Command{Argv: []string{"bash", "-c", v.opts.Setup}, Dir: wd, Env: []string{"VMTEST_ENV=" + envFile}})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("vmtest: setup failed (exit %d):\n%s", res.ExitCode, res.Output)
	}
	res, err = v.Run(ctx, Command{Argv: []string{"cat", envFile}})
	if err != nil {
		return err
	}
	for _, l := range strings.Split(string(res.Output), "\n") {
		if strings.Contains(l, "=") && res.ExitCode == 0 {
			v.env = append(v.env, l)
		}
	}
	return nil
}

func (v *VM) check(ctx context.Context, argv ...string) error {
	res, err := v.Run(ctx, Command{Argv: argv})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("vmtest: %s: exit %d: %s", strings.Join(argv, " "), res.ExitCode, res.Output)
	}
	return nil
}

// tail is the end of a file in the VM's working directory, for errors.
func (v *VM) tail(name string) string {
	b, _ := os.ReadFile(filepath.Join(v.dir, name))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// Scratch is the writable directory shared with the guest, at the same
// path on both sides.
func (v *VM) Scratch() string { return v.scratch }

// Command is what Run runs in the guest.
type Command struct {
	// Argv is the program (looked up on the guest's PATH) and arguments.
	Argv []string
	// Dir is the working directory (default /).
	Dir string
	// Env is added to the guest's base environment (PATH, HOME,
	// TMPDIR=/run/tmp, CSIKIT_VMTEST_GUEST=1); Setup's variables win over
	// it (a host's CSIKIT_CEPH_* must not reach the guest's cluster).
	Env []string
	// Output, when set, receives the output (stdout and stderr
	// interleaved) as it comes.
	Output io.Writer
}

// Result is how a command ended.
type Result struct {
	// Output is its output (stdout and stderr interleaved).
	Output []byte
	// ExitCode is its exit status (128+N for signal N).
	ExitCode int
}

// Run runs c in the guest and waits for it. An error means the VM failed
// (and is closed), not the command: see Result.ExitCode.
func (v *VM) Run(ctx context.Context, c Command) (Result, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
		"TMPDIR=/run/tmp", GuestEnv + "=1", "LANG=C.UTF-8",
	}
	env = append(append(env, c.Env...), v.env...)
	dir := c.Dir
	if dir == "" {
		dir = "/"
	}
	line, err := json.Marshal(request{Argv: c.Argv, Dir: dir, Env: dedupEnv(env)})
	if err != nil {
		return Result{}, err
	}
	if _, err := v.conn.Write(append(line, '\n')); err != nil {
		return Result{}, v.fail(fmt.Errorf("vmtest: send: %w", err))
	}
	type result struct {
		f   frame
		err error
	}
	var out []byte
	for {
		ch := make(chan result, 1)
		go func() {
			var f frame
			err := v.frames.Decode(&f)
			ch <- result{f, err}
		}()
		var r result
		select {
		case r = <-ch:
		case <-ctx.Done():
			return Result{Output: out}, v.fail(fmt.Errorf("vmtest: %s: %w", strings.Join(c.Argv, " "), ctx.Err()))
		}
		if r.err != nil {
			return Result{Output: out}, v.fail(fmt.Errorf("vmtest: the guest's agent: %v; console: %s", r.err, v.tail("console.log")))
		}
		if len(r.f.Out) > 0 {
			out = append(out, r.f.Out...)
			if c.Output != nil {
				_, _ = c.Output.Write(r.f.Out)
			}
		}
		if r.f.Done {
			if r.f.Err != "" {
				return Result{Output: out, ExitCode: -1}, fmt.Errorf("vmtest: %s: %s", strings.Join(c.Argv, " "), r.f.Err)
			}
			return Result{Output: out, ExitCode: r.f.Exit}, nil
		}
	}
}

// dedupEnv keeps the last value of each variable.
func dedupEnv(env []string) []string {
	idx := map[string]int{}
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

func (v *VM) fail(err error) error {
	v.stop()
	return err
}

// Close powers the guest off (closing the agent's channel ends it) and
// waits for qemu, killing it by PID after 20 seconds; it removes the
// VM's working directory.
func (v *VM) Close() error {
	v.stop()
	return os.RemoveAll(v.dir)
}

func (v *VM) stop() {
	v.closing.Do(func() {
		if v.conn != nil {
			_ = v.conn.Close()
		}
		if v.qemu == nil || v.qemu.Process == nil {
			return
		}
		select {
		case <-v.exited:
		case <-time.After(20 * time.Second):
			_ = v.qemu.Process.Kill()
			<-v.exited
		}
	})
}
