package runner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/status"
)

// DefaultCheckTimeout bounds the checks of one /healthz or /readyz request.
const DefaultCheckTimeout = 5 * time.Second

// HealthHandler returns the handler of GET /healthz (the liveness checks,
// Group.Check) and GET /readyz (the readiness checks, Group.Ready), each
// bounded by DefaultCheckTimeout. A passing answer is 200 "ok"; with the
// query parameter verbose it lists every check, one line each ("[+]name ok");
// a failing answer is 503 and always lists them ("[-]name failed: reason").
// Mount it beside metrics.Handler on the driver's HTTP address (NewDriver
// does).
func (g *Group) HealthHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", g.healthHandler("healthz", false))
	mux.Handle("GET /readyz", g.healthHandler("readyz", true))
	return mux
}

func (g *Group) healthHandler(what string, readiness bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), DefaultCheckTimeout)
		defer cancel()
		results := g.Results(ctx, readiness)
		var b strings.Builder
		failed := false
		for _, res := range results {
			if res.Err != nil {
				failed = true
				fmt.Fprintf(&b, "[-]%s failed: %s\n", res.Name, oneLine(res.Err))
			} else {
				fmt.Fprintf(&b, "[+]%s ok\n", res.Name)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if failed {
			g.log.WarnContext(ctx, what+" check failed", "error", joinFailed(results))
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "%s%s check failed\n", b.String(), what)
			return
		}
		if _, verbose := r.URL.Query()["verbose"]; verbose {
			fmt.Fprintf(w, "%s%s check passed\n", b.String(), what)
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

// oneLine keeps a check's reason on its line of the listing.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// Prober is the Probe method of csi.IdentityServer; *csikit.Server has it
// (and answers it as the gRPC Probe does, Options.Disable included).
type Prober interface {
	Probe(ctx context.Context, req *csi.ProbeRequest) (*csi.ProbeResponse, error)
}

// ProbeCheck adapts a CSI Probe to a check: an error or ready=false fails;
// an unset ready passes, as the spec says.
func ProbeCheck(p Prober) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		resp, err := p.Probe(ctx, &csi.ProbeRequest{})
		if err != nil {
			return statusText(err)
		}
		if r := resp.GetReady(); r != nil && !r.GetValue() {
			return errors.New("plugin is not ready yet")
		}
		return nil
	}
}

// statusText spells a gRPC status error as "Code: message" for a check's
// line.
func statusText(err error) error {
	if s, ok := status.FromError(err); ok && err != nil {
		return fmt.Errorf("%s: %s", s.Code(), s.Message())
	}
	return err
}
