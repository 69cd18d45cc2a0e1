package sanity

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csikit/csikit/csi/secrets"
)

// Spec names the CSI spec version the rules quote.
const Spec = "CSI v1.14"

// rule formats a rule the CSI spec states: the RPC (or section) and what
// the spec demands there. Use it only for what the spec's text says.
func rule(section, text string) string { return Spec + " " + section + ": " + text }

// kube formats an expectation that comes from Kubernetes (kubelet, the
// sidecars, what a persistent volume means to a pod), not from the spec's
// text: section names the RPC or area it is about.
func kube(section, text string) string { return "Kubernetes " + section + ": " + text }

// call makes one RPC with the per-call deadline.
func call[Q proto.Message, R any](s *suite, f func(context.Context, Q, ...grpc.CallOption) (R, error), q Q) (R, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CallTimeout)
	defer cancel()
	return f(ctx, q)
}

// describe renders the outcome of a call for a failure message: what was
// received, the stripped request and the rule.
func describe(rpc string, req proto.Message, err error, want, ruleText string) string {
	var b strings.Builder
	// A driver may echo secrets into its errors: never print them.
	fmt.Fprintf(&b, "%s: got %s, want %s", rpc, secrets.Redact(got(err), req), want)
	if req != nil {
		fmt.Fprintf(&b, "\n\trequest: %s", secrets.Format(req))
	}
	if ruleText != "" {
		fmt.Fprintf(&b, "\n\trule: %s", ruleText)
	}
	return b.String()
}

// got renders an RPC error as its code and message.
func got(err error) string {
	if err == nil {
		return "OK"
	}
	st := status.Convert(err)
	if st.Message() == "" {
		return st.Code().String()
	}
	return fmt.Sprintf("%s %q", st.Code(), st.Message())
}

// must fails the case at once unless err is nil.
func must(t testing.TB, rpc string, req proto.Message, err error, ruleText string) {
	t.Helper()
	if err != nil {
		t.Fatal(describe(rpc, req, err, "OK", ruleText))
	}
}

// wantCode fails the case unless err carries one of the codes.
func wantCode(t testing.TB, rpc string, req proto.Message, err error, ruleText string, want ...codes.Code) bool {
	t.Helper()
	c := status.Code(err)
	if err != nil && slices.Contains(want, c) {
		return true
	}
	names := make([]string, len(want))
	for i, w := range want {
		names[i] = w.String()
	}
	t.Error(describe(rpc, req, err, strings.Join(names, " or "), ruleText))
	return false
}

// expect fails the case unless ok, describing the response that broke the
// rule with format and args (e.g. "capacity_bytes 10, want >= 20").
func expect(t testing.TB, ok bool, rpc string, req proto.Message, ruleText, format string, args ...any) bool {
	t.Helper()
	if ok {
		return true
	}
	msg := fmt.Sprintf("%s: got "+format, append([]any{rpc}, args...)...)
	if req != nil {
		msg += "\n\trequest: " + secrets.Format(req)
	}
	if ruleText != "" {
		msg += "\n\trule: " + ruleText
	}
	t.Error(msg)
	return false
}
