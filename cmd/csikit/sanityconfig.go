package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"sigs.k8s.io/yaml"

	"github.com/csikit/csikit/sanity"
)

// sanityConfig is the harness's configuration as a --config file holds
// it (YAML or JSON; field names as below) and as flags set it. It maps
// onto sanity.Config; the options of the command (focus, JUnit) are not
// here.
type sanityConfig struct {
	// AccessType: mount (default), block or both.
	AccessType string `json:"accessType,omitempty"`
	// Areas: names of sanity's areas, "all", and "-Name" to leave one out.
	Areas []string `json:"areas,omitempty"`
	// FsType is the fs_type of mount capabilities.
	FsType string `json:"fsType,omitempty"`
	// VolumeSize and ExpandSize: bytes, or with a suffix (Ki, Mi, Gi, Ti,
	// k, M, G, T).
	VolumeSize string `json:"volumeSize,omitempty"`
	ExpandSize string `json:"expandSize,omitempty"`
	// Parameters, SnapshotParameters, MutableParameters: as in
	// sanity.Config.
	Parameters         map[string]string `json:"parameters,omitempty"`
	SnapshotParameters map[string]string `json:"snapshotParameters,omitempty"`
	MutableParameters  map[string]string `json:"mutableParameters,omitempty"`
	// Secrets go into every request's secrets field (default: the
	// harness's random hostile ones).
	Secrets map[string]string `json:"secrets,omitempty"`
	// UnsupportedAccessModes: access mode names (SINGLE_NODE_WRITER, …).
	UnsupportedAccessModes []string `json:"unsupportedAccessModes,omitempty"`
	// CallTimeout: a Go duration ("30s").
	CallTimeout     string `json:"callTimeout,omitempty"`
	IdempotentCount int    `json:"idempotentCount,omitempty"`
	Concurrency     int    `json:"concurrency,omitempty"`
	TestAttachLimit bool   `json:"testAttachLimit,omitempty"`
	// BaseDir: where staging and target paths are made; the driver must
	// see it under the same path.
	BaseDir string `json:"baseDir,omitempty"`
	// Skip: case path (or prefix ending in "/") to the reason.
	Skip map[string]string `json:"skip,omitempty"`
	// DriverLog is a file the driver logs to, searched for secrets.
	DriverLog string `json:"driverLog,omitempty"`
	// RestartCommand is run with sh -c to restart the driver on its state
	// (the Restart area); csikit then waits until the endpoint serves.
	RestartCommand string `json:"restartCommand,omitempty"`
	// BackendObjectsCommand is run with sh -c to list the driver's backend
	// objects, one a line (sanity.Config.BackendObjects).
	BackendObjectsCommand string `json:"backendObjectsCommand,omitempty"`
	// SplitBrain turns on the SplitBrain area (config file only).
	SplitBrain *splitBrainConfig `json:"splitBrain,omitempty"`
}

// splitBrainConfig is sanity.SplitBrainConfig as a config file holds it.
type splitBrainConfig struct {
	// NodeB is the endpoint of the driver's second node plugin.
	NodeB string `json:"nodeB"`
	// Freeze names the processes of node A's data path to stop besides
	// the writer (names or PIDs, sanity.StopProcesses).
	Freeze []string `json:"freeze,omitempty"`
	// CheckDevice is the path of a volume's device or image, with
	// {volume_id} replaced, checked by sanity.CheckFilesystem.
	CheckDevice string `json:"checkDevice,omitempty"`
	// CheckCommand is run with sh -c and $VOLUME_ID set instead; exit
	// status 0 means the filesystem is clean.
	CheckCommand string `json:"checkCommand,omitempty"`
	Trials       int    `json:"trials,omitempty"`
	// Settle: a Go duration.
	Settle string `json:"settle,omitempty"`
}

