//go:build unix

package csitest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/csikit/csikit/internal/testenv"
)

// Timeouts of a driver process (StartProcess).
const (
	// StartTimeout bounds the wait for a started driver's socket.
	StartTimeout = 30 * time.Second
	// StopTimeout is how long a driver may take to exit after SIGTERM
	// before it is killed.
	StopTimeout = 30 * time.Second
)

// goTool returns the go command: the one on PATH, else the usual install
// location (/usr/local/go, which CI and the README's setup use).
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

// Build compiles the main package pkg (an import path or a directory,
// as `go build` takes it: "." for the package under test) with the go
// command into a temporary directory removed when the test ends, and
// returns the binary's path, for StartProcess. A build failure fails the
// test with the compiler's output.
func Build(tb testing.TB, pkg string) string {
	tb.Helper()
	name := filepath.Base(pkg)
	if name == "." || name == string(filepath.Separator) {
		name = "driver"
	}
	bin := filepath.Join(tb.TempDir(), name)
	out, err := exec.Command(goTool(), "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		tb.Fatalf("csitest: go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// Process is one driver binary serving on a unix socket, started by
// StartProcess.
type Process struct {
	// Endpoint is the driver's CSI endpoint, "unix://<socket>".
	Endpoint string

	bin  string
	args []string
	sock string
	log  testenv.SyncBuffer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan error // receives the process's exit, once
}

// StartProcess runs the driver binary bin as a CO does, with
// "--endpoint unix://<socket>" (a socket in a fresh short directory:
// socket paths are limited to 108 bytes) before args, waits until the
// socket accepts connections, and stops the process when the test ends.
// Its Endpoint, Restart and Log are what sanity.Endpoint and
// sanity.Config's Restart and Log take. A driver that exits before
// serving, or does not serve within StartTimeout, fails the test with its
// output.
//
// Only the process it started is ever signalled, by PID: SIGTERM, then
// SIGKILL after StopTimeout.
func StartProcess(tb testing.TB, bin string, args ...string) *Process {
	tb.Helper()
	dir, err := os.MkdirTemp("", "csiproc-")
	if err != nil {
		tb.Fatal(err)
	}
	sock := filepath.Join(dir, "csi.sock")
	p := &Process{Endpoint: "unix://" + sock, bin: bin, args: args, sock: sock}
	tb.Cleanup(func() {
		if err := p.Stop(); err != nil {
			tb.Errorf("csitest: stopping %s: %v", filepath.Base(bin), err)
		}
		os.RemoveAll(dir)
	})
	if err := p.start(); err != nil {
		tb.Fatalf("csitest: %v\n%s", err, p.log.Bytes())
	}
	return p
}

// start launches the process and waits for its socket.
func (p *Process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	os.Remove(p.sock) // a socket left by a killed process
	cmd := exec.Command(p.bin, append([]string{"--endpoint", p.Endpoint}, p.args...)...)
	cmd.Stdout, cmd.Stderr = &p.log, &p.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	p.cmd, p.done = cmd, done
	deadline := time.Now().Add(StartTimeout)
	for {
		if c, err := net.DialTimeout("unix", p.sock, time.Second); err == nil {
			c.Close()
			return nil
		}
		select {
		case err := <-done:
			p.cmd = nil
			return fmt.Errorf("%s exited before serving: %v", filepath.Base(p.bin), err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not serve on %s within %v", filepath.Base(p.bin), p.sock, StartTimeout)
		}
	}
}

// Stop sends SIGTERM and waits for the process to exit, killing it after
// StopTimeout. Stopping a stopped process does nothing. An exit caused by
// the SIGTERM is no error.
func (p *Process) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	cmd, done := p.cmd, p.done
	p.cmd = nil
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return nil // exited already
	}
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGTERM {
			return nil
		}
		return err
	case <-time.After(StopTimeout):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s ignored SIGTERM for %v and was killed", filepath.Base(p.bin), StopTimeout)
	}
}

// Restart stops the process and starts it again with the same arguments
// and socket: a sanity.Config.Restart hook.
func (p *Process) Restart(ctx context.Context) error {
	if err := p.Stop(); err != nil {
		return err
	}
	return p.start()
}

// Log returns everything the process has written to stdout and stderr so
// far: a sanity.Config.Log hook.
func (p *Process) Log() ([]byte, error) { return p.log.Bytes(), nil }
