package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/csikit/csikit/sanity"
)

// A config file's splitBrain section becomes the harness's
// SplitBrainConfig; a bad one is refused with what is wrong.
func TestSplitBrainConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sanity.yaml")
	if err := os.WriteFile(path, []byte(`areas: [SplitBrain]
splitBrain:
  nodeB: /run/csi/node-b.sock
  freeze: [rbd-fuse]
  checkCommand: test "$VOLUME_ID" = vol-1
  trials: 5
  settle: 3s
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := loadSanityConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.harnessConfig()
	if err != nil {
		t.Fatal(err)
	}
	sb := cfg.SplitBrain
	if cfg.Areas != sanity.SplitBrain || sb == nil || sb.NodeB != "/run/csi/node-b.sock" || sb.Trials != 5 || sb.Settle != 3*time.Second || sb.Freeze == nil {
		t.Fatalf("got %+v / %+v", cfg, sb)
	}
	if err := sb.Check(context.Background(), "vol-1"); err != nil {
		t.Fatalf("check command with VOLUME_ID=vol-1: %v", err)
	}
	if err := sb.Check(context.Background(), "vol-2"); err == nil {
		t.Fatal("check command with VOLUME_ID=vol-2 passed, want its failure")
	}
	for bad, want := range map[string]string{
		`{"nodeB": ""}`:                     "nodeB",
		`{"nodeB": "/x", "settle": "soon"}`: "settle",
		`{"nodeB": "/x", "checkDevice": "a", "checkCommand": "b"}`: "want one",
	} {
		var s splitBrainConfig
		c := sanityConfig{SplitBrain: &s}
		if err := yaml.UnmarshalStrict([]byte(bad), &s); err != nil {
			t.Fatal(err)
		}
		if _, err := c.harnessConfig(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("splitBrain %s: %v, want an error about %s", bad, err, want)
		}
	}
}