// harnessConfig turns c into sanity.SplitBrainConfig.
func (c *splitBrainConfig) harnessConfig() (*sanity.SplitBrainConfig, error) {
	if c.NodeB == "" {
		return nil, fmt.Errorf("splitBrain: nodeB (the second node plugin's endpoint) is required")
	}
	if c.CheckDevice != "" && c.CheckCommand != "" {
		return nil, fmt.Errorf("splitBrain: checkDevice and checkCommand both set: want one")
	}
	out := &sanity.SplitBrainConfig{NodeB: absEndpoint(c.NodeB), Trials: c.Trials}
	if c.Settle != "" {
		d, err := time.ParseDuration(c.Settle)
		if err != nil {
			return nil, fmt.Errorf("splitBrain: settle: %v", err)
		}
		out.Settle = d
	}
	if len(c.Freeze) > 0 {
		out.Freeze = sanity.StopProcesses(c.Freeze...)
	}
	switch {
	case c.CheckDevice != "":
		tmpl := c.CheckDevice
		out.Check = func(ctx context.Context, id string) error {
			return sanity.CheckFilesystem(ctx, strings.ReplaceAll(tmpl, "{volume_id}", id))
		}
	case c.CheckCommand != "":
		cmdline := c.CheckCommand
		out.Check = func(ctx context.Context, id string) error {
			cmd := exec.CommandContext(ctx, "sh", "-c", cmdline)
			cmd.Env = append(os.Environ(), "VOLUME_ID="+id)
			if b, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("check command %q: %v\n%s", cmdline, err, b)
			}
			return nil
		}
	}
	return out, nil
}

// sanityFlags binds a flag for every sanityConfig field; apply copies the
// flags given on the command line over a loaded config.
type sanityFlags struct {
	fs                                  *flag.FlagSet
	accessType, areas, fsType           string
	volumeSize, expandSize, callTimeout string
	params, snapParams, mutableParams   mapFlag
	unsupported                         string
	idempotent, concurrency             int
	attachLimit                         bool
	baseDir, driverLog, restartCommand  string
	backendObjects                      string
	skip                                mapFlag
}

func (f *sanityFlags) add(fs *flag.FlagSet) {
	f.fs = fs
	f.params, f.snapParams, f.mutableParams, f.skip = mapFlag{}, mapFlag{}, mapFlag{}, mapFlag{}
	fs.StringVar(&f.accessType, "access-type", "", "`TYPE` of the volume cases: mount, block or both (default mount)")
	fs.StringVar(&f.areas, "areas", "", "comma-separated `AREAS` to run: all, or names of Identity, Controller, Snapshots, Expansion, Modify, Node, GroupController, DataPath, Concurrency, Restart, Pagination, SecretLogs, Hygiene, SnapshotMetadata, SplitBrain (with splitBrain in --config); -Name leaves one out (e.g. all,-Restart) (default all)")
	fs.StringVar(&f.fsType, "fs-type", "", "fs_type of mount capabilities (default: the driver chooses)")
	fs.StringVar(&f.volumeSize, "volume-size", "", "`SIZE` of test volumes, in bytes or with a suffix (Ki, Mi, Gi, k, M, G) (default 32Mi)")
	fs.StringVar(&f.expandSize, "expand-size", "", "`SIZE` the expansion cases ask for (default twice --volume-size)")
	fs.Var(f.params, "param", "CreateVolume parameter `KEY=VALUE` (repeatable)")
	fs.Var(f.snapParams, "snapshot-param", "CreateSnapshot parameter `KEY=VALUE` (repeatable)")
	fs.Var(f.mutableParams, "mutable-param", "ControllerModifyVolume parameter `KEY=VALUE` the driver accepts (repeatable)")
	fs.StringVar(&f.unsupported, "unsupported-access-modes", "", "comma-separated access `MODES` the driver does not serve (CreateVolume must refuse them)")
	fs.StringVar(&f.callTimeout, "call-timeout", "", "`DURATION` bounding every RPC (default 30s)")
	fs.IntVar(&f.idempotent, "idempotent-count", 0, "how often idempotency cases repeat a call (default 3)")
	fs.IntVar(&f.concurrency, "concurrency", 0, "goroutines of the concurrency cases (default 8)")
	fs.BoolVar(&f.attachLimit, "test-attach-limit", false, "publish volumes up to max_volumes_per_node and expect the next ControllerPublishVolume to fail")
	fs.StringVar(&f.baseDir, "base-dir", "", "`DIR` for staging and target paths, seen under the same path by the driver (default a new temporary directory)")
	fs.Var(f.skip, "skip-case", "`PATH=REASON`: skip the case at PATH, or every case below a PATH ending in / (e.g. mount/Restart/=no restart), reporting REASON (repeatable)")
	fs.StringVar(&f.driverLog, "driver-log", "", "`FILE` the driver logs to, searched for secret values (without it the SecretLogs log case is skipped)")
	fs.StringVar(&f.backendObjects, "backend-objects-command", "", "shell `COMMAND` printing the driver's backend objects, one a line (volumes, snapshots, records: e.g. ls /var/lib/mydriver/volumes); every case that leaves one behind fails, and so does the run (without it nothing is checked)")
	fs.StringVar(&f.restartCommand, "restart-command", "", "shell `COMMAND` that restarts the driver on its state, for the Restart area (without it the area is skipped)")
}

