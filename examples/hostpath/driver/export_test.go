//go:build linux

package driver

import (
	"context"
	"fmt"
)

// Materialize makes a Lazy directory volume's directory, as its first
// stage does, for tests that write into the directory directly.
func (d *Driver) Materialize(ctx context.Context, id string) error {
	v, ok := d.store.volume(id)
	if !ok {
		return fmt.Errorf("no volume %s", id)
	}
	return d.materialize(ctx, &v)
}

// IsLazy reports whether volume id is a directory volume whose directory
// is not made yet.
func (d *Driver) IsLazy(id string) bool {
	v, ok := d.store.volume(id)
	return ok && v.Lazy
}
