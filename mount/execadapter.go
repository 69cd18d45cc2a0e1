package mount

import (
	"context"
	"errors"
	"io"

	utilexec "k8s.io/utils/exec"
)

// errNotSupported is returned by the parts of k8s.io/utils/exec.Cmd the
// adapter does not provide (pipes, Start/Wait); mount-utils' format
// detection does not use them.
var errNotSupported = errors.New("not supported by the csikit exec adapter")

// execAdapter lets mount-utils run commands through a Runner, bound to the
// context of the call that uses it.
type execAdapter struct {
	ctx context.Context
	run Runner
}

var _ utilexec.Interface = execAdapter{}

func (a execAdapter) Command(cmd string, args ...string) utilexec.Cmd {
	return &adapterCmd{ctx: a.ctx, run: a.run, name: cmd, args: args}
}

func (a execAdapter) CommandContext(ctx context.Context, cmd string, args ...string) utilexec.Cmd {
	return &adapterCmd{ctx: ctx, run: a.run, name: cmd, args: args}
}

func (a execAdapter) LookPath(file string) (string, error) { return file, nil }

type adapterCmd struct {
	ctx    context.Context
	run    Runner
	name   string
	args   []string
	stdout io.Writer
}

func (c *adapterCmd) CombinedOutput() ([]byte, error) {
	out, err := c.run.Run(c.ctx, c.name, c.args...)
	var ee *ExitError
	if errors.As(err, &ee) {
		return out, ee // a bare *ExitError: mount-utils type-asserts it
	}
	return out, err
}

func (c *adapterCmd) Output() ([]byte, error) { return c.CombinedOutput() }

func (c *adapterCmd) Run() error {
	out, err := c.CombinedOutput()
	if c.stdout != nil {
		_, _ = c.stdout.Write(out)
	}
	return err
}

func (c *adapterCmd) SetDir(string)                      {}
func (c *adapterCmd) SetStdin(io.Reader)                 {}
func (c *adapterCmd) SetStdout(w io.Writer)              { c.stdout = w }
func (c *adapterCmd) SetStderr(io.Writer)                {}
func (c *adapterCmd) SetEnv([]string)                    {}
func (c *adapterCmd) Start() error                       { return errNotSupported }
func (c *adapterCmd) Wait() error                        { return errNotSupported }
func (c *adapterCmd) Stop()                              {}
func (c *adapterCmd) StdoutPipe() (io.ReadCloser, error) { return nil, errNotSupported }
func (c *adapterCmd) StderrPipe() (io.ReadCloser, error) { return nil, errNotSupported }