// apply copies every flag given on the command line over c.
func (f *sanityFlags) apply(c *sanityConfig) {
	f.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "access-type":
			c.AccessType = f.accessType
		case "areas":
			c.Areas = strings.Split(f.areas, ",")
		case "fs-type":
			c.FsType = f.fsType
		case "volume-size":
			c.VolumeSize = f.volumeSize
		case "expand-size":
			c.ExpandSize = f.expandSize
		case "param":
			c.Parameters = merge(c.Parameters, f.params)
		case "snapshot-param":
			c.SnapshotParameters = merge(c.SnapshotParameters, f.snapParams)
		case "mutable-param":
			c.MutableParameters = merge(c.MutableParameters, f.mutableParams)
		case "unsupported-access-modes":
			c.UnsupportedAccessModes = strings.Split(f.unsupported, ",")
		case "call-timeout":
			c.CallTimeout = f.callTimeout
		case "idempotent-count":
			c.IdempotentCount = f.idempotent
		case "concurrency":
			c.Concurrency = f.concurrency
		case "test-attach-limit":
			c.TestAttachLimit = f.attachLimit
		case "base-dir":
			c.BaseDir = f.baseDir
		case "skip-case":
			c.Skip = merge(c.Skip, f.skip)
		case "driver-log":
			c.DriverLog = f.driverLog
		case "restart-command":
			c.RestartCommand = f.restartCommand
		case "backend-objects-command":
			c.BackendObjectsCommand = f.backendObjects
		}
	})
}

func merge(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

// loadSanityConfig reads a --config file; unknown fields are an error.
func loadSanityConfig(path string) (sanityConfig, error) {
	var c sanityConfig
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return c, fmt.Errorf("%s: %v", path, err)
	}
	return c, nil
}

// areaNames maps the names --areas takes to sanity's areas.
var areaNames = map[string]sanity.Area{
	"Identity": sanity.Identity, "Controller": sanity.Controller, "Snapshots": sanity.Snapshots,
	"Expansion": sanity.Expansion, "Modify": sanity.Modify, "Node": sanity.Node,
	"GroupController": sanity.GroupController, "DataPath": sanity.DataPath, "Concurrency": sanity.Concurrency,
	"Restart": sanity.Restart, "Pagination": sanity.Pagination, "SecretLogs": sanity.SecretLogs,
	"Hygiene": sanity.Hygiene, "SnapshotMetadata": sanity.SnapshotMetadata, "SplitBrain": sanity.SplitBrain,
}

// parseSize reads bytes with an optional binary or decimal suffix.
func parseSize(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("want a positive size in bytes, optionally with Ki, Mi, Gi, Ti, k, M, G or T, got %q", s)
	}
	return n * mult, nil
}

