// Package safepath opens node paths without following symlinks: the
// kernel resolves the path with openat2 RESOLVE_NO_SYMLINKS where it can,
// and otherwise every component is opened relative to its parent with
// O_NOFOLLOW, so a symlinked parent cannot move a mount, a file creation
// or a removal somewhere the caller did not mean. mount/ and block/ share
// it, give mount(2) the descriptor it found (FdPath) instead of the path,
// and remount a bind only after checking it is the one they made
// (RemountBind).
package safepath
