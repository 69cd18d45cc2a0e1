package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Workloads of the bench command.
const (
	workCreateDelete = "create-delete"
	workProbe        = "probe"
	workList         = "list"
	workCall         = "call"
)

func benchCommand() *command {
	return &command{
		name:    "bench",
		summary: "measure drivers side by side: create+delete cycles, Probe, ListVolumes pages",
		synopsis: []string{
			"csikit bench [OPTIONS] [LABEL=]ENDPOINT...",
		},
		description: `Runs one workload against each driver at ENDPOINT from this process,
with --clients concurrent clients for --duration, and prints the rate and
the latency of each run. With several endpoints the runs are interleaved:
round 1 runs every endpoint in turn, then round 2, and so on, so that
whatever else the machine does is shared out fairly. The summary gives
each endpoint's median rate and latencies over the rounds, and its rate
as a multiple of the first endpoint's.

Workloads:

create-delete  each client creates a volume (a fresh name each time,
               --capacity bytes, a SINGLE_NODE_WRITER mount or, with
               --block, block capability, --parameter given to
               CreateVolume) and deletes it; one operation is the whole
               cycle. Every volume the bench created is deleted before it
               exits, also when a call fails or it is interrupted.
probe          each client calls Identity.Probe: the call a CO and the
               liveness sidecar make every few seconds.
list           each client pages through Controller.ListVolumes with
               --page entries per page, from the start again after the
               last page; one operation is one page. Create the volumes
               beforehand: the latency at the top of the range (p99, max)
               is what a CO sees at the slowest offset.
call           each client makes the unary call --method (any spelling
               csikit call takes) with --request (protojson, "{}" by
               default): the polling calls, such as
               Controller.GetCapacity, Node.NodeGetCapabilities or
               Identity.GetPluginInfo. Secrets go into the request's
               secrets field, as with csikit call.

The first failed call ends the bench with exit status 1 and prints the
method, its gRPC code and message. LABEL names an endpoint in the output
(default: the endpoint itself).`,
		exitStatus: `0      every run completed without an error.
1      a call failed (its method, gRPC code and message are printed).
2      bad options or arguments.`,
		examples: `csikit bench --clients 8 --duration 10s --rounds 3 \
    csikit=/run/csikit/csi.sock upstream=/run/upstream/csi.sock
csikit bench --workload probe --clients 1 /run/csi/csi.sock
csikit bench --workload list --page 500 --clients 1 /run/csi/csi.sock
csikit bench --workload call --method Controller.GetCapacity --clients 1 \
    csikit=/run/csikit/csi.sock upstream=/run/upstream/csi.sock`,
		flags: func(fs *flag.FlagSet) func(*env, []string) int {
			o := benchOptions{params: mapFlag{}}
			var sf secretFlags
			sf.add(fs)
			fs.StringVar(&o.workload, "workload", workCreateDelete, "`NAME`: create-delete, probe, list or call")
			fs.StringVar(&o.method, "method", "", "call: the unary `SERVICE.METHOD` to call")
			fs.StringVar(&o.request, "request", "{}", "call: the request, as protojson `JSON`")
			fs.IntVar(&o.clients, "clients", 8, "run `N` clients at once")
			fs.DurationVar(&o.duration, "duration", 5*time.Second, "run each endpoint for `DURATION` per round")
			fs.IntVar(&o.rounds, "rounds", 3, "run `N` interleaved rounds")
			fs.Int64Var(&o.capacity, "capacity", 1<<20, "create-delete: request `BYTES` per volume")
			fs.BoolVar(&o.block, "block", false, "create-delete: ask for block volumes instead of mounted ones")
			fs.Var(o.params, "parameter", "create-delete: pass the CreateVolume parameter `KEY=VALUE` (repeatable)")
			fs.IntVar(&o.page, "page", 500, "list: ask for `N` entries per page")
			fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "fail a call that takes longer than `DURATION`")
			return func(e *env, args []string) int {
				if len(args) == 0 {
					e.errorf("bench: want at least one ENDPOINT (see csikit bench --help)")
					return exitUsage
				}
				if err := o.check(); err != nil {
					e.errorf("bench: %v", err)
					return exitUsage
				}
				sec, err := sf.load()
				if err != nil {
					e.errorf("bench: %v", err)
					return exitUsage
				}
				o.secrets = sec
				if o.workload != workCall && (o.method != "" || o.request != "{}") {
					e.errorf("bench: --method and --request are options of --workload call")
					return exitUsage
				}
				if o.workload == workProbe {
					o.method = "Identity.Probe" // a call like any other
				}
				if o.method != "" {
					if err := o.resolveCall(); err != nil {
						e.errorf("bench: %v", err)
						return exitUsage
					}
				} else if o.workload == workCall {
					e.errorf("bench: --workload call needs --method SERVICE.METHOD")
					return exitUsage
				}
				return bench(e, o, args)
			}
		},
	}
}

