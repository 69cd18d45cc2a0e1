package crypt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/command"
	"github.com/csikit/csikit/internal/logctx"
)

// MapperDir is where device-mapper puts the nodes of named mappings.
const MapperDir = "/dev/mapper"

// HeaderBytes is what the LUKS2 header Format writes takes at the start
// of the device (two 16 KiB metadata copies and 4064 KiB of key slots,
// room for 15 argon2id slots): a mapping is this much smaller than its
// device. A driver that promises a capacity makes the device that much
// bigger. (cryptsetup's default is 16 MiB.)
const HeaderBytes = 4 << 20

// mappingPrefix starts every mapping name MappingName makes.
const mappingPrefix = "csikit-"

// MappingName is the device-mapper name of the mapping of volumeID:
// "csikit-" and the first 32 hex digits of the ID's SHA-256. It is valid
// for any ID (device-mapper names are at most 127 bytes and may not
// contain '/'), the same on every node and after every restart, and
// distinct for distinct IDs.
func MappingName(volumeID string) string {
	sum := sha256.Sum256([]byte(volumeID))
	return mappingPrefix + hex.EncodeToString(sum[:16])
}

// Prober tells what a device holds: "" when it is blank, else the type of
// its file system, partition table or other signature ("crypto_LUKS" for
// LUKS), as blkid reports it. *mount.Mounter is one (DiskFormat).
type Prober interface {
	DiskFormat(ctx context.Context, device string) (string, error)
}

// PBKDF is how a key slot derives its key from the passphrase. The zero
// value is argon2id, 64 MiB, 4 passes, 1 thread.
type PBKDF struct {
	// Type is "argon2id" (default), "argon2i" or "pbkdf2".
	Type string
	// MemoryKiB is argon2's memory cost in KiB (default 65536).
	MemoryKiB int
	// Iterations is argon2's time cost (default 4, the least cryptsetup
	// takes) or PBKDF2's iteration count (default 600000).
	Iterations int
	// Parallel is argon2's thread count (default 1).
	Parallel int
}

func (p PBKDF) args() ([]string, error) {
	switch p.Type {
	case "", "argon2id", "argon2i":
		if p.Type == "" {
			p.Type = "argon2id"
		}
		if p.MemoryKiB == 0 {
			p.MemoryKiB = 64 << 10
		}
		if p.Iterations == 0 {
			p.Iterations = 4
		}
		if p.Parallel == 0 {
			p.Parallel = 1
		}
		if p.MemoryKiB < 32 || p.Iterations < 4 || p.Parallel < 1 {
			return nil, status.Errorf(codes.InvalidArgument,
				"argon2 parameters memory %d KiB, %d passes, %d threads: want at least 32 KiB, 4 passes, 1 thread",
				p.MemoryKiB, p.Iterations, p.Parallel)
		}
		return []string{"--pbkdf", p.Type, "--pbkdf-memory", strconv.Itoa(p.MemoryKiB),
			"--pbkdf-force-iterations", strconv.Itoa(p.Iterations),
			"--pbkdf-parallel", strconv.Itoa(p.Parallel)}, nil
	case "pbkdf2":
		if p.Iterations == 0 {
			p.Iterations = 600000
		}
		if p.Iterations < 1000 {
			return nil, status.Errorf(codes.InvalidArgument, "pbkdf2 with %d iterations: want at least 1000", p.Iterations)
		}
		return []string{"--pbkdf", "pbkdf2", "--hash", "sha256",
			"--pbkdf-force-iterations", strconv.Itoa(p.Iterations)}, nil
	}
	return nil, status.Errorf(codes.InvalidArgument, "key derivation %q: want argon2id, argon2i or pbkdf2", p.Type)
}

// RunFunc runs a program the way command.Run does.
type RunFunc func(ctx context.Context, name string, args []string, opts command.Options) (command.Result, error)

// Options configure a Crypt.
type Options struct {
	// Prober tells a blank device from one with data before Format; it is
	// required (mount.New(mount.Options{}) is one).
	Prober Prober
	// PBKDF is the key derivation of the key slots Format writes.
	PBKDF PBKDF
	// Logger receives one line per state change (format, open, close,
	// resize), never a key. nil: the call's logger (see
	// csi/logging.FromContext), else discarded.
	Logger *slog.Logger
	// Run runs cryptsetup; default command.Run. Tests replace it.
	Run RunFunc
	// Cryptsetup is the program's name or path; default "cryptsetup".
	Cryptsetup string
}

