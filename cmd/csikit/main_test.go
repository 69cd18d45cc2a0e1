//go:build linux

package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/internal/testenv"
)

// Binaries built once per test binary: the command and the example
// drivers.
var (
	buildMu sync.Mutex
	built   = map[string]string{}
)

// binary builds the main package pkg once for the whole test binary.
func binary(t *testing.T, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if b, ok := built[pkg]; ok {
		return b
	}
	dir, err := os.MkdirTemp("", "csikit-bin")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	built[pkg] = bin
	return bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, b := range built {
		os.RemoveAll(filepath.Dir(b))
	}
	os.Exit(code)
}

// result is what one csikit run printed and its exit status.
type result struct {
	stdout, stderr string
	code           int
}

// csikit runs the command with args.
func csikit(t *testing.T, args ...string) result {
	t.Helper()
	return csikitIn(t, "", args...)
}

// csikitIn runs the command with args and stdin.
func csikitIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary(t, "github.com/csikit/csikit/cmd/csikit"), args...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running csikit %q: %v", args, err)
	}
	return r
}

// want fails the test unless r exited with code.
func (r result) want(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("got exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// object decodes stdout as one JSON object.
func (r result) object(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, r.stdout)
	}
	return m
}

// hostpath starts examples/hostpath and returns its endpoint.
func hostpath(t *testing.T, args ...string) *csitest.Process {
	t.Helper()
	testenv.RequireRoot(t, "examples/hostpath mounts volumes")
	return csitest.StartProcess(t, binary(t, "github.com/csikit/csikit/examples/hostpath"),
		append([]string{"--nodeid", "cli-node", "--state-dir", t.TempDir(), "--log-level", "debug"}, args...)...)
}

// tmpfs starts examples/tmpfs and returns its endpoint.
func tmpfs(t *testing.T) *csitest.Process {
	t.Helper()
	testenv.RequireRoot(t, "examples/tmpfs mounts tmpfs volumes")
	return csitest.StartProcess(t, binary(t, "github.com/csikit/csikit/examples/tmpfs"),
		"--nodeid", "cli-node", "--state-dir", t.TempDir(), "--log-level", "debug")
}

// hostileSecrets are secret values loggers and error formatting escape.
var hostileSecrets = map[string]string{
	"password": `pa"ss\word` + "\nline two ünï " + strconv.Itoa(os.Getpid()),
	"token":    `it's a 'token' with "quotes"`,
}

// noSecrets fails the test if any spelling of a hostile secret is in s.
func noSecrets(t *testing.T, s string) {
	t.Helper()
	for k, v := range hostileSecrets {
		q := strconv.Quote(v)
		j, _ := json.Marshal(v)
		for _, form := range []string{v, q[1 : len(q)-1], string(j[1 : len(j)-1]), strings.Split(v, "\n")[0]} {
			if strings.Contains(s, form) {
				t.Errorf("got the value of secret %q (as %q) in the output, want it redacted:\n%s", k, form, s)
			}
		}
	}
}

// secretsFile writes hostileSecrets as YAML and returns its path.
func secretsFile(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for k, v := range hostileSecrets {
		j, _ := json.Marshal(v) // a JSON string is a YAML double-quoted scalar
		b.WriteString(k + ": " + string(j) + "\n")
	}
	p := filepath.Join(t.TempDir(), "secrets.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
