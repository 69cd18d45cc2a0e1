package secrets_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/secrets"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestRedactManySecrets: a request with 100,000 secrets (a tenant-named
// Secret of about 1.5 MiB) — token-like values, some with escapable
// characters, some inside others — has every one of 300 of them found in
// a text that spells them raw, %q-quoted, JSON-encoded, percent-encoded
// and quoted twice, with the text between them kept. Before the
// automaton, building this Redactor alone took about a minute
// (de-duplication compared each value with all before it).
func TestRedactManySecrets(t *testing.T) {
	const n = 100_000
	r := rand.New(rand.NewPCG(5, 6))
	m := make(map[string]string, n)
	vals := make([]string, 0, n)
	for i := range n {
		v := fmt.Sprintf("tok%07dQx", r.IntN(1<<30))
		switch i % 5 {
		case 1:
			v = fmt.Sprintf("tk%d+/=%d", i, r.IntN(1000)) // base64-ish
		case 2:
			v = fmt.Sprintf(`p"w\%d é`, i)
		case 3:
			v = vals[len(vals)-1][1:] // a secret inside the one before
		}
		m["k"+strconv.Itoa(i)] = v
		vals = append(vals, v)
	}
	red := secrets.NewRedactor(&csi.NodeStageVolumeRequest{Secrets: m})
	spell := []func(string) string{
		func(s string) string { return s },
		strconv.Quote,
		func(s string) string { b, _ := json.Marshal(s); return string(b) },
		url.QueryEscape,
		func(s string) string { return strconv.Quote(strconv.Quote(s)) },
	}
	var text strings.Builder
	var used []string
	for i := range 300 {
		v := vals[r.IntN(n)]
		used = append(used, v)
		fmt.Fprintf(&text, " <%d> %s", i, spell[i%len(spell)](v))
	}
	text.WriteString(" <end>")
	got := red.Redact(text.String())
	if got == secrets.Marker {
		t.Fatal("text withheld whole: it is not too costly to check")
	}
	for _, v := range used {
		for _, f := range spell {
			if strings.Contains(got, f(v)) {
				t.Fatalf("%q (as %q) left in %.200q…", v, f(v), got)
			}
		}
	}
	for i := range 300 {
		if !strings.Contains(got, fmt.Sprintf(" <%d> ", i)) {
			t.Fatalf("text around the secrets lost: no <%d> in %.200q…", i, got)
		}
	}
	if tail := got[strings.LastIndex(got, " <299> "):]; !strings.Contains(tail, secrets.Marker) || !strings.HasSuffix(tail, " <end>") {
		t.Errorf("Redact = …%q, want the last secret replaced and <end> kept", tail)
	}
	// The interceptor's path: the error's message loses them too.
	err := secrets.RedactError(status.Error(codes.Internal, "map failed: "+strconv.Quote(used[0])),
		&csi.NodeStageVolumeRequest{Secrets: m})
	if msg := status.Convert(err).Message(); msg != `map failed: "`+secrets.Marker+`"` {
		t.Errorf("RedactError = %q", msg)
	}
}
