package locks

import "testing"

// TestShardHashCollision forces two keys into one hash slot, which random
// keys never reach, and checks both stay independently lockable.
func TestShardHashCollision(t *testing.T) {
	s := &shard{m: make(map[uint64]entry)}
	a, b := Key{Space: SpaceVolume, ID: "a"}, Key{Space: SpaceVolume, ID: "b"}
	const h = 42
	s.store(h, entry{key: a, method: "A"})
	s.store(h, entry{key: b, method: "B"})
	if s.len() != 2 || len(s.overflow) != 1 {
		t.Fatalf("after two stores: got len %d, overflow %d; want 2, 1", s.len(), len(s.overflow))
	}
	for _, k := range []Key{a, b} {
		if e, held, _ := s.find(h, k); !held || e.key != k {
			t.Fatalf("find %v: got %+v, %v", k, e, held)
		}
	}
	// Remove the primary; the overflow key must still be found.
	_, _, inOverflow := s.find(h, a)
	s.remove(h, a, inOverflow)
	if _, held, _ := s.find(h, a); held {
		t.Error("a after remove: got held, want gone")
	}
	e, held, inOverflow := s.find(h, b)
	if !held || e.method != "B" || !inOverflow {
		t.Fatalf("b after removing a: got %+v, held %v, overflow %v", e, held, inOverflow)
	}
	// Updating b (a Shared count) keeps it in overflow, not in the freed slot.
	e.shared = 2
	s.store(h, e)
	if len(s.overflow) != 1 || len(s.m) != 0 || s.len() != 1 {
		t.Fatalf("update of b: got primary %d, overflow %d; want 0, 1", len(s.m), len(s.overflow))
	}
	// Storing a while b sits in overflow puts a back in the primary slot.
	s.store(h, entry{key: a, method: "A2"})
	if e, held, _ := s.find(h, a); !held || e.method != "A2" {
		t.Errorf("a re-stored: got %+v, %v", e, held)
	}
	s.remove(h, b, true)
	_, _, inOverflow = s.find(h, a)
	s.remove(h, a, inOverflow)
	if s.len() != 0 {
		t.Errorf("after removing both: got len %d, want 0", s.len())
	}
}
