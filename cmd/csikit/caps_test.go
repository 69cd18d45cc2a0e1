//go:build linux

package main_test

import (
	"regexp"
	"strings"
	"testing"
)

// TestCapsExamples: what examples/hostpath (with attach and modify on) and
// examples/tmpfs advertise is what they serve.
func TestCapsExamples(t *testing.T) {
	for name, ep := range map[string]func(*testing.T) string{
		"hostpath": func(t *testing.T) string { return hostpath(t, "--enable-attach", "--enable-modify").Endpoint },
		"tmpfs":    func(t *testing.T) string { return tmpfs(t).Endpoint },
	} {
		t.Run(name, func(t *testing.T) {
			r := csikit(t, "caps", ep(t)).want(t, 0)
			for _, s := range []string{"service CONTROLLER_SERVICE", "CREATE_DELETE_VOLUME", "Controller.CreateVolume", "every advertised RPC is served"} {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("got no %q in:\n%s", s, r.stdout)
				}
			}
			if strings.Contains(r.stdout, "MISMATCH") {
				t.Errorf("got a mismatch:\n%s", r.stdout)
			}
		})
	}
}

// TestCapsFindsMismatches: the planted driver advertises GET_VOLUME_STATS
// without serving NodeGetVolumeStats, and serves NodeExpandVolume and the
// SnapshotMetadata service without advertising EXPAND_VOLUME or
// SNAPSHOT_METADATA_SERVICE; caps names the three RPCs and exits 1. A
// driver that cannot be reached exits 1 too.
func TestCapsFindsMismatches(t *testing.T) {
	r := csikit(t, "caps", servePlanted(t)).want(t, 1)
	for _, re := range []string{
		`Node\.NodeGetVolumeStats +not served \(Unimplemented\) +advertised: Node GET_VOLUME_STATS +MISMATCH: advertised`,
		`Node\.NodeExpandVolume +served \(InvalidArgument\) +not advertised +MISMATCH: served but not advertised \(advertise Node EXPAND_VOLUME\)`,
		`Node\.NodeStageVolume +served \(InvalidArgument\) +advertised: Node STAGE_UNSTAGE_VOLUME +ok`,
		`Controller\.CreateVolume +not served \(Unimplemented\) +not advertised +ok`,
		`SnapshotMetadata\.GetMetadataAllocated +served \(InvalidArgument\) +not advertised +MISMATCH: served but not advertised \(advertise Plugin SNAPSHOT_METADATA_SERVICE\)`,
		`\n3 mismatch\(es\)`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("got no match for %q in:\n%s", re, r.stdout)
		}
	}
	r = csikit(t, "caps", "unix:///nonexistent/csi.sock", "--timeout", "2s").want(t, 1)
	if !strings.Contains(r.stderr, "Identity.GetPluginInfo: Unavailable") {
		t.Errorf("got stderr %q, want the failed GetPluginInfo", r.stderr)
	}
}
