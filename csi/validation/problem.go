package validation

import (
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
)

// problem is what a failed rule reports. The zero value means the rule
// passed, so the success path carries nothing to the heap.
type problem struct {
	code codes.Code // codes.OK when the rule passed
	elem int        // 1-based element of a repeated field, 0 for the field itself
	sub  string     // path below the field or element, e.g. ".access_mode"
	what string     // the complaint, a fmt format when args is set
	args []any      // values for what; never request strings
}

func (p problem) failed() bool { return p.code != codes.OK }

// invalid and notFound build problems; args are formatted into what.
func invalid(what string, args ...any) problem {
	return problem{code: codes.InvalidArgument, what: what, args: args}
}

// failedPrecondition: the request is well-formed but not valid for this
// driver's configuration, where the spec names FAILED_PRECONDITION.
func failedPrecondition(what string, args ...any) problem {
	return problem{code: codes.FailedPrecondition, what: what, args: args}
}

func notFound(what string, args ...any) problem {
	return problem{code: codes.NotFound, what: what, args: args}
}

// at returns p as the problem of element i of a repeated field.
func (p problem) at(i int) problem { p.elem = i + 1; return p }

// under returns p as the problem of the sub-field sub.
func (p problem) under(sub string) problem { p.sub = sub + p.sub; return p }

// message renders "<rpc>: <field>[<i>]<sub> <what>".
func (p problem) message(rpc, field string) string {
	var b strings.Builder
	b.WriteString(rpc)
	b.WriteString(": ")
	b.WriteString(field)
	if p.elem > 0 {
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(p.elem - 1))
		b.WriteByte(']')
	}
	b.WriteString(p.sub)
	b.WriteByte(' ')
	if len(p.args) > 0 {
		fmt.Fprintf(&b, p.what, p.args...)
	} else {
		b.WriteString(p.what)
	}
	return b.String()
}

var passed problem
