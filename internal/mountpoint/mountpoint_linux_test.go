package mountpoint_test

import (
	"testing"

	"github.com/csikit/csikit/internal/mountpoint"
)

func TestUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/t\011x\134`: "/t\tx\\", `/short\04`: `/short\04`} {
		if got := mountpoint.UnescapeOctal(in); got != want {
			t.Errorf("UnescapeOctal(%q) = %q, want %q", in, got, want)
		}
	}
}
