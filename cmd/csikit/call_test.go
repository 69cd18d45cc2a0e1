//go:build linux

package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCallHostpath makes calls of every kind against the hostpath binary:
// identity, node, and a CreateVolume/DeleteVolume pair carrying hostile
// secrets from a file and a flag, which never show in the output.
func TestCallHostpath(t *testing.T) {
	p := hostpath(t)
	info := csikit(t, "call", p.Endpoint, "Identity.GetPluginInfo").want(t, 0).object(t)
	if info["name"] != "hostpath.csikit.dev" {
		t.Errorf("GetPluginInfo: got name %v, want hostpath.csikit.dev", info["name"])
	}
	// Other spellings of a method, options after the arguments.
	for _, m := range []string{"Node.NodeGetInfo", "/csi.v1.Node/NodeGetInfo", "nodegetinfo"} {
		ni := csikit(t, "call", p.Endpoint, m, "{}", "--timeout", "10s").want(t, 0).object(t)
		if ni["nodeId"] != "cli-node" {
			t.Errorf("%s: got nodeId %v, want cli-node", m, ni["nodeId"])
		}
	}
	create := `{"name":"cli-vol","capacityRange":{"requiredBytes":"16777216"},
		"volumeCapabilities":[{"mount":{},"accessMode":{"mode":"SINGLE_NODE_WRITER"}}]}`
	r := csikitIn(t, create, "call", "--secrets-file", secretsFile(t), "--secret", `extra=more "quoted"`+"\nsecret",
		p.Endpoint, "Controller.CreateVolume", "-").want(t, 0)
	noSecrets(t, r.stdout+r.stderr)
	vol := r.object(t)["volume"].(map[string]any)
	if vol["capacityBytes"] != "16777216" {
		t.Errorf("CreateVolume: got capacityBytes %v, want \"16777216\"", vol["capacityBytes"])
	}
	r = csikit(t, "call", p.Endpoint, "Controller.DeleteVolume", `{"volumeId":"`+vol["volumeId"].(string)+`"}`, "--secrets-file", secretsFile(t)).want(t, 0)
	noSecrets(t, r.stdout+r.stderr)
	// A gRPC error: code and message on stderr, exit status 1.
	r = csikit(t, "call", p.Endpoint, "Node.NodePublishVolume", `{"volumeId":"missing"}`).want(t, 1)
	if !strings.Contains(r.stderr, "Node.NodePublishVolume: InvalidArgument: ") {
		t.Errorf("got stderr %q, want the method, the code and the message", r.stderr)
	}
}

// TestCallTmpfs calls the tmpfs binary.
func TestCallTmpfs(t *testing.T) {
	p := tmpfs(t)
	caps := csikit(t, "call", p.Endpoint, "Controller.ControllerGetCapabilities").want(t, 0)
	if !strings.Contains(caps.stdout, "CREATE_DELETE_VOLUME") {
		t.Errorf("ControllerGetCapabilities: got %s, want CREATE_DELETE_VOLUME listed", caps.stdout)
	}
}

// TestCallRedactsDriverErrors: a driver that echoes the secrets into its
// error message (raw and Go-quoted) has them redacted in what csikit
// prints.
func TestCallRedactsDriverErrors(t *testing.T) {
	ep := servePlanted(t)
	r := csikit(t, "call", ep, "Node.NodeStageVolume",
		`{"volumeId":"v1","stagingTargetPath":"/x","volumeCapability":{"mount":{},"accessMode":{"mode":"SINGLE_NODE_WRITER"}},
		  "secrets":{"inline":"inline secret value"}}`,
		"--secrets-file", secretsFile(t)).want(t, 1)
	noSecrets(t, r.stdout+r.stderr)
	if strings.Contains(r.stderr, "inline secret value") {
		t.Errorf("got the secret written in the request in stderr, want it redacted:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, "PermissionDenied: login refused with") || !strings.Contains(r.stderr, "***stripped***") {
		t.Errorf("got stderr %q, want the code, the message and ***stripped*** for the secrets", r.stderr)
	}
}

// TestCallStreams: a server-streaming RPC prints each message as it
// comes; an error after some messages keeps them, then prints the status
// with the secrets redacted.
func TestCallStreams(t *testing.T) {
	ep := servePlanted(t)
	r := csikit(t, "call", ep, "SnapshotMetadata.GetMetadataAllocated", `{"snapshotId":"snap-1"}`).want(t, 0)
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	n := 0
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("message %d is not JSON: %v\n%s", n, err, r.stdout)
		}
		if m["blockMetadataType"] != "FIXED_LENGTH" {
			t.Errorf("message %d: got %v, want blockMetadataType FIXED_LENGTH", n, m)
		}
		n++
	}
	if n != 3 {
		t.Errorf("got %d messages, want 3:\n%s", n, r.stdout)
	}
	r = csikit(t, "call", ep, "SnapshotMetadata.GetMetadataAllocated", `{"snapshotId":"fail-after"}`, "--secrets-file", secretsFile(t)).want(t, 1)
	noSecrets(t, r.stdout+r.stderr)
	if strings.Count(r.stdout, "blockMetadataType") != 3 || !strings.Contains(r.stderr, "SnapshotMetadata.GetMetadataAllocated: Internal: reading snapshot failed, token map[") {
		t.Errorf("got stdout\n%s\nstderr %q; want 3 messages, then the status", r.stdout, r.stderr)
	}
}

