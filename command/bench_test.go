package command_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/csikit/csikit/command"
)

// BenchmarkRun is the cost of running /bin/true through Run (own process
// group, separate capped streams, LC_ALL=C) next to BenchmarkExecCommand,
// bare os/exec with the same two buffers.
func BenchmarkRun(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		if _, err := command.Run(ctx, "true", nil, command.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecCommand is bare exec.Command running /bin/true, the
// baseline for BenchmarkRun.
func BenchmarkExecCommand(b *testing.B) {
	for b.Loop() {
		var stdout, stderr capture
		cmd := exec.Command("true")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

type capture []byte

func (c *capture) Write(p []byte) (int, error) { *c = append(*c, p...); return len(p), nil }