// benchOptions are the bench command's options.
type benchOptions struct {
	workload string
	clients  int
	duration time.Duration
	rounds   int
	capacity int64
	block    bool
	params   mapFlag
	page     int
	timeout  time.Duration
	secrets  map[string]string
	method   string
	request  string
	// call is the resolved --method and req its request (the call and
	// probe workloads).
	call method
	req  proto.Message
}

// resolveCall resolves --method and parses --request for it.
func (o *benchOptions) resolveCall() error {
	m, err := resolve(o.method)
	if err != nil {
		return err
	}
	if m.Streaming() {
		return fmt.Errorf("--method %s: a streaming method cannot be benched, only unary ones", m.Name())
	}
	req, err := m.NewRequest()
	if err != nil {
		return err
	}
	if err := protojson.Unmarshal([]byte(o.request), req); err != nil {
		red := redactorFor(o.secrets)
		return fmt.Errorf("--request is not a valid %s in protojson: %s\n\tits fields: %s",
			req.ProtoReflect().Descriptor().FullName(), red.Redact(err.Error()), fieldList(req.ProtoReflect().Descriptor()))
	}
	if len(o.secrets) > 0 {
		if err := putSecrets(req, o.secrets); err != nil {
			return fmt.Errorf("%s: %w", m.Name(), err)
		}
	}
	o.call, o.req = m, req
	return nil
}

func (o benchOptions) check() error {
	switch {
	case o.workload != workCreateDelete && o.workload != workProbe && o.workload != workList && o.workload != workCall:
		return fmt.Errorf("--workload %q: want create-delete, probe, list or call", o.workload)
	case o.clients < 1:
		return fmt.Errorf("--clients %d: want at least 1", o.clients)
	case o.duration <= 0:
		return fmt.Errorf("--duration %v: want more than 0", o.duration)
	case o.rounds < 1:
		return fmt.Errorf("--rounds %d: want at least 1", o.rounds)
	case o.capacity < 0:
		return fmt.Errorf("--capacity %d: want 0 or more bytes", o.capacity)
	case o.page < 1:
		return fmt.Errorf("--page %d: want at least 1", o.page)
	case o.timeout <= 0:
		return fmt.Errorf("--timeout %v: want more than 0", o.timeout)
	}
	return nil
}

// benchTarget is one endpoint under test.
type benchTarget struct {
	label string
	conn  *grpc.ClientConn
	runs  []benchRun
}

// benchRun is what one run of one endpoint measured.
type benchRun struct {
	ops     int
	elapsed time.Duration
	lat     []time.Duration // sorted
}

func (r benchRun) rate() float64 { return float64(r.ops) / r.elapsed.Seconds() }

// quantile returns the q-quantile of the sorted latencies (0 when none).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

