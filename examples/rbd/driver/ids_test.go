package driver

import (
	"encoding/base64"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestVolumeIDRoundTrip(t *testing.T) {
	for _, v := range []volumeID{
		{pool: 0, hex: strings.Repeat("a", 32)},
		{pool: 17, block: true, hex: strings.Repeat("0", 32)},
		{pool: 3, block: true, clone: true, hex: "0123456789abcdef0123456789abcdef"},
		{pool: 9, clone: true, hex: "fedcba9876543210fedcba9876543210"},
	} {
		got, ok := parseVolumeID(v.String())
		if !ok || got != v {
			t.Errorf("parseVolumeID(%q) = %+v, %v; want %+v", v.String(), got, ok, v)
		}
		s := snapshotID{vol: v, hex: strings.Repeat("1", 32)}
		if gs, ok := parseSnapshotID(s.String()); !ok || gs != s {
			t.Errorf("parseSnapshotID(%q) = %+v, %v", s.String(), gs, ok)
		}
		if !strings.HasPrefix(v.image(), imagePrefix) || strings.ContainsAny(v.image(), "/@ ") {
			t.Errorf("image name %q", v.image())
		}
	}
}

// IDs from requests are untrusted: nothing but the exact format parses.
func TestParseRejects(t *testing.T) {
	h := strings.Repeat("a", 32)
	for _, s := range []string{
		"", "-", "1", "1-", "1-" + h, "1-x" + h, "01-m" + h, "-1-m" + h, "1-m" + h + "0",
		"1-m" + strings.Repeat("A", 32), "1-m../" + h[5:], "99999999999999999999-m" + h,
		"1-m" + h[:31] + "/", "1 -m" + h,
	} {
		if v, ok := parseVolumeID(s); ok {
			t.Errorf("parseVolumeID(%q) = %+v, want rejected", s, v)
		}
	}
	for _, s := range []string{"1-m" + h, "1-m" + h + "-", "1-m" + h + "-" + h + "0", "1-m" + h + "-../" + h[3:]} {
		if v, ok := parseSnapshotID(s); ok {
			t.Errorf("parseSnapshotID(%q) = %+v, want rejected", s, v)
		}
	}
}

// Hostile secret values are refused without being echoed. A key librados
// cannot decode must be refused here: librados prints it to stderr.
func TestCredentialsFromSecrets(t *testing.T) {
	// A key as `ceph-authtool --gen-print-key` makes (random, no user's).
	const key = "AQBclRFrs4piDhAALasghsba+AE0cGOcrjgtuw=="
	raw, _ := base64.StdEncoding.DecodeString(key)
	reencode := func(edit func(b []byte) []byte) string {
		return base64.StdEncoding.EncodeToString(edit(append([]byte(nil), raw...)))
	}
	good := map[string]string{SecretUserID: "kube", SecretUserKey: key}
	if c, err := CredentialsFromSecrets(good); err != nil || c.User != "kube" {
		t.Fatalf("CredentialsFromSecrets(good) = %v, %v", c, err)
	}
	for _, s := range []map[string]string{
		nil,
		{SecretUserID: "kube"},
		{SecretUserKey: "AQB"},
		{SecretUserID: "kube\n[client.admin]", SecretUserKey: "AQB"},
		{SecretUserID: "kube", SecretUserKey: "AQB\"\nkeyring = /etc/ceph/x"},
		{SecretUserID: "client.admin'", SecretUserKey: "AQB"},
		{SecretUserID: "..", SecretUserKey: "AQB"},
		// Base64 letters, but not a cephx key: librados would print them.
		{SecretUserID: "kube", SecretUserKey: "AQBxyz+/=="},
		{SecretUserID: "kube", SecretUserKey: "AQBr0wJnAAAAABAAwrongwrongwrongwrongwrong=="},
		{SecretUserID: "kube", SecretUserKey: key[:len(key)-3] + "x=="},                                 // non-zero padding bits
		{SecretUserID: "kube", SecretUserKey: reencode(func(b []byte) []byte { b[0] = 0; return b })},   // type NONE
		{SecretUserID: "kube", SecretUserKey: reencode(func(b []byte) []byte { b[10] = 32; return b })}, // length field 32
		{SecretUserID: "kube", SecretUserKey: reencode(func(b []byte) []byte { return b[:27] })},        // one byte short
		{SecretUserID: "kube", SecretUserKey: reencode(func(b []byte) []byte { return append(b, 0) })},  // one byte long
	} {
		_, err := CredentialsFromSecrets(s)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("CredentialsFromSecrets(%q): %v, want InvalidArgument", s, err)
			continue
		}
		for _, v := range s {
			if len(v) > 3 && strings.Contains(err.Error(), v) {
				t.Errorf("error %q echoes a secret value", err)
			}
		}
	}
	c, _ := CredentialsFromSecrets(good)
	for _, f := range []string{c.String(), c.GoString()} {
		if strings.Contains(f, key[:6]) || strings.Contains(f, "kube") {
			t.Errorf("Credentials print as %q", f)
		}
	}
}

func TestPaginate(t *testing.T) {
	all := []string{"a", "b", "c", "d", "e"}
	id := func(s string) string { return s }
	var got []string
	tok := ""
	for range 10 {
		page, next := paginate(all, id, tok, 2)
		got = append(got, page...)
		if next == "" {
			break
		}
		tok = next
	}
	if strings.Join(got, "") != "abcde" {
		t.Fatalf("pages gave %v", got)
	}
	// A token whose entry was deleted meanwhile continues after it.
	if page, _ := paginate([]string{"a", "c"}, id, "b", 0); len(page) != 1 || page[0] != "c" {
		t.Fatalf("paginate past a deleted token = %v", page)
	}
}