// TestCallRedactsOwnErrors: a secret value that csikit's own error would
// quote (here as an unknown field name) is redacted too.
func TestCallRedactsOwnErrors(t *testing.T) {
	r := csikit(t, "call", "unix:///nonexistent/csi.sock", "Controller.DeleteVolume", `{"volumeId":"v","top-secret-value":1}`,
		"--secret", "k=top-secret-value").want(t, 2)
	if strings.Contains(r.stderr, "top-secret-value") || !strings.Contains(r.stderr, `unknown field "***stripped***"`) {
		t.Errorf("got stderr %q, want the secret redacted from the parse error", r.stderr)
	}
}

// TestCallTCP: a tcp:// endpoint works like a socket.
func TestCallTCP(t *testing.T) {
	ep := servePlantedTCP(t)
	if info := csikit(t, "call", ep, "GetPluginInfo").want(t, 0).object(t); info["name"] != "planted.csikit.dev" {
		t.Errorf("got %v, want name planted.csikit.dev", info)
	}
	csikit(t, "caps", ep).want(t, 1) // the planted mismatches, over TCP
}

// TestCallBadSecretsFiles: a secrets file that is not a map of strings
// is refused, and the message quotes no value from it.
func TestCallBadSecretsFiles(t *testing.T) {
	for name, body := range map[string]string{
		"not YAML":   "password: \"unterminated-secret-value\n",
		"not a map":  "- list-secret-value\n",
		"not string": "port: 123456789\nok: fine-secret-value\n",
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "secrets.yaml")
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			r := csikit(t, "call", "unix:///nonexistent/csi.sock", "Controller.DeleteVolume", `{"volumeId":"v"}`, "--secrets-file", p).want(t, 2)
			if !strings.Contains(r.stderr, "secrets file") || strings.Contains(r.stderr, "secret-value") || strings.Contains(r.stderr, "123456789") {
				t.Errorf("got stderr %q, want the file refused without its values", r.stderr)
			}
		})
	}
}

// TestCallBadRequests: a request that is not protojson, an unknown field,
// an unknown method and secrets for a method without a secrets field are
// refused before any call, with exit status 2 and a message that helps.
func TestCallBadRequests(t *testing.T) {
	ep := "unix:///nonexistent/csi.sock" // never dialled
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"not JSON", []string{"Controller.DeleteVolume", `{"volumeId": oops}`}, []string{"not a valid csi.v1.DeleteVolumeRequest in protojson", "invalid value oops"}},
		{"unknown field", []string{"Controller.DeleteVolume", `{"volume_idd":"x"}`}, []string{`unknown field "volume_idd"`, "its fields: ", "volumeId"}},
		{"wrong type", []string{"Controller.CreateVolume", `{"capacityRange":{"requiredBytes":"lots"}}`}, []string{"not a valid csi.v1.CreateVolumeRequest"}},
		{"unknown method", []string{"Node.NodeGetInf"}, []string{`unknown CSI method "Node.NodeGetInf"; did you mean Node.NodeGetInfo`}},
		{"unknown method, other service", []string{"Controller.CreateVolumes"}, []string{"did you mean Controller.CreateVolume"}},
		{"bare method name resolves", []string{"createsnapshot"}, nil},
		{"nothing close", []string{"Foo.Bar"}, []string{"the methods are: ", "Controller.CreateVolume", "SnapshotMetadata.GetMetadataDelta"}},
		{"secrets without a field", []string{"Node.NodeGetInfo", "{}", "--secret", "k=value"}, []string{"NodeGetInfoRequest has no secrets field"}},
		{"secret without a value", []string{"Node.NodeGetInfo", "{}", "--secret", "k"}, []string{"want KEY=VALUE"}},
		{"no method", nil, []string{"want ENDPOINT SERVICE.METHOD [REQUEST]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := 2
			if c.want == nil {
				want = 1 // resolves, then the dial fails
			}
			r := csikit(t, append([]string{"call", ep}, c.args...)...).want(t, want)
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("got stderr %q, want it to contain %q", r.stderr, w)
				}
			}
		})
	}
}

// TestHelpReadsLikeAManualPage checks every command's --help.
func TestHelpReadsLikeAManualPage(t *testing.T) {
	top := csikit(t, "help").want(t, 0)
	for _, c := range []string{"bench", "call", "caps", "csidriver", "fences", "sanity", "testdriver", "unfence", "completion"} {
		if !strings.Contains(top.stdout, "\t"+c) {
			t.Errorf("csikit help does not list %s:\n%s", c, top.stdout)
		}
		for _, args := range [][]string{{c, "--help"}, {"help", c}} {
			r := csikit(t, args...).want(t, 0)
			for _, s := range []string{"NAME\n       csikit " + c + " - ", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "EXAMPLES"} {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("csikit %s: got no %q in:\n%s", strings.Join(args, " "), s, r.stdout)
				}
			}
		}
	}
	csikit(t, "frobnicate").want(t, 2)
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := csikit(t, "completion", sh).want(t, 0)
		if !strings.Contains(r.stdout, "Node.NodeGetInfo") || !strings.Contains(r.stdout, "secrets-file") {
			t.Errorf("completion %s: got no method or option names:\n%s", sh, r.stdout)
		}
	}
	// The bash script parses.
	bash := csikit(t, "completion", "bash").want(t, 0)
	if out, err := exec.Command("bash", "-n", "-c", bash.stdout).CombinedOutput(); err != nil {
		t.Errorf("bash -n on the completion script: %v\n%s", err, out)
	}
	csikit(t, "completion", "tcsh").want(t, 2)
}