// Crypt formats, opens, closes and resizes LUKS2 volumes. It is safe for
// concurrent use; callers serialise calls on one device or mapping (csikit
// does, by volume ID).
type Crypt struct {
	o         Options
	log       *slog.Logger
	mapperDir string                           // MapperDir; tests point it elsewhere
	sizeOf    func(path string) (int64, error) // a mapping's size; tests fake it
}

// New returns a Crypt configured by o.
func New(o Options) *Crypt {
	if o.Run == nil {
		o.Run = command.Run
	}
	if o.Cryptsetup == "" {
		o.Cryptsetup = "cryptsetup"
	}
	var base slog.Handler
	if o.Logger != nil {
		base = o.Logger.Handler()
	}
	return &Crypt{o: o, log: slog.New(logctx.NewHandler(base)), mapperDir: MapperDir, sizeOf: block.DeviceSize}
}

// run runs cryptsetup with args; key, when not nil, goes to its stdin.
func (c *Crypt) run(ctx context.Context, key []byte, args ...string) (command.Result, error) {
	return c.o.Run(ctx, c.o.Cryptsetup, args, command.Options{Secret: key})
}

// exitCode is cryptsetup's exit status in err, -1 for none.
func exitCode(err error) int {
	var ce *command.Error
	if errors.As(err, &ce) {
		return ce.ExitCode
	}
	return -1
}

// wrap turns a cryptsetup failure into an error with a gRPC code: the
// context's for a stopped call, code otherwise.
func wrap(ctx context.Context, err error, code codes.Code, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if ctx.Err() != nil {
		var ce *command.Error
		if errors.As(err, &ce) {
			return status.Errorf(ce.Code(), "%s: %v", msg, err)
		}
	}
	if errors.Is(err, exec.ErrNotFound) {
		return status.Errorf(codes.FailedPrecondition, "%s: %v (install cryptsetup, Debian package cryptsetup-bin)", msg, err)
	}
	return status.Errorf(code, "%s: %v", msg, err)
}

func checkKey(key []byte) error {
	if len(key) == 0 {
		return status.Error(codes.InvalidArgument, "encryption key is empty")
	}
	return nil
}

func checkDevice(device string) error {
	if !strings.HasPrefix(device, "/") || strings.ContainsRune(device, 0) {
		return status.Errorf(codes.InvalidArgument, "device %q is not an absolute path", device)
	}
	return nil
}

func checkName(name string) error {
	if name == "" || len(name) > 127 || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." || strings.HasPrefix(name, "-") {
		return status.Errorf(codes.InvalidArgument, "mapping name %q is not a valid device-mapper name (use MappingName)", name)
	}
	return nil
}

// IsLUKS reports whether device starts with a LUKS header (of any version).
func (c *Crypt) IsLUKS(ctx context.Context, device string) (bool, error) {
	if err := checkDevice(device); err != nil {
		return false, err
	}
	_, err := c.run(ctx, nil, "isLuks", device)
	switch {
	case err == nil:
		return true, nil
	case exitCode(err) == 1:
		return false, nil
	case exitCode(err) == 4:
		return false, status.Errorf(codes.NotFound, "device %s: %v", device, err)
	}
	return false, wrap(ctx, err, codes.Internal, "check for a LUKS header on %s", device)
}

