package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/mount"
)

// goBlocks returns the README's ```go blocks, without their fences.
func goBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	rest := string(b)
	for {
		_, after, ok := strings.Cut(rest, "```go\n")
		if !ok {
			return blocks
		}
		block, after, ok := strings.Cut(after, "```\n")
		if !ok {
			t.Fatal("README.md: a ```go block is never closed")
		}
		blocks = append(blocks, block)
		rest = after
	}
}

// TestREADMEMatchesCompiledCode: the README's quickstart is main.go byte
// for byte, and its LookupVolume snippet is the function in
// lookup_test.go, so neither can use a field or name the minimal driver
// does not have (as the snippet once did).
func TestREADMEMatchesCompiledCode(t *testing.T) {
	blocks := goBlocks(t)
	mainGo, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	lookupGo, err := os.ReadFile("lookup_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var quickstart, lookup int
	for _, b := range blocks {
		switch {
		case strings.HasPrefix(b, "// Command minimal "):
			quickstart++
			if b != string(mainGo) {
				t.Errorf("README.md's quickstart is not examples/minimal/main.go; copy main.go into it.\nREADME:\n%s", b)
			}
		case strings.Contains(b, ") LookupVolume("):
			lookup++
			_, fn, _ := strings.Cut(string(lookupGo), "\nfunc (d driver) LookupVolume(")
			if want := "func (d driver) LookupVolume(" + fn; b != want {
				t.Errorf("README.md's LookupVolume snippet is not the one in examples/minimal/lookup_test.go; copy it from there.\nREADME:\n%s\nlookup_test.go:\n%s", b, want)
			}
		}
	}
	if quickstart != 1 || lookup != 1 {
		t.Errorf("README.md has %d quickstart blocks and %d LookupVolume blocks, want one each", quickstart, lookup)
	}
}

// controller is the minimal driver grown into a controller, as the README
// describes: CreateVolume and DeleteVolume, plus the snippet's
// LookupVolume, without which NewServer refuses it.
type controller struct{ driver }

func (controller) CreateVolume(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := os.MkdirAll(filepath.Join(os.TempDir(), "minimal-csi", filepath.Base(r.Name)), 0o750); err != nil {
		return nil, err
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: filepath.Base(r.Name)}}, nil
}

func (controller) DeleteVolume(ctx context.Context, r *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return &csi.DeleteVolumeResponse{}, os.RemoveAll(filepath.Join(os.TempDir(), "minimal-csi", filepath.Base(r.VolumeId)))
}

// provisionerOnly has CreateVolume and DeleteVolume but no LookupVolume.
type provisionerOnly struct{}

func (provisionerOnly) CreateVolume(context.Context, *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return nil, nil
}

func (provisionerOnly) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return nil, nil
}

// TestLookupVolumeAnswersValidate: what the README says about the snippet
// holds. Without a lookup NewServer refuses a controller; with it csikit
// answers ValidateVolumeCapabilities, NotFound for a volume that does not
// exist and confirmed for one that does.
func TestLookupVolumeAnswersValidate(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	opts := csikit.Options{Name: "minimal.csikit.dev", Version: "v0.1.0", NodeID: "node-1"}
	if _, err := csikit.NewServer(provisionerOnly{}, opts); err == nil || !strings.Contains(err.Error(), "LookupVolume") {
		t.Fatalf("NewServer of a controller without LookupVolume: %v, want an error naming LookupVolume", err)
	}
	s := csitest.NewServer(t, controller{driver{mount.New(mount.Options{})}}, opts)
	ctx := context.Background()
	mountCap := []*csi.VolumeCapability{{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}}
	_, err := s.Controller.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "missing", VolumeCapabilities: mountCap})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("ValidateVolumeCapabilities of a missing volume: %v, want NotFound", err)
	}
	vol, err := s.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: mountCap})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Controller.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: vol.GetVolume().GetVolumeId(), VolumeCapabilities: mountCap})
	if err != nil || resp.GetConfirmed() == nil {
		t.Fatalf("ValidateVolumeCapabilities of an existing volume: %v, %v, want it confirmed", resp, err)
	}
}
