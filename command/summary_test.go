package command_test

import (
	"strings"
	"testing"

	"github.com/csikit/csikit/command"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct{ stdout, stderr, want string }{
		{"old_desc_blocks = 1, new_desc_blocks = 1\n", "resize2fs 1.47.0 (5-Feb-2023)\nPermission denied to resize filesystem\n", "Permission denied to resize filesystem"},
		{"last\n", "", "last"},
		{"", "bad option\nUsage: tool [-x]\n  -x  thing\n", "bad option"},
		{"", "one\ntwo\nthree\n", "one; two"},
		{"", "", ""},
	} {
		if got := command.Summarize([]byte(tc.stdout), []byte(tc.stderr)); got != tc.want {
			t.Errorf("Summarize(%q, %q) = %q, want %q", tc.stdout, tc.stderr, got, tc.want)
		}
	}
	if got := command.Summarize(nil, []byte(strings.Repeat("x", 1000))); len(got) > 304 {
		t.Errorf("got %d bytes, want at most 300 and an ellipsis", len(got))
	}
}
