package secrets_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/secrets"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func unquote(s string) string { return s[1 : len(s)-1] }

func jsonString(s string, html bool) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(html)
	if err := e.Encode(s); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// asciiJSON is JSON as Python's json.dumps (ensure_ascii) and many other
// encoders write it: every non-ASCII rune as \uXXXX, astral runes as
// surrogate pairs, in upper-case hex.
func asciiJSON(s string) string {
	var b strings.Builder
	for _, r := range unquote(jsonString(s, true)) {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04X\u%04X`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			fmt.Fprintf(&b, `\u%04X`, r)
		}
	}
	return `"` + b.String() + `"`
}

// Inner spellings: the escaped text of s without the surrounding quotes.
// Every supported escaper works character by character, so the spelling of
// a text is the concatenation of its parts' inner spellings.
func qi(s string) string  { return unquote(strconv.Quote(s)) }
func qai(s string) string { return unquote(strconv.QuoteToASCII(s)) }
func ji(s string) string  { return unquote(jsonString(s, true)) }

func protoJSON(s string) string {
	b, err := protojson.Marshal(wrapperspb.String(s))
	if err != nil {
		panic(err)
	}
	return string(b)
}

func slogJSON(s string) string {
	var b bytes.Buffer
	slog.New(slog.NewJSONHandler(&b, nil)).Error("call finished", "error", s)
	return b.String()
}

// forms are the spellings Redact must find. enc is applied to a whole text,
// so the secret is always embedded in a larger escaped string; inner, when
// set, spells the secret alone, and that spelling must not survive.
var forms = []struct {
	name  string
	enc   func(string) string
	inner func(string) string
}{
	{"raw", func(s string) string { return s }, func(s string) string { return s }},
	{"%q", func(s string) string { return fmt.Sprintf("%q", s) }, qi},
	{"%+q", func(s string) string { return fmt.Sprintf("%+q", s) }, qai},
	{"QuoteToGraphic", strconv.QuoteToGraphic, func(s string) string { return unquote(strconv.QuoteToGraphic(s)) }},
	{"%#v", func(s string) string { return fmt.Sprintf("%#v", s) }, nil},
	{"json", func(s string) string { return jsonString(s, true) }, ji},
	{"json-nohtml", func(s string) string { return jsonString(s, false) }, func(s string) string { return unquote(jsonString(s, false)) }},
	{"json-ascii", asciiJSON, func(s string) string { return unquote(asciiJSON(s)) }},
	{"protojson", protoJSON, func(s string) string { return unquote(protoJSON(s)) }},
	{"slog-json", slogJSON, nil},
	{"slog-text", func(s string) string {
		var b bytes.Buffer
		slog.New(slog.NewTextHandler(&b, nil)).Error("call finished", "error", s)
		return b.String()
	}, nil},
	{"query", url.QueryEscape, url.QueryEscape},
	{"path", url.PathEscape, url.PathEscape},
	{"userinfo", func(s string) string {
		return (&url.URL{Scheme: "https", User: url.UserPassword("admin", s), Host: "h"}).String()
	}, nil},
	// Two rounds: a %q'd secret in a JSON log line, JSON in a Go-quoted
	// error, a JSON body in a query string.
	{"json(%q)", func(s string) string { return jsonString(fmt.Sprintf("%q", s), true) }, func(s string) string { return ji(qi(s)) }},
	{"%q(json)", func(s string) string { return strconv.Quote(jsonString(s, true)) }, func(s string) string { return qi(ji(s)) }},
	{"slog-json(%+q)", func(s string) string { return slogJSON(fmt.Sprintf("bad key %+q", s)) }, func(s string) string { return ji(qai(s)) }},
	{"query(json)", func(s string) string { return url.QueryEscape(jsonString(s, true)) }, func(s string) string { return url.QueryEscape(ji(s)) }},
	{"json(query)", func(s string) string { return jsonString(url.QueryEscape(s), true) }, func(s string) string { return ji(url.QueryEscape(s)) }},
	{"%q(%q)", func(s string) string { return strconv.Quote(strconv.Quote(s)) }, func(s string) string { return qi(qi(s)) }},
}

// needles are the spellings of the secret alone; none may survive.
func needles(secret string) []string {
	var out []string
	for _, f := range forms {
		if f.inner != nil {
			out = append(out, f.inner(secret))
		}
	}
	return out
}

// checkRedacted fails t when any spelling of secret is left in got outside
// the markers, or when got holds no marker.
func checkRedacted(t *testing.T, form, text, got, secret string) {
	t.Helper()
	if !strings.Contains(got, secrets.Marker) {
		t.Fatalf("%s: secret %q not found in %q", form, secret, text)
	}
	for _, piece := range strings.Split(got, secrets.Marker) {
		for _, n := range needles(secret) {
			if strings.Contains(piece, n) {
				t.Fatalf("%s: secret %q: Redact(%q) = %q; still holds %q", form, secret, text, got, n)
			}
		}
	}
}

// alphabet favours what breaks naive matching: quotes, backslashes,
// control characters, HTML-escaped characters, multi-byte and astral runes,
// U+2028, and characters that need percent-encoding.
var alphabet = []rune("abcXYZ019-._~ \"'\\`/<>&%+=?#@:\n\r\t\x00\x01\x1b\x7féü€\u2028\u2029\U0001F600\uFFFD日本")

func randString(r *rand.Rand, minLen, maxLen int) string {
	n := minLen + r.IntN(maxLen-minLen+1)
	rs := make([]rune, n)
	for i := range rs {
		rs[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(rs)
}

// TestRedactEveryForm: for random secrets embedded in random text, every
// supported spelling of the text has every spelling of the secret redacted.
func TestRedactEveryForm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		secret := randString(r, 2, 12)
		for len(secret) < secrets.MinLen {
			secret += randString(r, 1, 1)
		}
		redactForms(t, secret, randString(r, 0, 8), randString(r, 0, 8))
	}
}

func redactForms(t *testing.T, secret, prefix, suffix string) {
	t.Helper()
	req := &csi.NodeStageVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"key": secret}}
	red := secrets.NewRedactor(req)
	for _, f := range forms {
		text := "mount failed «" + f.enc(prefix+secret+suffix) + "» exit 32"
		got := red.Redact(text)
		checkRedacted(t, f.name, text, got, secret)
		if got2 := secrets.Redact(text, req); got2 != got {
			t.Fatalf("%s: Redact = %q, Redactor.Redact = %q", f.name, got2, got)
		}
		// The guillemets cannot be part of a secret's spelling unless
		// the secret holds one.
		if !strings.ContainsAny(secret, "«»") && (!strings.HasPrefix(got, "mount failed «") || !strings.HasSuffix(got, "» exit 32")) {
			t.Fatalf("%s: Redact(%q) = %q; lost the text around the secret", f.name, text, got)
		}
	}
}

