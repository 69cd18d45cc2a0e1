//go:build !linux

package kube

import (
	"context"
	"errors"
	"testing"
	"time"
)

// node is the kubelet mode's host side (Linux only).
type node struct{ dir, root, sock string }

var errNoNode = errors.New("kube: the kubelet mode runs on Linux only")

// NodePrereqs reports why the kubelet mode cannot run here: it is Linux only.
func NodePrereqs(KubeletOptions) error { return errNoNode }

func (e *Env) startNode(testing.TB, context.Context) error { return errNoNode }

func (e *Env) stopNode() []error { return nil }

// DeletePods deletes every Pod and waits until they are gone (see the
// Linux documentation); without a kubelet it is never called by Start.
func (e *Env) DeletePods(context.Context, time.Duration) error { return errNoNode }

// Leftovers lists what the kubelet mode left on the host: nothing here.
func (e *Env) Leftovers() []string { return nil }

func mountsBelow(string) ([]string, error) { return nil, nil }
