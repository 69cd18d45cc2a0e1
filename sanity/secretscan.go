package sanity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// secretForm is one way a secret value can appear in a log or a message.
type secretForm struct {
	name  string // e.g. "Go %q-escaped"
	value string
}

// secretForms returns the forms a secret value takes when a driver prints
// it: as is, escaped by Go's %q (and its ASCII-only variant), escaped as a
// JSON string (with and without HTML escaping), and each of the Go forms
// escaped again as JSON (a %q-formatted message inside a JSON log line).
// Forms equal to an earlier one are left out.
func secretForms(v string) []secretForm {
	goQ := unquote(strconv.Quote(v))
	goA := unquote(strconv.QuoteToASCII(v))
	out := []secretForm{{"raw", v}, {"Go %q-escaped", goQ}, {"Go %+q-escaped", goA}}
	for _, f := range []secretForm{{"JSON-escaped", v}, {"JSON-escaped Go %q", goQ}, {"JSON-escaped Go %+q", goA}} {
		out = append(out, secretForm{f.name, jsonInner(f.value, true)}, secretForm{f.name + " (no HTML escaping)", jsonInner(f.value, false)})
		out = append(out, secretForm{f.name + " (ASCII-only)", asciiJSON(jsonInner(f.value, false))})
	}
	seen := map[string]bool{}
	uniq := out[:0]
	for _, f := range out {
		if f.value != "" && !seen[f.value] {
			seen[f.value] = true
			uniq = append(uniq, f)
		}
	}
	return uniq
}

// unquote strips the quotes strconv.Quote adds.
func unquote(q string) string { return q[1 : len(q)-1] }

// jsonInner is v encoded as a JSON string, without the quotes.
func jsonInner(v string, escapeHTML bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	_ = enc.Encode(v) // a string always encodes
	s := strings.TrimSuffix(b.String(), "\n")
	return unquote(s)
}

// asciiJSON rewrites the non-ASCII runes of a JSON string body as \uXXXX
// escapes, as ASCII-only JSON encoders (Python's json.dumps, jq -a) do.
func asciiJSON(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x80:
			b.WriteRune(r)
		case r > 0xffff:
			r -= 0x10000
			b.WriteString(`\u` + strconv.FormatInt(int64(0xd800+(r>>10)), 16) + `\u` + strconv.FormatInt(int64(0xdc00+(r&0x3ff)), 16))
		default:
			b.WriteString(`\u` + leftPad(strconv.FormatInt(int64(r), 16), 4))
		}
	}
	return b.String()
}

func leftPad(s string, n int) string {
	if len(s) < n {
		return strings.Repeat("0", n-len(s)) + s
	}
	return s
}

// findSecrets returns, for every secret some form of which occurs in text,
// "secret KEY (FORM)" — never the value.
func findSecrets(text []byte, secrets map[string]string) []string {
	var out []string
	for k, v := range secrets {
		if v == "" {
			continue
		}
		for _, f := range secretForms(v) {
			if bytes.Contains(text, []byte(f.value)) {
				out = append(out, "secret "+strconv.Quote(k)+" ("+f.name+")")
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// errorLog records every error message the driver returned during a Run,
// once per distinct method, code and message: those messages reach
// Kubernetes events and CO logs, so SecretLogs searches them.
type errorLog struct {
	mu   sync.Mutex
	seen map[errorRecord]bool
	list []errorRecord
}

// errorRecord is one distinct error answer.
type errorRecord struct{ method, code, msg string }

// intercept is a client interceptor that records the status message of
// every failed call.
func (l *errorLog) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	l.add(method, err)
	return err
}

// interceptStream is intercept for streaming calls (SnapshotMetadata):
// the error opening the stream and the one ending it are recorded.
func (l *errorLog) interceptStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		l.add(method, err)
		return nil, err
	}
	return &loggedClientStream{ClientStream: cs, l: l, method: method}, nil
}

type loggedClientStream struct {
	grpc.ClientStream
	l      *errorLog
	method string
}

func (s *loggedClientStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil && !errors.Is(err, io.EOF) {
		s.l.add(s.method, err)
	}
	return err
}

// add records err's status message once per method, code and message.
func (l *errorLog) add(method string, err error) {
	if err == nil {
		return
	}
	st := status.Convert(err)
	r := errorRecord{method: method, code: st.Code().String(), msg: st.Message()}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[errorRecord]bool{}
	}
	if !l.seen[r] {
		l.seen[r] = true
		l.list = append(l.list, r)
	}
}

// records returns the errors recorded so far.
func (l *errorLog) records() []errorRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]errorRecord(nil), l.list...)
}