// Format writes a LUKS2 header with one key slot for key to device, when
// device is blank. A device holding LUKS already is left untouched and
// Format returns nil (formatted is false); anything else on it is refused
// with codes.FailedPrecondition. Format does not check that key opens an
// existing header: Open does.
func (c *Crypt) Format(ctx context.Context, device string, key []byte) (formatted bool, err error) {
	if err := checkDevice(device); err != nil {
		return false, err
	}
	if err := checkKey(key); err != nil {
		return false, err
	}
	if c.o.Prober == nil {
		return false, status.Error(codes.Internal, "crypt: Options.Prober is nil: no blank check, refusing to format")
	}
	kdf, err := c.o.PBKDF.args()
	if err != nil {
		return false, err
	}
	format, err := c.o.Prober.DiskFormat(ctx, device)
	if err != nil {
		return false, err
	}
	switch format {
	case "":
	case "crypto_LUKS":
		return false, nil
	default:
		return false, status.Errorf(codes.FailedPrecondition,
			"device %s already holds %q: refusing to format it for encryption", device, format)
	}
	// blkid may miss a header it cannot parse; cryptsetup knows its own.
	if luks, err := c.IsLUKS(ctx, device); err != nil || luks {
		return false, err
	}
	args := append([]string{"luksFormat", "--batch-mode", "--type", "luks2",
		"--cipher", "aes-xts-plain64", "--key-size", "512",
		"--luks2-metadata-size", "16k", "--luks2-keyslots-size", "4064k"}, kdf...)
	args = append(args, "--key-file=-", device)
	c.log.InfoContext(ctx, "formatting LUKS2", "device", device, "pbkdf", kdf)
	if _, err := c.run(ctx, key, args...); err != nil {
		return false, wrap(ctx, err, codes.Internal, "format %s as LUKS2", device)
	}
	return true, nil
}

// Status is what a mapping is.
type Status struct {
	// Active reports whether the mapping exists.
	Active bool
	// Path is the mapping's device node (/dev/mapper/<name>).
	Path string
	// Device is the backing device, as cryptsetup names it.
	Device string
	// Type is the header's type ("LUKS2").
	Type string
	// Sectors is the mapping's size in 512-byte sectors.
	Sectors int64
	// InUse reports that something holds the mapping open (a mount).
	InUse bool
}

// Status reports the mapping name: Active is false (and the error nil)
// when there is none. A mapping whose node is missing from /dev/mapper
// counts as none, without a cryptsetup run (the common case at stage:
// each run costs a process and libcryptsetup's start); a mapping without
// its node could not be mounted or published anyway.
func (c *Crypt) Status(ctx context.Context, name string) (Status, error) {
	if err := checkName(name); err != nil {
		return Status{}, err
	}
	if _, err := os.Lstat(filepath.Join(c.mapperDir, name)); errors.Is(err, fs.ErrNotExist) {
		return Status{Path: filepath.Join(MapperDir, name)}, nil
	}
	return c.status(ctx, name)
}

// status is Status by `cryptsetup status`, also for a mapping without
// its node.
func (c *Crypt) status(ctx context.Context, name string) (Status, error) {
	res, err := c.run(ctx, nil, "status", name)
	if exitCode(err) == 4 {
		return Status{Path: filepath.Join(MapperDir, name)}, nil
	}
	if err != nil {
		return Status{}, wrap(ctx, err, codes.Internal, "status of mapping %s", name)
	}
	return parseStatus(name, string(res.Stdout)), nil
}

// parseStatus reads `cryptsetup status` output.
func parseStatus(name, out string) Status {
	s := Status{Active: true, Path: filepath.Join(MapperDir, name)}
	for i, line := range strings.Split(out, "\n") {
		if i == 0 {
			s.InUse = strings.Contains(line, "in use")
			continue
		}
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "type":
			s.Type = v
		case "device":
			s.Device = v
		case "size":
			n, _, _ := strings.Cut(v, " ")
			s.Sectors, _ = strconv.ParseInt(n, 10, 64)
		}
	}
	return s
}

