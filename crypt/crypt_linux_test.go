//go:build linux

package crypt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/command"
	"github.com/csikit/csikit/crypt"
	"github.com/csikit/csikit/csitest/vmtest"
	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/mount"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helper())
	}
	os.Exit(vmtest.Main(m))
}

// VM are the modules the tests need in the VM lane.
var VM = vmtest.Options{Modules: []string{"dm-crypt", "loop", "ext4", "xfs"}}

// inCryptVM runs the calling test in the VM when this kernel has no
// dm-crypt; true means it ran there and the caller returns.
func inCryptVM(t *testing.T) bool {
	t.Helper()
	if dmCryptWorks() {
		return false
	}
	return vmtest.Delegate(t, VM)
}

// dmCryptWorks reports whether device-mapper's crypt target is usable here.
func dmCryptWorks() bool {
	if _, err := os.Stat("/dev/mapper/control"); err != nil {
		return false
	}
	b, err := os.ReadFile("/proc/crypto")
	return err == nil && bytes.Contains(b, []byte("xts(aes)")) || vmtest.InGuest()
}

// testPBKDF keeps the tests' key slots cheap (the VM may run under TCG);
// TestRoundTrip uses argon2id.
var testPBKDF = crypt.PBKDF{Type: "pbkdf2", Iterations: 1000}

// loopDevice attaches a sparse image of size bytes; cleanup detaches it.
func loopDevice(t *testing.T, size int64) (img, dev string) {
	t.Helper()
	testenv.RequireRoot(t, "attaches loop devices and opens dm-crypt mappings")
	testenv.RequireCommand(t, "cryptsetup", "cryptsetup-bin")
	img = filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	dev, err := block.AttachLoop(context.Background(), img, block.LoopOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = block.DetachLoop(context.Background(), dev) })
	return img, dev
}

func newCrypt(t *testing.T, log *slog.Logger, run crypt.RunFunc) *crypt.Crypt {
	return crypt.New(crypt.Options{Prober: mount.New(mount.Options{}), PBKDF: testPBKDF, Logger: log, Run: run})
}

// closeAtCleanup closes the mapping when the test ends.
func closeAtCleanup(t *testing.T, c *crypt.Crypt, name string) {
	t.Cleanup(func() { _ = c.Close(context.Background(), name) })
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v (%v), want %v", status.Code(err), err, code)
	}
}

func TestMappingName(t *testing.T) {
	ids := []string{"", "a", "pvc-0a1b", strings.Repeat("x", 300), "a/../b", "ünï cødé\n", "-rf"}
	seen := map[string]string{}
	for _, id := range ids {
		n := crypt.MappingName(id)
		if len(n) > 127 || strings.ContainsAny(n, "/ \n") || !strings.HasPrefix(n, "csikit-") || len(n) != len(crypt.MappingName("z")) {
			t.Errorf("MappingName(%q) = %q: not a safe fixed-length dm name", id, n)
		}
		if crypt.MappingName(id) != n {
			t.Errorf("MappingName(%q) not stable", id)
		}
		if prev, ok := seen[n]; ok {
			t.Errorf("MappingName(%q) == MappingName(%q)", id, prev)
		}
		seen[n] = id
	}
}

func TestBadArguments(t *testing.T) {
	c := crypt.New(crypt.Options{Prober: mount.New(mount.Options{})})
	ctx := context.Background()
	_, err := c.Format(ctx, "relative", []byte("k"))
	wantCode(t, err, codes.InvalidArgument)
	_, err = c.Format(ctx, "/dev/null", nil)
	wantCode(t, err, codes.InvalidArgument)
	_, err = c.Open(ctx, "/dev/null", "a/b", []byte("k"), false)
	wantCode(t, err, codes.InvalidArgument)
	wantCode(t, c.Close(ctx, "../x"), codes.InvalidArgument)
	_, err = crypt.New(crypt.Options{}).Format(ctx, "/dev/null", []byte("k"))
	wantCode(t, err, codes.Internal) // no Prober: never format unchecked
	_, err = crypt.New(crypt.Options{Prober: mount.New(mount.Options{}), PBKDF: crypt.PBKDF{Type: "md5"}}).Format(ctx, "/dev/null", []byte("k"))
	wantCode(t, err, codes.InvalidArgument)
}

