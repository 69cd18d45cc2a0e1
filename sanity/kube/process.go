package kube

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Process is one child process the environment started. With Restart set
// it is restarted (after a short backoff) whenever it exits on its own, as
// kubelet restarts a container; Stop ends that.
type Process struct {
	// Name identifies the process in logs and errors.
	Name string
	// LogPath is the file receiving its stdout and stderr (appended to
	// across restarts).
	LogPath string

	path    string
	args    []string
	env     []string
	restart bool
	grace   time.Duration

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the current cmd has exited
	stopping bool
	starts   int
	done     chan struct{} // closed when the supervisor has finished
}

// ProcessOptions configure StartProcess.
type ProcessOptions struct {
	// Name names the process and its log file <LogDir>/<Name>.log.
	Name string
	// Path is the executable; Args its arguments (never through a shell).
	Path string
	Args []string
	// LogDir receives the log file (required).
	LogDir string
	// Env is the environment (default: PATH and HOME=LogDir only).
	Env []string
	// Restart restarts the process whenever it exits before Stop.
	Restart bool
	// StopGrace is the time between SIGTERM and SIGKILL (default 3s).
	StopGrace time.Duration
}

// StartProcess starts a supervised process, e.g. a vendor's driver binary
// to pass to Start as Endpoint. The caller must Stop it (t.Cleanup).
func StartProcess(o ProcessOptions) (*Process, error) {
	if o.Name == "" || o.Path == "" || o.LogDir == "" {
		return nil, errors.New("kube: ProcessOptions need Name, Path and LogDir")
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 3 * time.Second
	}
	if o.Env == nil {
		o.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + o.LogDir}
	}
	p := &Process{
		Name: o.Name, LogPath: filepath.Join(o.LogDir, o.Name+".log"),
		path: o.Path, args: o.Args, env: o.Env, restart: o.Restart, grace: o.StopGrace,
		done: make(chan struct{}),
	}
	if err := p.spawn(); err != nil {
		return nil, err
	}
	go p.supervise()
	return p, nil
}

func (p *Process) spawn() error {
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("kube: %s: %w", p.Name, err)
	}
	defer logf.Close()
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = p.env
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("kube: start %s: %w", p.Name, err)
	}
	p.mu.Lock()
	p.cmd = cmd
	p.exited = make(chan struct{})
	p.starts++
	p.mu.Unlock()
	return nil
}

func (p *Process) supervise() {
	defer close(p.done)
	backoff := 200 * time.Millisecond
	for {
		p.mu.Lock()
		cmd, exited := p.cmd, p.exited
		p.mu.Unlock()
		_ = cmd.Wait()
		close(exited)
		p.mu.Lock()
		stop := p.stopping || !p.restart
		p.mu.Unlock()
		if stop {
			return
		}
		time.Sleep(backoff)
		if backoff < 2*time.Second {
			backoff *= 2
		}
		p.mu.Lock()
		stop = p.stopping
		p.mu.Unlock()
		if stop || p.spawn() != nil {
			return
		}
	}
}

// PID returns the PID of the current incarnation.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// Starts returns how often the process was started (1 + restarts).
func (p *Process) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Running reports whether the current incarnation has not exited.
func (p *Process) Running() bool {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// Stop ends supervision and the process: SIGTERM to its PID, SIGKILL after
// the grace period. It returns once the process has been reaped.
func (p *Process) Stop() error {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	for {
		p.mu.Lock()
		cmd, exited := p.cmd, p.exited
		p.mu.Unlock()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(p.grace):
			_ = cmd.Process.Kill()
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				return fmt.Errorf("kube: %s (pid %d) survived SIGKILL", p.Name, cmd.Process.Pid)
			}
		}
		select {
		case <-p.done:
			return nil
		case <-time.After(5 * time.Second):
			// A restart raced with Stop: stop the new incarnation too.
		}
	}
}

// Kill sends SIGKILL to the current incarnation without ending supervision:
// a restartable process comes back, as after a crash.
func (p *Process) Kill() error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kube: kill %s: %w", p.Name, err)
	}
	return nil
}

func sleepBrief() { time.Sleep(10 * time.Millisecond) }