// sameDevice reports whether the paths name one device node.
func sameDevice(a, b string) bool {
	if a == b {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return false
	}
	if ra == rb {
		return true
	}
	fa, err1 := os.Stat(ra)
	fb, err2 := os.Stat(rb)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// Open maps the LUKS device as name and returns the mapping's device node
// (/dev/mapper/<name>). A mapping of that name over the same device is
// returned as is, without checking key; one over another device gives
// codes.AlreadyExists. A key that opens no key slot gives
// codes.InvalidArgument; a device without a LUKS header,
// codes.FailedPrecondition. Discards pass through when allowDiscards is
// set (TRIM from the file system frees space on thin storage, and tells
// an observer of the device which blocks are in use).
func (c *Crypt) Open(ctx context.Context, device, name string, key []byte, allowDiscards bool) (string, error) {
	if err := checkDevice(device); err != nil {
		return "", err
	}
	if err := checkName(name); err != nil {
		return "", err
	}
	st, err := c.Status(ctx, name)
	if err != nil {
		return "", err
	}
	if st.Active {
		if !sameDevice(st.Device, device) {
			return "", status.Errorf(codes.AlreadyExists, "mapping %s already maps %s, not %s", name, st.Device, device)
		}
		return st.Path, nil
	}
	if err := checkKey(key); err != nil {
		return "", err
	}
	// No isLuks first: cryptsetup open checks the header itself, and a
	// failure is told apart below, off the common path.
	args := []string{"open", "--type", "luks2", "--key-file=-"}
	if allowDiscards {
		args = append(args, "--allow-discards")
	}
	args = append(args, device, name)
	if _, err := c.run(ctx, key, args...); err != nil {
		switch exitCode(err) {
		case 2:
			return "", status.Errorf(codes.InvalidArgument,
				"the encryption key does not open the LUKS header on %s (no key slot takes it): check the node-stage secret; the device was not changed", device)
		case 5:
			// Mapped already, its node missing (a /dev apart from the
			// host's), or the device busy.
			if st, serr := c.status(ctx, name); serr == nil && st.Active && sameDevice(st.Device, device) {
				return st.Path, nil
			}
			return "", status.Errorf(codes.AlreadyExists, "mapping %s exists or %s is in use: %v", name, device, err)
		}
		if ctx.Err() == nil {
			if luks, lerr := c.IsLUKS(ctx, device); lerr != nil {
				return "", lerr
			} else if !luks {
				return "", status.Errorf(codes.FailedPrecondition, "device %s has no LUKS header: format it first", device)
			}
		}
		return "", wrap(ctx, err, codes.Internal, "open %s as %s", device, name)
	}
	c.log.InfoContext(ctx, "opened", "device", device, "mapping", name)
	return filepath.Join(MapperDir, name), nil
}

// Close removes the mapping name. A missing mapping is not an error; a
// mapping still in use (mounted) gives codes.FailedPrecondition.
func (c *Crypt) Close(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	// No status first: close of a missing mapping fails with 4. (Not the
	// node check of Status either: a mapping whose node is missing must
	// still be closed.)
	if _, err := c.run(ctx, nil, "close", name); err != nil {
		if exitCode(err) == 4 { // no such mapping
			return nil
		}
		if exitCode(err) == 5 {
			return status.Errorf(codes.FailedPrecondition, "mapping %s is in use (still mounted?): %v", name, err)
		}
		return wrap(ctx, err, codes.Internal, "close mapping %s", name)
	}
	c.log.InfoContext(ctx, "closed", "mapping", name)
	return nil
}

// Resize grows the open mapping name to the size of its backing device
// (after the device grew), online. LUKS2 keeps the volume key in the
// kernel keyring, so cryptsetup needs key again. It returns the mapping's
// new size in bytes.
func (c *Crypt) Resize(ctx context.Context, name string, key []byte) (int64, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	if err := checkName(name); err != nil {
		return 0, err
	}
	notOpen := status.Errorf(codes.FailedPrecondition, "mapping %s is not open: stage the volume first", name)
	node := filepath.Join(c.mapperDir, name)
	before, err := c.sizeOf(node)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, notOpen
	}
	if _, err := c.run(ctx, key, "resize", "--key-file=-", name); err != nil {
		switch exitCode(err) {
		case 2:
			return 0, status.Errorf(codes.InvalidArgument,
				"the encryption key does not open the LUKS header of mapping %s: check the node-stage secret", name)
		case 4:
			return 0, notOpen
		}
		return 0, wrap(ctx, err, codes.Internal, "resize mapping %s", name)
	}
	after, err := c.sizeOf(node)
	if err != nil {
		return 0, status.Errorf(codes.Internal, "size of mapping %s after the resize: %v", name, err)
	}
	if after != before {
		c.log.InfoContext(ctx, "resized mapping", "mapping", name, "from", before, "to", after)
	}
	return after, nil
}