// bench runs the bench command.
func bench(e *env, o benchOptions, args []string) int {
	var targets []*benchTarget
	defer func() {
		for _, t := range targets {
			t.conn.Close()
		}
	}()
	for _, a := range args {
		label, ep := a, a
		if l, rest, ok := strings.Cut(a, "="); ok && l != "" && !strings.ContainsAny(l, "/:") {
			label, ep = l, rest
		}
		conn, err := dial(ep)
		if err != nil {
			e.errorf("bench: %s: %v", label, err)
			return exitUsage
		}
		targets = append(targets, &benchTarget{label: label, conn: conn})
	}
	red := redactorFor(o.secrets)
	if o.req != nil {
		red = redactorFor(o.secrets, o.req) // and those written in --request
	}
	width := 0
	for _, t := range targets {
		width = max(width, len(t.label))
	}
	fmt.Fprintf(e.stdout, "%s, %d clients, %v per run, %d rounds\n", o.workload, o.clients, o.duration, o.rounds)
	for r := 1; r <= o.rounds; r++ {
		for _, t := range targets {
			run, err := benchOnce(e.ctx, o, t.conn)
			if err != nil {
				// A driver's message may quote the secrets it was given.
				e.errorf("bench: %s: %s", t.label, red.Redact(err.Error()))
				return exitFail
			}
			t.runs = append(t.runs, run)
			fmt.Fprintf(e.stdout, "round %d  %-*s  %9.1f ops/s  p50 %-9v p99 %-9v max %v\n", r, width, t.label,
				run.rate(), round(quantile(run.lat, 0.5)), round(quantile(run.lat, 0.99)), round(quantile(run.lat, 1)))
		}
	}
	printSummary(e.stdout, targets, width)
	return exitOK
}

// printSummary prints each target's medians over its runs and its rate
// relative to the first target.
func printSummary(w io.Writer, targets []*benchTarget, width int) {
	fmt.Fprintf(w, "median of the rounds:\n")
	var first float64
	for i, t := range targets {
		var rates []float64
		var p50, p99, worst []time.Duration
		for _, r := range t.runs {
			rates = append(rates, r.rate())
			p50 = append(p50, quantile(r.lat, 0.5))
			p99 = append(p99, quantile(r.lat, 0.99))
			worst = append(worst, quantile(r.lat, 1))
		}
		slices.Sort(rates)
		slices.Sort(p50)
		slices.Sort(p99)
		rate := rates[len(rates)/2]
		line := fmt.Sprintf("  %-*s  %9.1f ops/s  p50 %-9v p99 %-9v max %v", width, t.label,
			rate, round(p50[len(p50)/2]), round(p99[len(p99)/2]), round(slices.Max(worst)))
		if i == 0 {
			first = rate
		} else if first > 0 {
			line += fmt.Sprintf("  (%.2f× the rate of %s)", rate/first, targets[0].label)
		}
		fmt.Fprintln(w, line)
	}
}

// round shortens d for printing.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(100 * time.Nanosecond)
	}
}

// benchOnce runs the workload once against conn with o.clients clients.
func benchOnce(ctx context.Context, o benchOptions, conn *grpc.ClientConn) (benchRun, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var prefix string
	if o.workload == workCreateDelete {
		b := make([]byte, 6)
		if _, err := rand.Read(b); err != nil {
			return benchRun{}, err
		}
		prefix = "csikit-bench-" + hex.EncodeToString(b)
	}
	var (
		mu       sync.Mutex
		lat      []time.Duration
		firstErr error
		wg       sync.WaitGroup
	)
	deadline := time.Now().Add(o.duration)
	start := time.Now()
	for c := range o.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			var err error
			switch o.workload {
			case workCreateDelete:
				mine, err = createDeleteLoop(ctx, o, csi.NewControllerClient(conn), fmt.Sprintf("%s-%d", prefix, c), deadline)
			case workList:
				mine, err = listLoop(ctx, o, csi.NewControllerClient(conn), deadline)
			case workProbe, workCall:
				mine, err = callLoop(ctx, o, conn, deadline)
			}
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, mine...)
			if err != nil && firstErr == nil {
				firstErr = err
				cancel() // the other clients stop too
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return benchRun{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return benchRun{}, fmt.Errorf("interrupted: %w", err)
	}
	slices.Sort(lat)
	return benchRun{ops: len(lat), elapsed: elapsed, lat: lat}, nil
}