// FuzzRedact: the same property for any secret and surrounding text.
func FuzzRedact(f *testing.F) {
	f.Add(`p"ss\word`, "key ", "\n")
	f.Add("hunter2", "", "")
	f.Add("<&>\u2028日本\U0001F600", "a", "b")
	f.Add("\x00\x01\x7f ", " ", "%")
	f.Add(`\\\\`, `\`, `\`)
	f.Fuzz(func(t *testing.T, secret, prefix, suffix string) {
		if len(secret) < secrets.MinLen || !utf8.ValidString(secret) || !utf8.ValidString(prefix) || !utf8.ValidString(suffix) {
			return // proto3 strings are UTF-8; short values are not searched
		}
		redactForms(t, secret, prefix, suffix)
	})
}

func TestRedactOverlapping(t *testing.T) {
	req := &csi.NodeStageVolumeRequest{Secrets: map[string]string{"a": "abcdef", "b": "defghi", "c": "hunter2"}}
	for text, want := range map[string]string{
		"x abcdefghi y":             "x " + secrets.Marker + " y", // overlap: one marker, nothing left
		"abcdefdefghi":              secrets.Marker,               // touching
		"hunter2hunter2 hunter2":    secrets.Marker + " " + secrets.Marker,
		"hunter hunter3 abcde":      "hunter hunter3 abcde", // near misses are kept
		"\"hunter2\" and 'hunter2'": `"` + secrets.Marker + `" and '` + secrets.Marker + `'`,
	} {
		if got := secrets.Redact(text, req); got != want {
			t.Errorf("Redact(%q) = %q, want %q", text, got, want)
		}
	}
}

func TestRedactNoFalsePositives(t *testing.T) {
	req := &csi.NodeStageVolumeRequest{Secrets: map[string]string{"k": `p"ss\word`}}
	for _, text := range []string{
		`p"ss/word`, `p\"ss\\wor`, `pss\word`, `p'ss\word`, `p%22ss%5Cwor`, `p\u0022ss\u005cWord`,
	} {
		if got := secrets.Redact(text, req); got != text {
			t.Errorf("Redact(%q) = %q, want it unchanged", text, got)
		}
	}
	// Hex digits match in either case, escape letters only as written.
	for text, want := range map[string]string{
		`p\u0022ss\u005Cword`:   secrets.Marker,
		`p\U00000022ss\x5cword`: secrets.Marker,
		`p\U0022ss\x5cword`:     `p\U0022ss\x5cword`, // \U needs 8 digits
		`p\N0022ss\x5cword`:     `p\N0022ss\x5cword`,
		`p%22ss%5cword`:         secrets.Marker,
	} {
		if got := secrets.Redact(text, req); got != want {
			t.Errorf("Redact(%q) = %q, want %q", text, got, want)
		}
	}
}

func TestRedactShortSecrets(t *testing.T) {
	// 1-3 byte values are not searched for (see MinLen); Strip still
	// removes them from the message itself.
	req := &csi.NodeStageVolumeRequest{Secrets: map[string]string{"pin": "123", "a": "a", "ok": "1234"}}
	if got, want := secrets.Redact("pin 123, a, 1234", req), "pin 123, a, "+secrets.Marker; got != want {
		t.Errorf("Redact = %q, want %q", got, want)
	}
	if s := secrets.Format(req); strings.Contains(s, `"123"`) || strings.Contains(s, `"a":"a"`) {
		t.Errorf("Format = %s; short secrets must still be stripped", s)
	}
	if secrets.NewRedactor(&csi.NodeStageVolumeRequest{Secrets: map[string]string{"pin": "123"}}) != nil {
		t.Error("NewRedactor with only short values: want nil")
	}
}

func TestRedactBytesSecret(t *testing.T) {
	// A secret bytes field may hold bytes that are not UTF-8; JSON writes
	// each as \ufffd, Go's %q as \xHH.
	m := newFuture(t)
	setBytesKey(t, m, []byte("k\xffe\xfey"))
	for _, text := range []string{"k\xffe\xfey", `k\xffe\xFEy`, `k\ufffde\ufffdy`, "k\uFFFDe\uFFFDy", `k%FFe%fey`} {
		if got := secrets.Redact("x "+text, m); got != "x "+secrets.Marker {
			t.Errorf("Redact(%q) = %q", text, got)
		}
	}
}

func setBytesKey(t *testing.T, m proto.Message, b []byte) {
	t.Helper()
	rm := m.ProtoReflect()
	rm.Set(rm.Descriptor().Fields().ByName("key"), protoreflect.ValueOfBytes(b))
}

// adversarial is a secret and a text built to make matching costly: a long
// run of backslashes, each of which may be spelled with one, two or four.
func adversarial(n int) (secret, text string) {
	secret = strings.Repeat(`\`, n) + "x"
	return secret, strconv.Quote(strconv.Quote(strings.Repeat(`\`, 10*n) + secret))
}

// Matching work is bounded: a text too costly to check is withheld as a
// whole, never returned half-checked.
func TestRedactAdversarialIsBounded(t *testing.T) {
	for _, n := range []int{16, 100, 1000} {
		secret, text := adversarial(n)
		got := secrets.Redact(text, &csi.NodeStageVolumeRequest{Secrets: map[string]string{"k": secret}})
		for _, piece := range strings.Split(got, secrets.Marker) {
			for _, nd := range needles(secret) {
				if strings.Contains(piece, nd) {
					t.Fatalf("n=%d: Redact left %q", n, nd)
				}
			}
		}
		if !strings.Contains(got, secrets.Marker) {
			t.Fatalf("n=%d: nothing redacted", n)
		}
		t.Logf("n=%d: %d bytes in, %d out", n, len(text), len(got))
	}
}
