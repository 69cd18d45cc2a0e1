package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/csikit/csikit/k8s/csidriver"
)

func csidriverCommand() *command {
	return &command{
		name:     "csidriver",
		summary:  "print the Kubernetes CSIDriver object a driver's capabilities imply",
		synopsis: []string{"csikit csidriver [OPTIONS] ENDPOINT"},
		description: `Asks the driver for its name (GetPluginInfo) and its controller and node
capabilities, and prints the storage.k8s.io/v1 CSIDriver object for it as
YAML (or JSON with --json), ready for kubectl apply:

  - attachRequired from PUBLISH_UNPUBLISH_VOLUME (the CO then runs
    external-attacher and calls ControllerPublishVolume);
  - storageCapacity from GET_CAPACITY;
  - fsGroupPolicy File when the node advertises VOLUME_MOUNT_GROUP.

What no capability shows (pod info on mount, lifecycle modes, token
requests, …) comes from the options. The object is the one csikit's
Server.CSIDriver derives for a Go driver (package k8s/csidriver), so a
driver in any language gets the same manifest.`,
		exitStatus: `0      the object was printed.
1      the driver could not be asked (its error is printed), or the options
       contradict its capabilities (e.g. --storage-capacity=true without
       GET_CAPACITY).
2      bad options.`,
		examples: `csikit csidriver /run/csi/csi.sock > csidriver.yaml
csikit csidriver /run/csi/csi.sock --pod-info-on-mount --lifecycle-modes Persistent,Ephemeral
csikit csidriver tcp://127.0.0.1:10000 --token-audience vault:3600 --requires-republish`,
		flags: func(fs *flag.FlagSet) func(*env, []string) int {
			var o csidriver.Options
			labels := mapFlag{}
			var tokens tokenFlag
			fs.BoolVar(&o.PodInfoOnMount, "pod-info-on-mount", false, "ask kubelet for pod information in NodePublishVolume's volume context")
			modes := fs.String("lifecycle-modes", "", "comma-separated `MODES` the driver supports: Persistent, Ephemeral (default Persistent)")
			policy := fs.String("fs-group-policy", "", "`POLICY` for applying a pod's fsGroup: ReadWriteOnceWithFSType, File or None (default from VOLUME_MOUNT_GROUP)")
			fs.Var(&tokens, "token-audience", "ask kubelet for a service-account token for `AUDIENCE[:SECONDS]` on NodePublishVolume (repeatable)")
			fs.BoolVar(&o.ServiceAccountTokenInSecrets, "token-in-secrets", false, "pass those tokens in NodePublishVolume's secrets, not its volume context")
			fs.BoolVar(&o.RequiresRepublish, "requires-republish", false, "make kubelet call NodePublishVolume periodically")
			fs.BoolVar(&o.SELinuxMount, "selinux-mount", false, `every volume can be mounted with its own "-o context=..."`)
			capacity := fs.String("storage-capacity", "", "`BOOL`: override storageCapacity (default: whether GET_CAPACITY is advertised)")
			fs.DurationVar(&o.NodeAllocatableUpdatePeriod, "node-allocatable-update-period", 0, "make kubelet refresh the node's volume limit every `DURATION` (at least 10s)")
			fs.Var(labels, "label", "add the label `KEY=VALUE` to metadata.labels (repeatable)")
			asJSON := fs.Bool("json", false, "print JSON instead of YAML")
			timeout := fs.Duration("timeout", defaultTimeout, "give up on each call after `DURATION`")
			return func(e *env, args []string) int {
				if len(args) != 1 {
					e.errorf("csidriver: want ENDPOINT (see csikit csidriver --help)")
					return exitUsage
				}
				if *modes != "" {
					for _, m := range strings.Split(*modes, ",") {
						o.LifecycleModes = append(o.LifecycleModes, csidriver.LifecycleMode(strings.TrimSpace(m)))
					}
				}
				o.FSGroupPolicy = csidriver.FSGroupPolicy(*policy)
				o.TokenRequests = tokens
				if *capacity != "" {
					b, err := strconv.ParseBool(*capacity)
					if err != nil {
						e.errorf("csidriver: --storage-capacity: want true or false, got %q", *capacity)
						return exitUsage
					}
					o.StorageCapacity = &b
				}
				if len(labels) > 0 {
					o.Labels = labels
				}
				conn, err := dial(args[0])
				if err != nil {
					e.errorf("csidriver: %v", err)
					return exitUsage
				}
				defer conn.Close()
				a, err := discover(e.ctx, conn, *timeout)
				if err != nil {
					e.errorf("csidriver: %v", err)
					return exitFail
				}
				obj, err := csidriver.FromCapabilities(a.name, a.ctrlCaps, a.nodeCaps, o)
				if err != nil {
					e.errorf("csidriver: %s", errText(err))
					return exitFail
				}
				out, err := obj.YAML()
				if *asJSON {
					out, err = obj.JSON()
				}
				if err != nil {
					e.errorf("csidriver: %v", err)
					return exitFail
				}
				e.stdout.Write(out)
				if len(out) > 0 && out[len(out)-1] != '\n' {
					fmt.Fprintln(e.stdout)
				}
				return exitOK
			}
		},
	}
}

// tokenFlag is the repeatable --token-audience AUDIENCE[:SECONDS].
type tokenFlag []csidriver.TokenRequest

func (t *tokenFlag) String() string {
	var s []string
	for _, r := range *t {
		s = append(s, r.Audience)
	}
	return strings.Join(s, ",")
}

func (t *tokenFlag) Set(v string) error {
	r := csidriver.TokenRequest{Audience: v}
	// An audience may hold colons (a URL): only a numeric tail is seconds.
	if i := strings.LastIndex(v, ":"); i >= 0 {
		if n, err := strconv.ParseInt(v[i+1:], 10, 64); err == nil {
			if n <= 0 {
				return fmt.Errorf("want AUDIENCE[:SECONDS] with SECONDS > 0, got %q", v)
			}
			r.Audience, r.ExpirationSeconds = v[:i], n
		}
	}
	*t = append(*t, r)
	return nil
}
