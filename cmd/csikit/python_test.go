//go:build linux

package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/csikit/csikit/internal/testenv"
)

// PythonEnv opts in to TestPythonDriver: it needs Debian's
// python3-grpcio, python3-grpc-tools and python3-protobuf, which .ci/run
// installs in the step that sets it (make python-sanity does both).
const PythonEnv = "CSIKIT_PYTHON_DRIVER"

// TestPythonDriver runs csikit sanity against examples/python, a CSI
// driver written in Python with stubs generated from the spec's
// csi.proto: every case it can serve passes, and with either planted bug
// (NodeUnpublishVolume answering NotFound for a target that is not
// published; DeleteVolume leaving the volume's directory behind, which
// --backend-objects-command shows) the run fails, naming the cases and
// the rule.
func TestPythonDriver(t *testing.T) {
	if os.Getenv(PythonEnv) == "" {
		t.Skip("opt-in: set " + PythonEnv + "=1 (root, python3-grpcio, python3-grpc-tools, python3-protobuf; make python-sanity does)")
	}
	testenv.RequireRoot(t, "the Python driver bind-mounts volumes")
	if out, err := exec.Command("/usr/bin/python3", "-c", "import grpc, grpc_tools, google.protobuf").CombinedOutput(); err != nil {
		t.Fatalf("%s is set but Debian's Python gRPC packages are missing (apt-get install -y python3-grpcio python3-grpc-tools python3-protobuf): %v\n%s", PythonEnv, err, out)
	}
	dir, err := filepath.Abs("../../examples/python")
	if err != nil {
		t.Fatal(err)
	}
	stubs := t.TempDir()
	if out, err := exec.Command(filepath.Join(dir, "gen.sh"), stubs).CombinedOutput(); err != nil {
		t.Fatalf("generating the stubs: %v\n%s", err, out)
	}
	for _, c := range []struct {
		name, bug string
		want      int
		fails     []string
		env       []string
	}{
		{"correct", "", 0, nil, nil},
		// grpc-tools 1.14's output on protobuf 3.21's pure-Python
		// implementation too, not only its C++ one (the default).
		{"pure_python_protobuf", "", 0, nil, []string{"PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python"}},
		{"unpublish_notfound", "unpublish-notfound", 1, []string{
			"FAIL  mount/Node/NodeUnpublishVolume/not_published",
			"FAIL  mount/Node/lifecycle/idempotent",
			"rule: CSI v1.14 NodeUnpublishVolume: a volume not published at target_path counts as unpublished → OK",
		}, nil},
		{"delete_leaks", "delete-leaks", 1, []string{
			"FAIL  mount/Controller/CreateVolume/with_capacity",
			`backend object(s) left by the case after its cleanup deleted what it created: "pyvol-`,
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			d := startScripted(t, append([]string{"CSI_PY_BUG=" + c.bug}, c.env...), filepath.Join(dir, "csi_driver.py"),
				"--nodeid", "py-node", "--state-dir", state, "--stubs", stubs)
			if c.name == "correct" {
				pythonOtherCommands(t, d.endpoint)
			}
			junit := filepath.Join(t.TempDir(), "report.xml")
			r := csikit(t, "sanity", d.endpoint, "--driver-log", d.log, "--restart-command", "sh "+d.script,
				"--backend-objects-command", "ls -1 "+filepath.Join(state, "volumes"),
				"--secrets-file", secretsFile(t), "--junit", junit)
			pass, fail, skip := tally(t, r)
			t.Logf("csikit sanity against the Python driver (%s): %d passed, %d failed, %d skipped", c.name, pass, fail, skip)
			r.want(t, c.want)
			if log, _ := os.ReadFile(d.log); c.env != nil && !strings.Contains(string(log), "(protobuf python implementation;") {
				t.Errorf("the driver did not run on the pure-Python protobuf:\n%s", log)
			}
			noSecrets(t, r.stdout+r.stderr)
			for _, f := range c.fails {
				if !strings.Contains(r.stdout, f) {
					t.Errorf("got no %q in the output:\n%s", f, r.stdout)
				}
			}
			if c.bug == "" && (pass < 50 || !strings.Contains(r.stdout, "PASS  mount/Restart/published_volume_after_restart")) {
				t.Errorf("got %d passed, want over 50 with the restart cases:\n%s", pass, r.stdout)
			}
			rep, _ := readJUnit(t, junit)
			if rep.Suites[0].Failures != fail {
				t.Errorf("got %d failures in JUnit, %d printed", rep.Suites[0].Failures, fail)
			}
		})
	}
}

// pythonOtherCommands runs call, caps and csidriver against the Python
// driver: every command works on a driver csikit did not build.
func pythonOtherCommands(t *testing.T, ep string) {
	t.Helper()
	if ni := csikit(t, "call", ep, "Node.NodeGetInfo").want(t, 0).object(t); ni["nodeId"] != "py-node" {
		t.Errorf("NodeGetInfo: got %v, want nodeId py-node", ni)
	}
	r := csikit(t, "call", ep, "Controller.CreateVolume", `{"name":"cli","volumeCapabilities":[{"block":{},"accessMode":{"mode":"SINGLE_NODE_WRITER"}}]}`).want(t, 1)
	if !strings.Contains(r.stderr, "Controller.CreateVolume: InvalidArgument: only mount access is served") {
		t.Errorf("got stderr %q, want the driver's InvalidArgument", r.stderr)
	}
	if r := csikit(t, "caps", ep).want(t, 0); !strings.Contains(r.stdout, "Node.NodeStageVolume") {
		t.Errorf("caps: got\n%s", r.stdout)
	}
	if r := csikit(t, "csidriver", ep).want(t, 0); !strings.Contains(r.stdout, "name: python.csikit.dev") {
		t.Errorf("csidriver: got\n%s", r.stdout)
	}
}
