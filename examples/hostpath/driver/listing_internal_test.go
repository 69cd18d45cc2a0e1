//go:build linux

package driver

import (
	"encoding/json"
	"testing"
	"time"
)

// TestVolumeListingDecodesAsEncodingJSON checks the listing's own decoder
// against encoding/json: on records json.Marshal wrote, with every field
// set or empty and strings that need escapes, and on hand-written JSON it
// must hand over or reject as encoding/json does.
func TestVolumeListingDecodesAsEncodingJSON(t *testing.T) {
	var inputs [][]byte
	for _, v := range []volume{
		{},
		{ID: "v1", Name: "pvc-1", Capacity: 1 << 30, Kind: "directory", Created: time.Now()},
		{ID: "v2", Name: "a \"quoted\"\nname}{,]", Capacity: -1, Kind: "block", FSType: "ext4",
			Source: "snapshot:s1", Params: map[string]string{"k}": "v\\\"", "": "[", "x,": "{\"a\":1}"},
			AttachedTo: "node-1", AttachedRO: true, Ephemeral: true, ProjectID: 7,
			Published: []string{"/a,b", "/c\"d]"}},
		{ID: "v\"3", Kind: "dir\\ectory", FSType: "x\u2028y", AttachedTo: "n\x01"},
	} {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, raw)
	}
	for _, s := range []string{
		`{}`, ` { "id" : "a" , "capacity" : 12 } `, `{"ID":"a"}`, `{"Id":"a","id":"b"}`,
		`{"id":"a","id":"b"}`, `{"capacity":1.5}`, `{"capacity":"1"}`, `{"capacity":99999999999999999999}`,
		`{"id":1}`, `{"id":null}`, `{"x":{"y":[1,{"z":"}"}]},"id":"a"}`, `{"x":true,"kind":"k"}`,
		`{"x":null}`, `{"x":-1e5,"fsType":"xfs"}`, `{"id":"a"`, `{"id":"a"}x`, `{"id":"a",}`,
		`{"x":"\"}","id":"q"}`, `[]`, ``, `{"x":[1,2}`, `{"id":"\u0041"}`,
	} {
		inputs = append(inputs, []byte(s))
	}
	type plain volumeListing
	for _, raw := range inputs {
		var want plain
		wantErr := json.Unmarshal(raw, &want)
		// Decoded with no key, with the record's ID as its key (shared,
		// not copied), with another key, and over a record decoded
		// before (a walk reuses one).
		for _, key := range []string{"", want.ID, "other"} {
			got := volumeListing{ID: "stale", Capacity: 9, Kind: kindFS, FSType: "stale", AttachedTo: "stale"}
			err := got.decodeRecord(key, raw)
			if (err != nil) != (wantErr != nil) {
				t.Errorf("%s (key %q): error %v, encoding/json's %v", raw, key, err, wantErr)
				continue
			}
			if err == nil && got != volumeListing(want) {
				t.Errorf("%s (key %q): decoded %+v, encoding/json %+v", raw, key, got, want)
			}
		}
	}
}

// BenchmarkVolumeListing decodes one volume record for a ListVolumes
// entry.
func BenchmarkVolumeListing(b *testing.B) {
	raw, _ := json.Marshal(volume{ID: "0123456789abcdef0123456789abcdef", Name: "pvc-0123456789abcdef0123456789abcdef",
		Capacity: 1 << 30, Kind: "directory", Params: map[string]string{"kind": "directory"}, ProjectID: 1234,
		AttachedTo: "node-1", Created: time.Now()})
	b.Run("listing", func(b *testing.B) {
		for b.Loop() {
			var l volumeListing
			if err := l.decodeRecord("0123456789abcdef0123456789abcdef", raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("volume", func(b *testing.B) {
		for b.Loop() {
			var v volume
			if err := json.Unmarshal(raw, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
