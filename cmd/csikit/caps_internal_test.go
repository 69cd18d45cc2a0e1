package main

import (
	"slices"
	"testing"
)

// TestCapsCoversEveryRPC: every RPC of the spec is tied to a capability,
// required of its service, or deliberately not probed, so a new spec
// version's RPC cannot be silently reported as "served but not
// advertised".
func TestCapsCoversEveryRPC(t *testing.T) {
	known := map[string]bool{}
	for _, rpcs := range capRPCs {
		for _, r := range rpcs {
			known[r] = true
		}
	}
	for _, rpcs := range requiredRPCs {
		for _, r := range rpcs {
			known[r] = true
		}
	}
	ms := csiMethods()
	if len(ms) < 30 {
		t.Fatalf("got %d CSI methods from the registry, want the spec's (over 30)", len(ms))
	}
	for _, m := range ms {
		if m.Service() != "Identity" && !known[m.Name()] && !slices.Contains(notProbed, m.Name()) {
			t.Errorf("%s is not tied to a capability in capRPCs, requiredRPCs or notProbed", m.Name())
		}
		delete(known, m.Name())
	}
	for r := range known {
		t.Errorf("capRPCs or requiredRPCs name %s, which the spec does not define", r)
	}
}
