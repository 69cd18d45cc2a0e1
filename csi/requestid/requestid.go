package requestid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

const (
	// MetadataKey is the incoming gRPC metadata key an ID is taken from.
	MetadataKey = "x-request-id"
	// MaxLen is the longest incoming ID accepted; longer ones are replaced
	// by a generated ID.
	MaxLen = 128
	// LogKey is the attribute key NewHandler and the logging interceptor
	// use for the ID.
	LogKey = "request_id"
)

type ctxKey struct{}

// idContext carries either a given ID or a generator and a sequence number,
// formatted only on demand. Value returns the *idContext itself for ctxKey,
// so storing and looking up an ID costs a single allocation and no boxing.
type idContext struct {
	context.Context
	id  string
	gen *generator
	n   uint64
}

func (c *idContext) Value(key any) any {
	if key == (ctxKey{}) {
		return c
	}
	return c.Context.Value(key)
}

func (c *idContext) String() string {
	if c.gen == nil {
		return c.id
	}
	return c.gen.format(c.n)
}

// NewContext returns a copy of ctx carrying id.
func NewContext(ctx context.Context, id string) context.Context {
	return &idContext{Context: ctx, id: id}
}

// FromContext returns the ID ctx carries, if any.
func FromContext(ctx context.Context) (string, bool) {
	c, ok := ctx.Value(ctxKey{}).(*idContext)
	if !ok {
		return "", false
	}
	return c.String(), true
}

// generator issues IDs "<prefix>-<n>".
type generator struct {
	prefix string
	n      atomic.Uint64
}

func newGenerator() *generator {
	var b [4]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return &generator{prefix: hex.EncodeToString(b[:])}
}

func (g *generator) format(n uint64) string {
	buf := make([]byte, 0, len(g.prefix)+1+20)
	buf = append(buf, g.prefix...)
	buf = append(buf, '-')
	return string(strconv.AppendUint(buf, n, 10))
}

// valid reports whether an incoming ID is safe to use as is: non-empty, at
// most MaxLen bytes, printable ASCII without spaces (so it cannot break a log
// line or inject fields).
func valid(id string) bool {
	if id == "" || len(id) > MaxLen {
		return false
	}
	for i := range len(id) {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// UnaryServerInterceptor returns an interceptor that puts a request ID in
// each call's context: the one the client sent under MetadataKey if usable,
// else a generated one. Each call to UnaryServerInterceptor creates its own
// generator with a fresh random prefix.
func UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	g := newGenerator()
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(g.context(ctx), req)
	}
}

func (g *generator) context(ctx context.Context) context.Context {
	if ids := metadata.ValueFromIncomingContext(ctx, MetadataKey); len(ids) > 0 && valid(ids[0]) {
		return &idContext{Context: ctx, id: ids[0]}
	}
	return &idContext{Context: ctx, gen: g, n: g.n.Add(1)}
}
