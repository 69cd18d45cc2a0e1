package validation_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/csikit/csikit/csi/validation"
)

func TestValidPluginName(t *testing.T) {
	for name, want := range map[string]bool{
		"block.vendor.example": true, "a": true, "A-1.b": true, strings.Repeat("x", 63): true,
		"": false, strings.Repeat("x", 64): false, "-a": false, "a-": false, ".a": false, "a.": false,
		"a_b": false, "a/b": false, "a b": false, "ä": false, "a\n": false,
	} {
		if got := validation.ValidPluginName(name); got != want {
			t.Errorf("ValidPluginName(%q) = %v, want %v", name, got, want)
		}
	}
}

func ExampleValidPluginName() {
	fmt.Println(validation.ValidPluginName("hostpath.csikit.dev"), validation.ValidPluginName("hostpath_csi"))
	// Output: true false
}