// callError names the method of a failed call with its code and message.
func callError(method string, err error) error {
	st := status.Convert(err)
	return fmt.Errorf("%s: %s: %s", method, st.Code(), st.Message())
}

// createDeleteLoop creates and deletes volumes named prefix-N until the
// deadline; a volume it created is deleted even when the run is cancelled.
func createDeleteLoop(ctx context.Context, o benchOptions, cc csi.ControllerClient, prefix string, deadline time.Time) ([]time.Duration, error) {
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	if o.block {
		capability.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	}
	var lat []time.Duration
	for n := 0; time.Now().Before(deadline) && ctx.Err() == nil; n++ {
		// A cycle runs to its end even when the run is cancelled meanwhile
		// (an interrupt, another client's failure): a create cut short may
		// still have made its volume, and the bench leaves none behind.
		cycle := context.WithoutCancel(ctx)
		t0 := time.Now()
		cctx, cancel := context.WithTimeout(cycle, o.timeout)
		resp, err := cc.CreateVolume(cctx, &csi.CreateVolumeRequest{
			Name:               fmt.Sprintf("%s-%d", prefix, n),
			CapacityRange:      &csi.CapacityRange{RequiredBytes: o.capacity},
			VolumeCapabilities: []*csi.VolumeCapability{capability},
			Parameters:         o.params,
			Secrets:            o.secrets,
		})
		cancel()
		if err != nil {
			return lat, callError("Controller.CreateVolume", err)
		}
		dctx, cancel := context.WithTimeout(cycle, o.timeout)
		_, err = cc.DeleteVolume(dctx, &csi.DeleteVolumeRequest{VolumeId: resp.GetVolume().GetVolumeId(), Secrets: o.secrets})
		cancel()
		if err != nil {
			return lat, fmt.Errorf("%w (volume %s is left behind)", callError("Controller.DeleteVolume", err), resp.GetVolume().GetVolumeId())
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}

// callLoop makes o.call with o.req until the deadline.
func callLoop(ctx context.Context, o benchOptions, conn *grpc.ClientConn, deadline time.Time) ([]time.Duration, error) {
	// One response message per client: unmarshalling resets it, and a
	// registry lookup per call would be the client's cost, not the driver's.
	resp, err := o.call.NewResponse()
	if err != nil {
		return nil, err
	}
	var lat []time.Duration
	for time.Now().Before(deadline) && ctx.Err() == nil {
		t0 := time.Now()
		cctx, cancel := context.WithTimeout(ctx, o.timeout)
		err := conn.Invoke(cctx, o.call.FullMethod(), o.req, resp)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return lat, nil
			}
			return lat, callError(o.call.Name(), err)
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}

// listLoop pages through ListVolumes until the deadline.
func listLoop(ctx context.Context, o benchOptions, cc csi.ControllerClient, deadline time.Time) ([]time.Duration, error) {
	var lat []time.Duration
	token := ""
	for time.Now().Before(deadline) && ctx.Err() == nil {
		t0 := time.Now()
		cctx, cancel := context.WithTimeout(ctx, o.timeout)
		resp, err := cc.ListVolumes(cctx, &csi.ListVolumesRequest{MaxEntries: int32(min(o.page, 1<<30)), StartingToken: token})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return lat, nil
			}
			if status.Code(err) == codes.Aborted && token != "" { // a token gone stale: start over
				token = ""
				continue
			}
			return lat, callError("Controller.ListVolumes", err)
		}
		lat = append(lat, time.Since(t0))
		token = resp.GetNextToken()
	}
	return lat, nil
}
