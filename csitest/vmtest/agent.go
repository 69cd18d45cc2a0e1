//go:build linux

package vmtest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// agentEnv names the virtio-serial port the agent serves; the guest's
// init sets it when it runs the host's binary in the guest.
const agentEnv = "CSIKIT_VMTEST_AGENT"

// GuestEnv is set (to "1") in the environment of every command the VM
// runs: the code under test is in the guest.
const GuestEnv = "CSIKIT_VMTEST_GUEST"

// request is one command for the agent; the host sends one JSON line.
type request struct {
	Argv []string `json:"argv"`
	Dir  string   `json:"dir,omitempty"`
	Env  []string `json:"env"`
}

// frame is one JSON line from the agent: output, or the end of a command
// (Done with its exit code, or Err when it could not start), or Ready
// once at boot.
type frame struct {
	Ready bool   `json:"ready,omitempty"`
	Out   []byte `json:"out,omitempty"`
	Done  bool   `json:"done,omitempty"`
	Exit  int    `json:"exit,omitempty"`
	Err   string `json:"err,omitempty"`
}

func init() {
	if port := os.Getenv(agentEnv); port != "" {
		err := agent(port)
		fmt.Fprintln(os.Stderr, "vmtest agent:", err)
		os.Exit(0)
	}
}

// agent serves the host's requests on the virtio-serial port named port
// until the host closes it.
func agent(port string) error {
	dev, err := findPort(port)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var mu sync.Mutex
	enc := json.NewEncoder(f)
	send := func(fr frame) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(fr)
	}
	send(frame{Ready: true})
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return err
		}
		var req request
		if err := json.Unmarshal(line, &req); err != nil || len(req.Argv) == 0 {
			send(frame{Done: true, Exit: -1, Err: fmt.Sprintf("bad request %q: %v", line, err)})
			continue
		}
		cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
		cmd.Dir, cmd.Env = req.Dir, req.Env
		w := frameWriter(send)
		cmd.Stdout, cmd.Stderr = w, w
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			send(frame{Done: true})
		case errors.As(err, &ee):
			code := ee.ExitCode()
			if code < 0 {
				code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
			}
			send(frame{Done: true, Exit: code})
		default:
			send(frame{Done: true, Exit: -1, Err: err.Error()})
		}
	}
}

// frameWriter sends what a command writes as output frames.
type frameWriter func(frame)

func (w frameWriter) Write(p []byte) (int, error) {
	w(frame{Out: append([]byte(nil), p...)})
	return len(p), nil
}

// findPort returns the device of the virtio-serial port named name
// (/dev/vportNpM; there is no udev to make /dev/virtio-ports/name).
func findPort(name string) (string, error) {
	ents, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
	for _, e := range ents {
		b, err := os.ReadFile(e)
		if err == nil && strings.TrimSpace(string(b)) == name {
			return "/dev/" + filepath.Base(filepath.Dir(e)), nil
		}
	}
	return "", fmt.Errorf("no virtio-serial port named %q", name)
}
