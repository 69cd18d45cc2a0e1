package driver

import (
	"context"
	"time"

	"github.com/csikit/csikit/command"
)

// tools runs a node tool for the mappers and returns its stdout alone.
type tools func(ctx context.Context, name string, args ...string) ([]byte, error)

// execTools runs tools with command.Run, each bounded by timeout: stdout
// apart from stderr, so `rbd device map`'s device path and `rbd-nbd
// list-mapped --format json`'s report are never mixed with a warning; a
// failure is a *command.Error naming the tool's stated cause.
func execTools(timeout time.Duration) tools {
	return func(ctx context.Context, name string, args ...string) ([]byte, error) {
		res, err := command.Run(ctx, name, args, command.Options{Timeout: timeout})
		return res.Stdout, err
	}
}
