package sanity

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// Every way a driver commonly prints a secret is found, and the report
// names the key and the form, never the value.
func TestFindSecretsEscapedForms(t *testing.T) {
	secrets := DefaultSecrets()
	v := secrets["sanity-secret-escaped"]
	asJSON, _ := json.Marshal(map[string]string{"password": v})
	var slogText, slogJSON strings.Builder
	slog.New(slog.NewTextHandler(&slogText, nil)).Info("creating", "secret", v)
	slog.New(slog.NewJSONHandler(&slogJSON, nil)).Info("creating", "secret", fmt.Sprintf("%q", v))
	for name, text := range map[string]string{
		"raw":                   "got " + v,
		"fmt %q":                fmt.Sprintf("credentials %q", v),
		"fmt %+q":               fmt.Sprintf("credentials %+q", v),
		"fmt %v of a map":       fmt.Sprintf("credentials %v", secrets),
		"encoding/json":         string(asJSON),
		"slog text":             slogText.String(),
		"slog JSON of a %q":     slogJSON.String(),
		"ASCII-only JSON":       `{"password":"` + asciiJSON(jsonInner(v, false)) + `"}`,
		"a message in a status": `rpc error: code = NotFound desc = volume not found (tried ` + fmt.Sprintf("%q", v) + `)`,
	} {
		got := findSecrets([]byte(text), map[string]string{"sanity-secret-escaped": v})
		if len(got) != 1 || !strings.HasPrefix(got[0], `secret "sanity-secret-escaped" (`) {
			t.Errorf("%s: got %v, want the secret found", name, got)
		}
		for _, g := range got {
			for _, f := range secretForms(v) {
				if strings.Contains(g, f.value) {
					t.Errorf("%s: the report %q holds the secret (%s)", name, g, f.name)
				}
			}
		}
	}
	if got := findSecrets([]byte("sanity-secret-escaped and sanity-secret are keys, not values"), secrets); len(got) != 0 {
		t.Errorf("got %v for a text holding only the keys, want nothing", got)
	}
}

// The default secrets hold what escaping changes, so that the escaped
// forms differ from the raw one and are really searched for.
func TestDefaultSecretsNeedEscaping(t *testing.T) {
	a, b := DefaultSecrets(), DefaultSecrets()
	if a["sanity-secret"] == b["sanity-secret"] || a["sanity-secret-escaped"] == b["sanity-secret-escaped"] {
		t.Errorf("got the same secrets twice, want random values per Config")
	}
	v := a["sanity-secret-escaped"]
	for _, c := range []string{`"`, `\`, "\n", "ü"} {
		if !strings.Contains(v, c) {
			t.Errorf("default escaped secret lacks %q", c)
		}
	}
	if n := len(secretForms(v)); n < 5 {
		t.Errorf("got %d distinct forms of the escaped secret, want at least raw, %%q, %%+q, JSON and ASCII JSON", n)
	}
}
