package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"text/tabwriter"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/csikit/csikit"
)

func fencesCommand() *command {
	return &command{
		name:     "fences",
		summary:  "list the nodes a csikit driver fenced off volumes",
		synopsis: []string{"csikit fences [OPTIONS] ENDPOINT"},
		description: `Lists the volume/node pairs the driver at ENDPOINT fenced at
ControllerUnpublishVolume because the node still held the volume (a node
that hung rather than died), as its journal records them: volume, node,
since when, and whether the fence is confirmed (done) or was begun and
must still be finished by a retried ControllerUnpublishVolume (pending).
A fenced node is refused ControllerPublishVolume of that volume
(FAILED_PRECONDITION) until the fence is lifted with csikit unfence.

The driver must be built on csikit with a csikit.Fencer; it serves the
csikit.v1.Fencing service on its CSI endpoint. See csikit's
docs/fencing.md for the lifecycle.`,
		exitStatus: `0      the list was printed (it may be empty).
1      the driver answered with an error (Unimplemented: it does not
       fence; Unavailable: it could not be reached), or its journal
       cannot list every pair (what it knows is printed).
2      bad options.`,
		examples: `csikit fences /var/lib/kubelet/plugins/rbd.csi.example/csi.sock
csikit fences unix:///csi/csi.sock --json`,
		flags: func(fs *flag.FlagSet) func(*env, []string) int {
			asJSON := fs.Bool("json", false, "print the service's answer as JSON")
			timeout := fs.Duration("timeout", defaultTimeout, "give up after `DURATION`")
			return func(e *env, args []string) int {
				if len(args) != 1 {
					e.errorf("fences: want ENDPOINT (see csikit fences --help)")
					return exitUsage
				}
				conn, err := dial(args[0])
				if err != nil {
					e.errorf("fences: %v", err)
					return exitUsage
				}
				defer conn.Close()
				ctx, cancel := context.WithTimeout(e.ctx, *timeout)
				defer cancel()
				resp := new(structpb.Struct)
				if err := conn.Invoke(ctx, "/"+csikit.FencingService+"/List", &emptypb.Empty{}, resp); err != nil {
					e.errorf("fences: %s: %s", status.Code(err), status.Convert(err).Message())
					return exitFail
				}
				if *asJSON {
					b, _ := json.MarshalIndent(resp.AsMap(), "", "  ")
					fmt.Fprintln(e.stdout, string(b))
				} else {
					w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(w, "VOLUME\tNODE\tSINCE\tSTATE")
					for _, v := range resp.GetFields()["fenced"].GetListValue().GetValues() {
						f := v.GetStructValue().GetFields()
						state := "pending"
						if f["done"].GetBoolValue() {
							state = "done"
						}
						node := f["node_id"].GetStringValue()
						if node == "" {
							node = "(every node)"
						}
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", f["volume_id"].GetStringValue(), node, f["since"].GetStringValue(), state)
					}
					w.Flush()
				}
				if !resp.GetFields()["complete"].GetBoolValue() {
					e.errorf("fences: the driver's journal cannot list its records: only the pairs fenced since the driver started are shown")
					return exitFail
				}
				return exitOK
			}
		},
	}
}

func unfenceCommand() *command {
	return &command{
		name:     "unfence",
		summary:  "lift the fence that keeps a node off a volume",
		synopsis: []string{"csikit unfence [OPTIONS] ENDPOINT VOLUME_ID NODE_ID", "csikit unfence [OPTIONS] --node NODE_ID ENDPOINT"},
		description: `Lifts the fence the driver at ENDPOINT put between NODE_ID and
VOLUME_ID (see csikit fences): the driver's Fencer.Unfence runs, the pair
is forgotten, and ControllerPublishVolume of the volume to the node can
succeed again. It is idempotent.

Lift a fence only once the node has restarted clean (power-cycled, so no
mount, mapping or dirty page of the volume survives; in Kubernetes, when
you remove the node.kubernetes.io/out-of-service taint): a node that
merely woke up may still write what it held.

With --node, every fence of that node is lifted (those csikit fences
lists for it), one by one; each is printed as it goes.

An empty NODE_ID ("") lifts the fence of an unpublish from every node.
The driver answers ABORTED while a call on the volume runs; retry then.`,
		exitStatus: `0      the fence is lifted (or there was none).
1      the driver answered with an error (Unavailable: it could not be
       reached).
2      bad options.`,
		examples: `csikit unfence /var/lib/kubelet/plugins/rbd.csi.example/csi.sock 0001-rbd-pvc-42 worker-3
csikit unfence --node worker-3 /var/lib/kubelet/plugins/rbd.csi.example/csi.sock`,
		flags: func(fs *flag.FlagSet) func(*env, []string) int {
			timeout := fs.Duration("timeout", defaultTimeout, "give up after `DURATION`")
			node := fs.String("node", "", "lift every fence of node `NODE_ID`")
			return func(e *env, args []string) int {
				byNode := false
				fs.Visit(func(f *flag.Flag) { byNode = byNode || f.Name == "node" })
				if byNode && len(args) != 1 || !byNode && (len(args) != 3 || args[1] == "") {
					e.errorf("unfence: want ENDPOINT VOLUME_ID NODE_ID, or --node NODE_ID ENDPOINT (see csikit unfence --help)")
					return exitUsage
				}
				conn, err := dial(args[0])
				if err != nil {
					e.errorf("unfence: %v", err)
					return exitUsage
				}
				defer conn.Close()
				ctx, cancel := context.WithTimeout(e.ctx, *timeout)
				defer cancel()
				var pairs [][2]string
				if byNode {
					list := new(structpb.Struct)
					if err := conn.Invoke(ctx, "/"+csikit.FencingService+"/List", &emptypb.Empty{}, list); err != nil {
						e.errorf("unfence: listing the fences: %s: %s", status.Code(err), status.Convert(err).Message())
						return exitFail
					}
					for _, v := range list.GetFields()["fenced"].GetListValue().GetValues() {
						f := v.GetStructValue().GetFields()
						if f["node_id"].GetStringValue() == *node {
							pairs = append(pairs, [2]string{f["volume_id"].GetStringValue(), *node})
						}
					}
					if len(pairs) == 0 {
						fmt.Fprintf(e.stdout, "node %q is fenced off no volume\n", *node)
					}
				} else {
					pairs = [][2]string{{args[1], args[2]}}
				}
				for _, p := range pairs {
					req, err := structpb.NewStruct(map[string]any{"volume_id": p[0], "node_id": p[1]})
					if err != nil {
						e.errorf("unfence: %v", err)
						return exitUsage
					}
					if err := conn.Invoke(ctx, "/"+csikit.FencingService+"/Unfence", req, &emptypb.Empty{}); err != nil {
						e.errorf("unfence: volume %q, node %q: %s: %s", p[0], p[1], status.Code(err), status.Convert(err).Message())
						return exitFail
					}
					fmt.Fprintf(e.stdout, "fence of node %q off volume %q lifted\n", p[1], p[0])
				}
				return exitOK
			}
		},
	}
}
