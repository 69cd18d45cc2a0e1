package crypt_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/command"
	"github.com/csikit/csikit/crypt"
	"github.com/csikit/csikit/mount"
)

// fakeCryptsetup answers crypt's cryptsetup runs as cryptsetup would (exit
// codes, status output) from a model of devices and mappings, and counts
// them. An open mapping is a file in dir, which stands in for /dev/mapper.
type fakeCryptsetup struct {
	dir       string
	key       string
	formatted map[string]bool   // device → has a LUKS header
	open      map[string]string // mapping → device
	runs      []string
}

func newFake(t *testing.T) *fakeCryptsetup {
	return &fakeCryptsetup{dir: t.TempDir(), key: "fake key", formatted: map[string]bool{}, open: map[string]string{}}
}

// crypt is a Crypt running f as its cryptsetup, blkid and mapping sizes.
func (f *fakeCryptsetup) crypt() *crypt.Crypt {
	c := crypt.New(crypt.Options{Prober: f, Run: f.run, PBKDF: crypt.PBKDF{Type: "pbkdf2", Iterations: 1000}})
	crypt.SetMapperDir(c, f.dir)
	crypt.SetSizeOf(c, func(path string) (int64, error) {
		if _, err := os.Stat(path); err != nil {
			return 0, err
		}
		return 8192 * 512, nil
	})
	return c
}

func (f *fakeCryptsetup) exit(code int) error {
	return &command.Error{Command: "cryptsetup", ExitCode: code}
}

func (f *fakeCryptsetup) run(_ context.Context, _ string, args []string, o command.Options) (command.Result, error) {
	f.runs = append(f.runs, args[0])
	last := args[len(args)-1]
	switch args[0] {
	case "status":
		dev, ok := f.open[last]
		if !ok {
			return command.Result{}, f.exit(4)
		}
		return command.Result{Stdout: []byte(fmt.Sprintf("%s/%s is active.\n  type:    LUKS2\n  device:  %s\n  size:    8192 sectors\n", f.dir, last, dev))}, nil
	case "isLuks":
		if !f.formatted[last] {
			return command.Result{}, f.exit(1)
		}
	case "luksFormat":
		f.formatted[last] = true
	case "open":
		dev := args[len(args)-2]
		switch {
		case !f.formatted[dev]:
			return command.Result{}, f.exit(1)
		case string(o.Secret) != f.key:
			return command.Result{}, f.exit(2)
		case f.open[last] != "":
			return command.Result{}, f.exit(5)
		}
		f.open[last] = dev
		if err := os.WriteFile(filepath.Join(f.dir, last), nil, 0o600); err != nil {
			return command.Result{}, err
		}
	case "close":
		if _, ok := f.open[last]; !ok {
			return command.Result{}, f.exit(4)
		}
		delete(f.open, last)
		_ = os.Remove(filepath.Join(f.dir, last))
	case "resize":
		if _, ok := f.open[last]; !ok {
			return command.Result{}, f.exit(4)
		}
	default:
		return command.Result{}, f.exit(1)
	}
	return command.Result{}, nil
}

// DiskFormat is the fake's blkid: LUKS or blank.
func (f *fakeCryptsetup) DiskFormat(_ context.Context, dev string) (string, error) {
	if f.formatted[dev] {
		return "crypto_LUKS", nil
	}
	return "", nil
}

// take returns the runs since the last call.
func (f *fakeCryptsetup) take() []string {
	r := f.runs
	f.runs = nil
	return r
}

// TestCryptsetupRuns counts the cryptsetup runs of each step of an
// encrypted volume's node life, through mount.Mounter's encryption calls
// (as NodeStageVolume, NodeUnstageVolume and NodeExpandVolume make them)
// and the Run hook. Each run costs a fork, an exec and libcryptsetup's
// start (a device-mapper version check, locking): about 10 ms on a
// node, far more under load. Before this count was kept the first stage
// took 6 runs (status, isLuks, luksFormat, status, isLuks, open), a
// restage 4 (status, status, isLuks, open), an idempotent stage 2, an
// unstage 2 (status, close) and an expansion 3 (status, resize, status);
// now 3, 1, 1, 1 and 1.
func TestCryptsetupRuns(t *testing.T) {
	f := newFake(t)
	m := mount.New(mount.Options{Crypt: f.crypt()})
	ctx := context.Background()
	const dev = "/dev/fake0"
	e := mount.Encryption{VolumeID: "pvc-runs", Key: crypt.StaticKey(f.key)}
	for _, step := range []struct {
		name string
		do   func() error
		want string
	}{
		{"first stage (format, open)", func() error { _, err := m.OpenEncrypted(ctx, dev, e, false); return err }, "isLuks luksFormat open"},
		{"stage again (idempotent)", func() error { _, err := m.OpenEncrypted(ctx, dev, e, false); return err }, "status"},
		{"expand", func() error { _, err := m.ResizeEncrypted(ctx, e); return err }, "resize"},
		{"unstage", func() error { return m.CloseEncrypted(ctx, e.VolumeID) }, "close"},
		{"unstage again", func() error { return m.CloseEncrypted(ctx, e.VolumeID) }, "close"},
		{"expand when not open", func() error {
			if _, err := m.ResizeEncrypted(ctx, e); codeOf(err) != "FailedPrecondition" {
				return fmt.Errorf("ResizeEncrypted = %v; want FailedPrecondition", err)
			}
			return nil
		}, ""},
		{"restage (open)", func() error { _, err := m.OpenEncrypted(ctx, dev, e, false); return err }, "open"},
		{"read-only restage after close", func() error {
			if err := m.CloseEncrypted(ctx, e.VolumeID); err != nil {
				return err
			}
			f.take()
			_, err := m.OpenEncrypted(ctx, dev, e, true)
			return err
		}, "open"},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got := strings.Join(f.take(), " ")
		t.Logf("%s: %d cryptsetup runs (%s)", step.name, len(strings.Fields(got)), got)
		if got != step.want {
			t.Errorf("%s ran cryptsetup %q; want %q", step.name, got, step.want)
		}
	}
}

// TestOpenRefusalsWithFewerRuns: the runs cut from the success path
// still tell the failures apart: a device without a LUKS header is
// FailedPrecondition, a wrong key InvalidArgument, a mapping of the name
// over another device AlreadyExists.
func TestOpenRefusalsWithFewerRuns(t *testing.T) {
	f := newFake(t)
	c := f.crypt()
	ctx := context.Background()
	name := crypt.MappingName("pvc-refusals")
	if _, err := c.Open(ctx, "/dev/fake1", name, []byte(f.key), false); codeOf(err) != "FailedPrecondition" {
		t.Errorf("open of a blank device: %v; want FailedPrecondition", err)
	}
	f.formatted["/dev/fake1"], f.formatted["/dev/fake2"] = true, true
	if _, err := c.Open(ctx, "/dev/fake1", name, []byte("wrong"), false); codeOf(err) != "InvalidArgument" {
		t.Errorf("open with a wrong key: %v; want InvalidArgument", err)
	}
	if _, err := c.Open(ctx, "/dev/fake1", name, []byte(f.key), false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Open(ctx, "/dev/fake2", name, []byte(f.key), false); codeOf(err) != "AlreadyExists" {
		t.Errorf("open of the name over another device: %v; want AlreadyExists", err)
	}
}

// codeOf is err's gRPC code's name.
func codeOf(err error) string { return status.Code(err).String() }
