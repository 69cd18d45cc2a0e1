//go:build !linux

package kube

// KubeletNode returns the kubelet-mode node of that name: there is none
// outside Linux.
func (e *Env) KubeletNode(string) (KubeletNode, bool) { return KubeletNode{}, false }

// FreezeNode stops a kubelet-mode node's processes (Linux only).
func (e *Env) FreezeNode(string, ...int) (func() error, error) { return nil, errNoNode }
