//go:build !linux

package sanity

import (
	"context"
	"errors"
	"time"
)

var errSplitBrainLinux = errors.New("the split-brain sequence runs on Linux only")

func splitBrainSupported() error { return errSplitBrainLinux }

func writeSynced(string, []byte) error { return errSplitBrainLinux }

func readDirect(string) ([]byte, error) { return nil, errSplitBrainLinux }

type writer struct{}

func startWriter(string) (*writer, error)                       { return nil, errSplitBrainLinux }
func (*writer) waitProgress(string, int64, time.Duration) error { return errSplitBrainLinux }
func (*writer) stop() error                                     { return errSplitBrainLinux }
func (*writer) cont() error                                     { return errSplitBrainLinux }
func (*writer) kill(time.Duration) error                        { return errSplitBrainLinux }

// StopProcesses returns a SplitBrainConfig.Freeze that stops the named
// processes; on this system it fails: the area runs on Linux only.
func StopProcesses(targets ...string) func(ctx context.Context) (resume func() error, err error) {
	return func(context.Context) (func() error, error) { return nil, errSplitBrainLinux }
}
