package mount

import (
	"errors"

	"github.com/csikit/csikit/command"
)

// Summarize reduces the output of a failed command to the line or two that
// name the cause, for an error message. It is command.Summarize: the first
// two meaningful lines of stderr, joined with "; ", skipping blank lines,
// version banners ("mke2fs 1.47.0 (5-Feb-2023)") and any usage text; when
// stderr says nothing, the last meaningful line of stdout. The result is at
// most 300 bytes, "" when neither stream says anything.
func Summarize(stdout, stderr []byte) string { return command.Summarize(stdout, stderr) }

// Summary is the cause of the failure for an error message: Summarize of
// Stdout and Stderr when the Runner kept them apart, else the last
// meaningful line of Output.
func (e *ExitError) Summary() string {
	if e.Stdout != nil || e.Stderr != nil {
		return Summarize(e.Stdout, e.Stderr)
	}
	return Summarize(e.Output, nil)
}

// summary is the cause of a failed command: Summarize of its streams when
// err is an *ExitError that kept them apart, else the last meaningful line
// of out, the combined output a custom Runner returned (where the reason
// comes last, as a tool's final word after its progress).
func summary(out []byte, err error) string {
	var ee *ExitError
	if errors.As(err, &ee) && (ee.Stdout != nil || ee.Stderr != nil) {
		return ee.Summary()
	}
	return Summarize(out, nil)
}

// outputSuffix is ": " and the summary of a failed command's output, to end
// a message with, or "" when the command printed nothing — so a message
// never holds an empty fragment ("format …: : exec: …").
func outputSuffix(out []byte, err error) string {
	if s := summary(out, err); s != "" {
		return ": " + s
	}
	return ""
}
