package mount

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"sync"
	"time"

	"github.com/csikit/csikit/command"
	"github.com/csikit/csikit/crypt"
	"github.com/csikit/csikit/internal/logctx"
)

// Runner runs an external command with argv semantics (no shell) and returns
// its output (ExecRunner's: stdout, then stderr). A command that ran and
// exited non-zero returns an *ExitError; a command cut short by ctx returns
// an error wrapping ctx.Err().
// Tests inject a scripted Runner through Options.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context, name string, args ...string) ([]byte, error)

// Run calls f(ctx, name, args...).
func (f RunnerFunc) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return f(ctx, name, args...)
}

// ExitError is a command that ran and exited with a non-zero status.
type ExitError struct {
	// Command is the program that was run.
	Command string
	// Code is its exit status.
	Code int
	// Output is what the Runner returned: its stdout and stderr.
	Output []byte
	// Stdout and Stderr are the two streams apart, when the Runner kept
	// them (ExecRunner does); the Mounter's error messages summarise them
	// with Summarize, and fall back to Output when both are nil.
	Stdout, Stderr []byte
	// Err is the runner's own error, when it has one: ExecRunner's
	// *command.Error. Unwrap returns it.
	Err error
}

// Unwrap returns Err.
func (e *ExitError) Unwrap() error { return e.Err }

// Error describes the command and its exit status.
func (e *ExitError) Error() string {
	return fmt.Sprintf("%s exited with status %d", e.Command, e.Code)
}

// String is Error; with Exited and ExitStatus it makes *ExitError a
// k8s.io/utils/exec.ExitError, so mount-utils' parsers understand it.
func (e *ExitError) String() string { return e.Error() }

// Exited reports true: the process ran and exited.
func (e *ExitError) Exited() bool { return true }

// ExitStatus returns Code.
func (e *ExitError) ExitStatus() int { return e.Code }

// ExecRunner returns the default Runner: command.Run with the context's
// deadline, LC_ALL=C so output parses the same everywhere,
// command.DefaultMaxOutput bytes kept of each stream, and the tool in a
// process group of its own, killed whole (SIGTERM, then SIGKILL 5 seconds
// later) when ctx ends or a stray child still holds an output pipe 5
// seconds after the tool exited. The output it returns is stdout followed
// by stderr, each whole (not interleaved), and its *ExitError keeps the two
// apart in Stdout and Stderr, so the cause a tool writes to stderr is not
// lost under its progress on stdout; it unwraps to the *command.Error. Any
// other failure (stopped by ctx, killed by a signal, could not start) is
// the *command.Error itself.
func ExecRunner() Runner {
	return RunnerFunc(func(ctx context.Context, name string, args ...string) ([]byte, error) {
		res, err := command.Run(ctx, name, args, command.Options{Grace: 5 * time.Second})
		out := append(append([]byte(nil), res.Stdout...), res.Stderr...)
		var ce *command.Error
		if errors.As(err, &ce) && ce.ExitCode >= 0 && (ce.Err == nil || errors.Is(ce.Err, exec.ErrWaitDelay)) {
			return out, &ExitError{Command: name, Code: ce.ExitCode, Output: out,
				Stdout: res.Stdout, Stderr: res.Stderr, Err: ce}
		}
		return out, err
	})
}

// Options configures a Mounter. The zero value is ready to use.
type Options struct {
	// Runner runs blkid, mkfs.*, resize2fs, xfs_growfs and mount(8) for
	// file systems that need a mount helper. Default: ExecRunner().
	Runner Runner
	// Logger receives one line per state change (format, mount, unmount,
	// cleanup of a corrupt mount). Mount options marked sensitive are
	// never logged. During a call served by csikit (see
	// csi/logging.FromContext), each line carries the call's request ID
	// and method, and a nil Logger means the call's logger; outside a
	// call, nil discards.
	Logger *slog.Logger
	// Crypt opens and closes the mappings of encrypted volumes
	// (StageOptions.Encryption). Default: crypt.New with this Mounter as
	// its Prober (so a device is formatted with LUKS only when the check
	// before mkfs finds it blank), the default key derivation and Logger.
	Crypt *crypt.Crypt
}

// Mounter stages, publishes, unpublishes and unstages volumes on a node. Its
// methods are safe for concurrent use; calls on the same target path are
// serialized, so two concurrent publishes cannot stack two mounts.
type Mounter struct {
	run Runner
	log *slog.Logger

	mu    sync.Mutex
	locks map[string]*targetLock
	// staged holds the mount ID of each file system without a device node
	// (tmpfs, nfs, ...) this Mounter staged, by target, so a repeated Stage
	// can tell its own mount from another one of the same source name
	// (device numbers of such file systems are reused at once). It lives
	// as long as the Mounter.
	staged map[string]uint64

	minSizes minSizes // MinSize's answers

	crypt *crypt.Crypt
}

// remember records the mount ID of the device-less file system staged at
// target.
func (m *Mounter) remember(target string, dev uint64) {
	m.mu.Lock()
	m.staged[target] = dev
	m.mu.Unlock()
}

// forget drops the record of target (it was unstaged).
func (m *Mounter) forget(target string) {
	m.mu.Lock()
	delete(m.staged, target)
	m.mu.Unlock()
}

// recorded returns the mount ID remembered for target.
func (m *Mounter) recorded(target string) (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dev, ok := m.staged[target]
	return dev, ok
}

type targetLock struct {
	sync.Mutex
	refs int
}

// New returns a Mounter configured by opts.
func New(opts Options) *Mounter {
	m := &Mounter{run: opts.Runner, locks: map[string]*targetLock{}, staged: map[string]uint64{}}
	if m.run == nil {
		m.run = ExecRunner()
	}
	var base slog.Handler // nil: the call's logger
	if opts.Logger != nil {
		base = opts.Logger.Handler()
	}
	m.log = slog.New(logctx.NewHandler(base))
	m.crypt = opts.Crypt
	if m.crypt == nil {
		m.crypt = crypt.New(crypt.Options{Prober: m, Logger: opts.Logger})
	}
	return m
}

// lock serializes calls on one target path and returns the unlock function.
func (m *Mounter) lock(target string) func() {
	m.mu.Lock()
	l := m.locks[target]
	if l == nil {
		l = &targetLock{}
		m.locks[target] = l
	}
	l.refs++
	m.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		m.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(m.locks, target)
		}
		m.mu.Unlock()
	}
}