// TestRoundTrip formats, opens, writes a canary through the mapping and
// finds it nowhere in the raw image; reopening and closing twice are no-ops.
func TestRoundTrip(t *testing.T) {
	if inCryptVM(t) {
		return
	}
	img, dev := loopDevice(t, 64<<20)
	c := crypt.New(crypt.Options{Prober: mount.New(mount.Options{}), PBKDF: crypt.PBKDF{MemoryKiB: 8 << 10}})
	ctx := context.Background()
	key := []byte("correct horse battery staple")
	if luks, err := c.IsLUKS(ctx, dev); err != nil || luks {
		t.Fatalf("IsLUKS(blank) = %v, %v", luks, err)
	}
	formatted, err := c.Format(ctx, dev, key)
	if err != nil || !formatted {
		t.Fatalf("Format = %v, %v", formatted, err)
	}
	if formatted, err := c.Format(ctx, dev, key); err != nil || formatted {
		t.Fatalf("second Format = %v, %v; want false, nil (left alone)", formatted, err)
	}
	if luks, err := c.IsLUKS(ctx, dev); err != nil || !luks {
		t.Fatalf("IsLUKS(formatted) = %v, %v", luks, err)
	}
	name := crypt.MappingName(t.Name())
	closeAtCleanup(t, c, name)
	path, err := c.Open(ctx, dev, name, key, false)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.Open(ctx, dev, name, key, false); err != nil || again != path {
		t.Fatalf("second Open = %q, %v; want %q", again, err, path)
	}
	st, err := c.Status(ctx, name)
	if err != nil || !st.Active || st.Type != "LUKS2" || st.Sectors == 0 || st.Path != path {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	// Another device under the same name is refused.
	_, dev2 := loopDevice(t, 32<<20)
	_, err = c.Open(ctx, dev2, name, key, false)
	wantCode(t, err, codes.AlreadyExists)

	canary := bytes.Repeat([]byte("CSIKIT-PLAINTEXT-CANARY-"), 4096)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(canary, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := c.Close(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx, name); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if st, err := c.Status(ctx, name); err != nil || st.Active {
		t.Fatalf("Status after Close = %+v, %v", st, err)
	}
	raw, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("CSIKIT-PLAINTEXT-CANARY")) {
		t.Fatal("plaintext canary found in the raw image")
	}
	// The data is there for the key.
	if _, err := c.Open(ctx, dev, name, key, false); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(canary))
	g, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.ReadAt(got, 1<<20); err != nil || !bytes.Equal(got, canary) {
		t.Fatalf("canary not read back through the mapping: %v", err)
	}
}

// header reads the first 16 MiB of path (the LUKS2 header area).
func header(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 16<<20)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWrongKey: a key that opens no slot is InvalidArgument, and not one
// byte of the header changes.
func TestWrongKey(t *testing.T) {
	if inCryptVM(t) {
		return
	}
	img, dev := loopDevice(t, 64<<20)
	c := newCrypt(t, nil, nil)
	ctx := context.Background()
	if _, err := c.Format(ctx, dev, []byte("right key")); err != nil {
		t.Fatal(err)
	}
	before := header(t, img)
	name := crypt.MappingName(t.Name())
	closeAtCleanup(t, c, name)
	for _, wrong := range [][]byte{[]byte("right key\n"), []byte("right ke")} {
		_, err := c.Open(ctx, dev, name, wrong, false)
		wantCode(t, err, codes.InvalidArgument)
		if !strings.Contains(err.Error(), "does not open") {
			t.Errorf("message %q does not say the key is wrong", err)
		}
		// Format with the wrong key must not touch it either.
		if formatted, err := c.Format(ctx, dev, wrong); err != nil || formatted {
			t.Fatalf("Format over LUKS = %v, %v", formatted, err)
		}
	}
	if st, err := c.Status(ctx, name); err != nil || st.Active {
		t.Fatalf("a mapping exists after wrong keys: %+v, %v", st, err)
	}
	if !bytes.Equal(before, header(t, img)) {
		t.Fatal("the LUKS header changed after opens with a wrong key")
	}
}

