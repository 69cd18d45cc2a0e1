package command

import (
	"regexp"
	"strings"
)

// maxSummary bounds a summary, in bytes.
const maxSummary = 300

// banner matches the version lines tools print before anything else:
// "mke2fs 1.47.0 (5-Feb-2023)", "fsck from util-linux 2.38.1",
// "mkfs.xfs version 6.1.0".
var banner = regexp.MustCompile(`^[\w.+-]+ (from [\w.+-]+ |version )?v?\d+(\.\d+)+[\w.~+-]*( \([^)]*\))?$`)

// meaningful returns the lines of out that say something: not blank, not a
// version banner, and none from a usage text on (a tool that rejects its
// arguments prints the reason, then "Usage: …" and the whole synopsis).
func meaningful(out []byte) []string {
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || banner.MatchString(l):
			continue
		case strings.HasPrefix(strings.ToLower(l), "usage:"):
			return lines
		}
		lines = append(lines, l)
	}
	return lines
}

// Summarize reduces the output of a failed command to the line or two that
// name the cause, for an error message. Tools write the reason to stderr,
// first; stdout holds progress (resize2fs's "old_desc_blocks = 1, …") that
// hides it when the two are merged. So Summarize takes the first two
// meaningful lines of stderr, joined with "; ", skipping blank lines,
// version banners ("mke2fs 1.47.0 (5-Feb-2023)") and any usage text; when
// stderr says nothing it falls back to the last meaningful line of stdout.
// The result is at most 300 bytes, "" when neither stream says anything.
func Summarize(stdout, stderr []byte) string {
	var s string
	if lines := meaningful(stderr); len(lines) > 0 {
		s = strings.Join(lines[:min(2, len(lines))], "; ")
	} else if lines := meaningful(stdout); len(lines) > 0 {
		s = lines[len(lines)-1]
	}
	if len(s) > maxSummary {
		s = strings.ToValidUTF8(s[:maxSummary], "") + "…"
	}
	return s
}
