package command

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// DefaultMaxOutput is how many bytes of each stream Run keeps when
// Options.MaxOutput is 0.
const DefaultMaxOutput = 4 << 20

// DefaultGrace is how long a program has between SIGTERM and SIGKILL when
// Options.Grace is 0.
const DefaultGrace = 5 * time.Second

// Options configures one Run. The zero value runs the program bounded only
// by the context, keeps DefaultMaxOutput bytes of each stream and gives it
// DefaultGrace to end after SIGTERM.
type Options struct {
	// Timeout bounds this command on top of the context's deadline; 0
	// means the context alone bounds it.
	Timeout time.Duration
	// Grace is how long the process group has after SIGTERM before it
	// gets SIGKILL, and how long Run waits for the output pipes after the
	// program has exited (a forked helper still holding them is then
	// killed with its group). Default DefaultGrace.
	Grace time.Duration
	// MaxOutput is how many bytes of stdout and of stderr (each) are kept.
	// The rest is read and dropped, so the program never blocks on a full
	// pipe; Result and Error say a stream was truncated. 0 means
	// DefaultMaxOutput, a negative value no limit.
	MaxOutput int
	// Secret is written to the program's stdin, which is then closed.
	// Pass passphrases and keys here, never in args or Env: any process
	// on the node can read another's /proc/<pid>/cmdline, and environ is
	// readable by its owner and kept in core dumps. A failure's Error has
	// the secret's bytes (when 4 or more) replaced by "[REDACTED]" in its
	// copies of the output. Nil: stdin is /dev/null.
	Secret []byte
	// Env is added to the process's environment, which is Run's own plus
	// LC_ALL=C (so tools print the messages Summarize and parsers
	// expect); a later entry overrides an earlier one with the same key.
	Env []string
	// Dir is the working directory; "" means Run's own.
	Dir string
}

// Result is what a program wrote. The slices are nil when it wrote
// nothing.
type Result struct {
	// Stdout and Stderr are the two streams, kept apart, each cut at
	// Options.MaxOutput.
	Stdout, Stderr []byte
	// StdoutTruncated and StderrTruncated report a stream that wrote
	// more than MaxOutput bytes: a parser of Stdout must not trust a
	// truncated document.
	StdoutTruncated, StderrTruncated bool
}

// errTimeout is the cause of the context Run derives for Options.Timeout,
// so a timeout is told apart from the caller's own deadline.
var errTimeout = errors.New("command timeout")

// Run runs the program name with args (argv semantics, no shell) in a
// process group of its own and waits for it. It returns the captured
// streams and, when the program could not start, exited non-zero, was
// killed by a signal or outlived ctx or opts.Timeout, an *Error.
//
// When ctx ends or the timeout passes, the program's whole group gets
// SIGTERM and, opts.Grace later, SIGKILL (the program itself, if still
// running) and then SIGKILL again (the rest of its group). Once the
// program has exited, its output gets opts.Grace to close; a process it
// started that still holds it then dies with the group, and the pipes are
// closed. A process that moved to a group or session of its own (a
// daemon) is not signalled. So Run returns within about twice the grace
// after ctx ends, and leaves nothing of the group running but what the
// program started and let go of its output.
func Run(ctx context.Context, name string, args []string, opts Options) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, &Error{Command: name, ExitCode: -1, Err: err}
	}
	grace := opts.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	limit := opts.MaxOutput
	if limit == 0 {
		limit = DefaultMaxOutput
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if opts.Timeout > 0 {
		runCtx, cancel = context.WithTimeoutCause(ctx, opts.Timeout, errTimeout)
	}
	defer cancel()

	cmd := exec.CommandContext(runCtx, name, args...)
	cmd.Env = append(append(cmd.Environ(), "LC_ALL=C"), opts.Env...)
	cmd.Dir = opts.Dir
	ownGroup(cmd)
	cmd.Cancel = func() error { return signalGroup(cmd, sigTerm) }
	cmd.WaitDelay = grace
	stdout, stderr := &capped{max: limit}, &capped{max: limit}
	outR, outW, err := os.Pipe()
	if err != nil {
		return Result{}, &Error{Command: name, ExitCode: -1, Err: err}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return Result{}, &Error{Command: name, ExitCode: -1, Err: err}
	}
	// The pipes are Run's own, not os/exec's: Wait returns when the
	// program exits, and Run decides how long to wait for the rest of
	// its output and what to kill when a forked helper holds it.
	cmd.Stdout, cmd.Stderr = outW, errW
	if opts.Secret != nil {
		cmd.Stdin = bytes.NewReader(opts.Secret)
	}
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err == nil {
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = io.Copy(stdout, outR) })
		wg.Go(func() { _, _ = io.Copy(stderr, errR) })
		drained := make(chan struct{})
		go func() { wg.Wait(); close(drained) }()
		err = cmd.Wait()
		if err != nil && runCtx.Err() != nil {
			// Whatever of the group survived SIGTERM ends now.
			_ = signalGroup(cmd, sigKill)
		}
		t := time.NewTimer(grace)
		select {
		case <-drained:
		case <-t.C:
			// A helper still holds the output after the grace: it dies
			// with the group (one outside it is cut off).
			_ = signalGroup(cmd, sigKill)
			outR.Close()
			errR.Close()
			<-drained
			if err == nil {
				err = exec.ErrWaitDelay
			}
		}
		t.Stop()
	}
	outR.Close()
	errR.Close()

	res := Result{Stdout: stdout.buf, Stderr: stderr.buf,
		StdoutTruncated: stdout.truncated(), StderrTruncated: stderr.truncated()}
	if err == nil {
		return res, nil
	}
	e := &Error{Command: name, ExitCode: -1, Stdout: redact(res.Stdout, opts.Secret),
		Stderr: redact(res.Stderr, opts.Secret), Truncated: res.StdoutTruncated || res.StderrTruncated}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		e.ExitCode = ee.ExitCode()
		e.Signal = exitSignal(ee.ProcessState)
	}
	stopped := ee != nil && runCtx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	switch {
	case stopped && ctx.Err() != nil:
		e.Err = ctx.Err()
	case stopped:
		e.Err, e.Timeout = context.DeadlineExceeded, opts.Timeout
	case ee == nil:
		e.Err = err // could not start, or ErrWaitDelay
	}
	return res, e
}

// capped is an io.Writer that keeps the first max bytes written to it
// (all of them when max < 0) and counts the rest.
type capped struct {
	buf   []byte
	max   int
	total int64
}

func (c *capped) Write(p []byte) (int, error) {
	keep := len(p)
	if c.max >= 0 {
		keep = min(keep, c.max-len(c.buf))
	}
	if keep > 0 {
		c.buf = append(c.buf, p[:keep]...)
	}
	c.total += int64(len(p))
	return len(p), nil
}

func (c *capped) truncated() bool { return c.total > int64(len(c.buf)) }

// redact returns out with every occurrence of secret replaced, or out
// itself when there is nothing to replace. Secrets under 4 bytes are not
// searched for: they would match by accident.
func redact(out, secret []byte) []byte {
	if len(secret) < 4 || !bytes.Contains(out, secret) {
		return out
	}
	return bytes.ReplaceAll(out, secret, []byte("[REDACTED]"))
}