// TestRefusesData: a device with a file system or a partition table is
// never formatted.
func TestRefusesData(t *testing.T) {
	if inCryptVM(t) {
		return
	}
	ctx := context.Background()
	c := newCrypt(t, nil, nil)
	for _, tc := range []struct {
		name string
		prep []string
	}{
		{"ext4", []string{"mkfs.ext4", "-q", "-F"}},
		{"mbr", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, dev := loopDevice(t, 64<<20)
			if tc.prep != nil {
				testenv.RequireCommand(t, tc.prep[0], "e2fsprogs")
				cmd := exec.Command(tc.prep[0], append(tc.prep[1:], dev)...)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%v: %v: %s", cmd.Args, err, out)
				}
			} else { // a DOS partition table with one Linux partition
				mbr := make([]byte, 512)
				copy(mbr[446:], []byte{0, 0, 0, 0, 0x83, 0, 0, 0, 0, 8, 0, 0, 0, 0xf8, 1, 0})
				mbr[510], mbr[511] = 0x55, 0xaa
				f, err := os.OpenFile(dev, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				_, err = f.WriteAt(mbr, 0)
				if err == nil {
					err = f.Sync()
				}
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			before := header(t, img)
			_, err := c.Format(ctx, dev, []byte("k"))
			wantCode(t, err, codes.FailedPrecondition)
			if !bytes.Equal(before, header(t, img)) {
				t.Fatal("the device changed")
			}
		})
	}
}

// helperEnv makes the test binary a helper that formats the device named
// by the env value with the key on stdin and then SIGKILLs itself before
// it opens it: a driver killed between format and open.
const helperEnv = "CRYPT_TEST_FORMAT_THEN_DIE"

func helper() int {
	key, _ := io.ReadAll(os.Stdin)
	c := crypt.New(crypt.Options{Prober: mount.New(mount.Options{}), PBKDF: testPBKDF})
	if _, err := c.Format(context.Background(), os.Getenv(helperEnv), key); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	p, _ := os.FindProcess(os.Getpid())
	_ = p.Signal(os.Kill)
	time.Sleep(time.Minute)
	return 4
}

// TestKilledBetweenFormatAndOpen: the retry opens what the killed process
// formatted, with the data written before... and does not format again.
func TestKilledBetweenFormatAndOpen(t *testing.T) {
	if inCryptVM(t) {
		return
	}
	img, dev := loopDevice(t, 64<<20)
	key := []byte("k\"e'y\nwith newline\n")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+dev)
	cmd.Stdin = bytes.NewReader(key)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.String() != "signal: killed" {
		t.Fatalf("helper: %v: %s", err, out)
	}
	before := header(t, img)
	c := newCrypt(t, nil, nil)
	ctx := context.Background()
	if formatted, err := c.Format(ctx, dev, key); err != nil || formatted {
		t.Fatalf("retry Format = %v, %v; want false, nil", formatted, err)
	}
	if !bytes.Equal(before, header(t, img)) {
		t.Fatal("the retry rewrote the header")
	}
	name := crypt.MappingName(t.Name())
	closeAtCleanup(t, c, name)
	if _, err := c.Open(ctx, dev, name, key, false); err != nil {
		t.Fatalf("retry Open: %v", err)
	}
}

