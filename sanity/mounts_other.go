//go:build !linux

package sanity

import "errors"

var errUnsupported = errors.New("sanity: mount checks need Linux")

func capacity(string) (int64, error) { return 0, errUnsupported }

// mountsUnder finds nothing off Linux: there is no mountinfo to read.
func mountsUnder(string) ([]string, error) { return nil, nil }

func detach(string) error { return errUnsupported }

func loopDevices() map[string]string { return nil }

func orphanLoops(map[string]string) []string { return nil }

func detachLoop(string) error { return errUnsupported }

func fsTypesAt(string) ([]string, error) { return nil, errUnsupported }

func deviceMappings() map[string]string { return nil }
