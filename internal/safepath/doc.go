// Package safepath opens node paths without following symlinks: every
// component is opened relative to its parent with O_NOFOLLOW, so a
// symlinked parent cannot move a mount, a file creation or a removal
// somewhere the caller did not mean. mount/ and block/ share it, and give
// mount(2) the descriptor it found (FdPath) instead of the path.
package safepath