// TestKeyNeverExposed watches every cryptsetup process while it runs: the
// key is in none's argv or environment, and in no log line or error.
func TestKeyNeverExposed(t *testing.T) {
	if inCryptVM(t) {
		return
	}
	_, dev := loopDevice(t, 64<<20)
	key := []byte("s3cr3t \"quoted\" 'single' $HOME `x`\nsecond line\n")
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var mu sync.Mutex
	var seen []string
	var watched int
	run := func(ctx context.Context, name string, args []string, o command.Options) (command.Result, error) {
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				ents, _ := os.ReadDir("/proc")
				for _, e := range ents {
					if _, err := strconv.Atoi(e.Name()); err != nil {
						continue
					}
					comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
					if strings.TrimSpace(string(comm)) != "cryptsetup" {
						continue
					}
					cl, err1 := os.ReadFile("/proc/" + e.Name() + "/cmdline")
					env, err2 := os.ReadFile("/proc/" + e.Name() + "/environ")
					if err1 != nil || err2 != nil || len(cl) == 0 {
						continue
					}
					mu.Lock()
					watched++
					seen = append(seen, string(cl), string(env))
					mu.Unlock()
				}
				time.Sleep(3 * time.Millisecond) // cryptsetup runs for tens of ms at least
			}
		}()
		res, err := command.Run(ctx, name, args, o)
		close(done)
		wg.Wait()
		return res, err
	}
	c := newCrypt(t, log, run)
	ctx := context.Background()
	if _, err := c.Format(ctx, dev, key); err != nil {
		t.Fatal(err)
	}
	name := crypt.MappingName(t.Name())
	closeAtCleanup(t, c, name)
	if _, err := c.Open(ctx, dev, name, key, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resize(ctx, name, key); err != nil {
		t.Fatal(err)
	}
	_ = c.Close(ctx, name)
	_, werr := c.Open(ctx, dev, name, append([]byte("wrong"), key...), false)
	mu.Lock()
	defer mu.Unlock()
	if watched == 0 {
		t.Fatal("saw no cryptsetup process running: the check proved nothing")
	}
	t.Logf("read argv and environ of %d cryptsetup process snapshots", watched)
	for _, part := range append(bytes.Split(key, []byte("\n")), key) {
		if len(bytes.TrimSpace(part)) < 4 {
			continue
		}
		for _, s := range seen {
			if strings.Contains(s, string(part)) {
				t.Fatalf("key material %q in a cryptsetup process's argv or environ", part)
			}
		}
		if bytes.Contains(logs.Bytes(), part) {
			t.Fatalf("key material %q in the log:\n%s", part, logs.String())
		}
		if werr == nil || strings.Contains(werr.Error(), string(part)) {
			t.Fatalf("wrong-key error %v holds key material", werr)
		}
	}
	if logs.Len() == 0 {
		t.Fatal("no log lines: the check proved nothing")
	}
}

// TestResizeOnline grows the backing device and then the open mapping.
func TestResizeOnline(t *testing.T) {
	if inCryptVM(t) {
		return
	}
	img, dev := loopDevice(t, 64<<20)
	c := newCrypt(t, nil, nil)
	ctx := context.Background()
	key := []byte("key")
	if _, err := c.Format(ctx, dev, key); err != nil {
		t.Fatal(err)
	}
	name := crypt.MappingName(t.Name())
	closeAtCleanup(t, c, name)
	path, err := c.Open(ctx, dev, name, key, false)
	if err != nil {
		t.Fatal(err)
	}
	before, err := block.DeviceSize(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 128<<20); err != nil {
		t.Fatal(err)
	}
	if err := block.RefreshLoopSize(ctx, dev); err != nil {
		t.Fatal(err)
	}
	size, err := c.Resize(ctx, name, key)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := block.DeviceSize(path)
	if after != size || after != before+64<<20 {
		t.Fatalf("mapping %d bytes before, %d after (Resize said %d); want +64 MiB", before, after, size)
	}
	if again, err := c.Resize(ctx, name, key); err != nil || again != size {
		t.Fatalf("second Resize = %d, %v", again, err)
	}
	_ = c.Close(ctx, name)
	_, err = c.Resize(ctx, name, key)
	wantCode(t, err, codes.FailedPrecondition)
}
