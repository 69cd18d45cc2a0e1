//go:build linux

package driver

import (
	"encoding/json"
	"reflect"
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
			if err := v.decodeRecord("0123456789abcdef0123456789abcdef", raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("volume-encoding-json", func(b *testing.B) {
		for b.Loop() {
			var v volume
			if err := json.Unmarshal(raw, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestVolumeDecodesAsEncodingJSON checks the volume record's own decoder
// against encoding/json, as TestVolumeListingDecodesAsEncodingJSON does
// the listing's.
func TestVolumeDecodesAsEncodingJSON(t *testing.T) {
	for _, raw := range volumeDecodeInputs(t) {
		checkVolumeDecode(t, raw)
	}
}

// FuzzVolumeDecodesAsEncodingJSON: whatever the bytes, decodeRecord agrees
// with encoding/json (go test -fuzz FuzzVolumeDecodesAsEncodingJSON; plain
// go test runs the seeds, TestVolumeDecodesAsEncodingJSON's inputs).
func FuzzVolumeDecodesAsEncodingJSON(f *testing.F) {
	for _, raw := range volumeDecodeInputs(f) {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkVolumeDecode(t, raw) })
}

// volumeDecodeInputs are records json.Marshal wrote and hand-written ones
// that the fast decoder must hand to encoding/json or read as it does.
func volumeDecodeInputs(t testing.TB) [][]byte {
	var inputs [][]byte
	for _, v := range []volume{
		{},
		{ID: "v1", Name: "pvc-1", Capacity: 1 << 30, Kind: "directory", Created: time.Now(), Params: map[string]string{}, Published: []string{}},
		{ID: "v2", Name: "a \"quoted\"\nname}{,]", Capacity: -1, Kind: "block", FSType: "ext4",
			Source: "snapshot:s1", Params: map[string]string{"k}": "v\\\"", "": "[", "x,": "{\"a\":1}"},
			AttachedTo: "node-1", AttachedRO: true, Ephemeral: true, ProjectID: 7,
			Published: []string{"/a,b", "/c\"d]"}},
		{ID: "v3", Name: "n", Capacity: 5, Kind: "filesystem", FSType: "xfs", Source: "volume:v1",
			Params: map[string]string{"encrypted": "true", "a": "b"}, AttachedTo: "node-2", ProjectID: 1<<32 - 1,
			Created: time.Date(2026, 12, 5, 3, 4, 5, 6, time.FixedZone("x", 3600)), Published: []string{"/p", "/q"}},
		{ID: "v\"3", Kind: "dir\\ectory", FSType: "x\u2028y", AttachedTo: "n\x01"},
	} {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, raw)
	}
	for _, s := range []string{
		`{}`, ` { "id" : "a" , "capacity" : 12 , "params" : { "a" : "b" } , "published" : [ "x" , "y" ] } `,
		`{"ID":"a"}`, `{"Params":{}}`, `{"id":"a","id":"b"}`, `{"capacity":1.5}`, `{"capacity":"1"}`,
		`{"capacity":01}`, `{"capacity":-0}`, `{"capacity":-01}`, `{"capacity":99999999999999999999}`,
		`{"projectId":-1}`, `{"projectId":4294967296}`, `{"projectId":07}`, `{"projectId":1e3}`,
		`{"attachedRO":true}`, `{"attachedRO":false,"ephemeral":true}`, `{"ephemeral":1}`, `{"ephemeral":truex}`,
		`{"ephemeral":null}`, `{"params":null}`, `{"params":{"a":1}}`, `{"params":{"a":"1"},"params":{"b":"2"}}`,
		`{"params":{"a":"1","a":"2"}}`, `{"params":{"a":"1",}}`, `{"published":null}`, `{"published":["a",]}`,
		`{"published":["a"],"published":["b"]}`, `{"published":[1]}`, `{"created":"2026-12-05T03:04:05Z"}`,
		`{"created":"2026-12-05T03:04:05.123+01:00"}`, `{"created":"2026-12-05"}`, `{"created":null}`,
		`{"created":"2026-12-05T03:04:05\u005a"}`, `{"id":1}`, `{"id":null}`, `{"x":{"y":[1,{"z":"}"}]},"id":"a"}`,
		`{"x":true,"kind":"k"}`, `{"id":"a"`, `{"id":"a"}x`, `{"id":"a",}`, `[]`, ``, `{"id":"\u0041"}`,
	} {
		inputs = append(inputs, []byte(s))
	}
	return inputs
}

// checkVolumeDecode decodes raw over a stale value with three record keys
// and compares the result with encoding/json's.
func checkVolumeDecode(t *testing.T, raw []byte) {
	t.Helper()
	var want volume
	wantErr := json.Unmarshal(raw, &want)
	for _, key := range []string{"", want.ID, "other"} {
		got := volume{ID: "stale", Capacity: 9, Kind: kindFS, Params: map[string]string{"stale": "x"},
			Published: []string{"stale"}, ProjectID: 3, AttachedRO: true, Created: time.Now()}
		err := got.decodeRecord(key, raw)
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%s (key %q): error %v, encoding/json's %v", raw, key, err, wantErr)
			continue
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s (key %q): decoded %+v, encoding/json %+v", raw, key, got, want)
		}
	}
}