// harnessConfig turns c into the sanity.Config the child runs with.
func (c sanityConfig) harnessConfig() (sanity.Config, error) {
	var out sanity.Config
	switch c.AccessType {
	case "", "mount":
		out.AccessType = sanity.MountAccess
	case "block":
		out.AccessType = sanity.BlockAccess
	case "both":
		out.AccessType = sanity.BothAccess
	default:
		return out, fmt.Errorf("access type %q: want mount, block or both", c.AccessType)
	}
	for _, a := range c.Areas {
		a = strings.TrimSpace(a)
		neg := strings.HasPrefix(a, "-")
		a = strings.TrimPrefix(a, "-")
		var bits sanity.Area
		if strings.EqualFold(a, "all") {
			bits = sanity.AllAreas
		} else {
			for name, v := range areaNames {
				if strings.EqualFold(name, a) {
					bits = v
				}
			}
		}
		if bits == 0 {
			names := slices.Sorted(maps.Keys(areaNames))
			return out, fmt.Errorf("no area %q: want all or %s", a, strings.Join(names, ", "))
		}
		if neg {
			if out.Areas == 0 {
				out.Areas = sanity.AllAreas
			}
			out.Areas &^= bits
		} else {
			out.Areas |= bits
		}
	}
	if len(c.Areas) > 0 && out.Areas == 0 {
		return out, fmt.Errorf("areas %q leave no area to run", c.Areas)
	}
	var err error
	if out.VolumeSize, err = parseSize(c.VolumeSize); err != nil {
		return out, fmt.Errorf("volume size: %v", err)
	}
	if out.ExpandSize, err = parseSize(c.ExpandSize); err != nil {
		return out, fmt.Errorf("expand size: %v", err)
	}
	if c.CallTimeout != "" {
		if out.CallTimeout, err = time.ParseDuration(c.CallTimeout); err != nil {
			return out, fmt.Errorf("call timeout: %v", err)
		}
	}
	for _, m := range c.UnsupportedAccessModes {
		v, ok := csi.VolumeCapability_AccessMode_Mode_value[strings.TrimSpace(m)]
		if !ok {
			return out, fmt.Errorf("no access mode %q (want e.g. SINGLE_NODE_WRITER, MULTI_NODE_MULTI_WRITER)", m)
		}
		out.UnsupportedAccessModes = append(out.UnsupportedAccessModes, csi.VolumeCapability_AccessMode_Mode(v))
	}
	out.FsType, out.Parameters, out.SnapshotParameters, out.MutableParameters = c.FsType, c.Parameters, c.SnapshotParameters, c.MutableParameters
	out.Secrets, out.IdempotentCount, out.Concurrency, out.TestAttachLimit = c.Secrets, c.IdempotentCount, c.Concurrency, c.TestAttachLimit
	out.BaseDir = c.BaseDir
	out.Skip = maps.Clone(c.Skip)
	if out.Skip == nil {
		out.Skip = map[string]string{}
	}
	if c.DriverLog != "" {
		path := c.DriverLog
		out.Log = func() ([]byte, error) { return os.ReadFile(path) }
	} else if _, set := out.Skip["SecretLogs/no_secret_in_log"]; !set {
		out.Skip["SecretLogs/no_secret_in_log"] = "no --driver-log FILE given: the driver's log cannot be searched for secrets"
	}
	if c.RestartCommand != "" {
		cmdline := c.RestartCommand
		out.Restart = func(ctx context.Context) error {
			b, err := exec.CommandContext(ctx, "sh", "-c", cmdline).CombinedOutput()
			if err != nil {
				return fmt.Errorf("restart command %q: %v\n%s", cmdline, err, b)
			}
			return nil
		}
	}
	if c.SplitBrain != nil {
		if out.SplitBrain, err = c.SplitBrain.harnessConfig(); err != nil {
			return out, err
		}
	}
	if c.BackendObjectsCommand != "" {
		cmdline := c.BackendObjectsCommand
		out.BackendObjects = func(ctx context.Context) ([]string, error) {
			cmd := exec.CommandContext(ctx, "sh", "-c", cmdline)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			b, err := cmd.Output()
			if err != nil {
				return nil, fmt.Errorf("backend objects command %q: %v\n%s", cmdline, err, stderr.String())
			}
			var objs []string
			for _, l := range strings.Split(string(b), "\n") {
				if l = strings.TrimSpace(l); l != "" {
					objs = append(objs, l)
				}
			}
			return objs, nil
		}
	}
	return out, nil
}
