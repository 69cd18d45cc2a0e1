//go:build linux

package fstree

import (
	"path/filepath"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/internal/codederr"
)

// maxHeld is the most directory descriptors one chain keeps open, the
// walk's root included. A walk holds one chain (Copy two), so a tree of
// any depth is walked with a few dozen descriptors at most.
const maxHeld = 16

// maxCopyDepth is how many directory levels below its root Copy walks
// (Copy recurses; Remove and Usage walk any depth).
const maxCopyDepth = 16384

// testHookReopen, when set (by tests only), runs just before a chain
// rooted at root re-opens the ancestor it had closed at level.
var testHookReopen func(root string, level int)

// level is one directory of a chain.
type level struct {
	name string // in its parent; "" for the root
	fd   int    // -1 while closed
	// dev and ino identify the directory; they are recorded when its
	// descriptor is closed, and a re-opened descriptor must match them.
	dev, ino uint64
}

// chain is the path of directories from a walk's root to the directory the
// walk is in, each entered by descriptor. It keeps at most maxHeld of them
// open: the root (owned by the caller) and the deepest ones. Going back up
// to a directory whose descriptor was closed re-opens it through ".." of
// its child, and failing that by name from the root (one component at a
// time with openAt: no symlink followed, no mount entered); either way the
// directory found must be the one left (same device and inode), else the
// walk ends with codes.Aborted. So a bounded chain reaches exactly the
// directories a chain of held descriptors would: a directory moved while
// the walk is below it is followed where it went, and one replaced by a
// symlink or another directory is never entered.
type chain struct {
	w      *walker
	root   string // the root's path, for messages
	levels []level
	lo     int // levels[lo:] are open (lo >= 1), as is levels[0]
}

// newChain starts a chain at the directory open at fd, whose path is root;
// the caller keeps owning fd.
func newChain(w *walker, root string, fd int) *chain {
	return &chain{w: w, root: root, levels: []level{{fd: fd}}, lo: 1}
}

// depth is the number of levels below the root.
func (c *chain) depth() int { return len(c.levels) - 1 }

// fd returns the descriptor of the deepest directory, which is always open.
func (c *chain) fd() int { return c.levels[len(c.levels)-1].fd }

// path returns the path of name in the deepest directory, or of that
// directory when name is "". It is built only for messages: a walk keeps
// names, not paths, so a deep tree costs no quadratic memory.
func (c *chain) path(name string) string {
	parts := make([]string, 0, len(c.levels)+1)
	parts = append(parts, c.root)
	for _, l := range c.levels[1:] {
		parts = append(parts, l.name)
	}
	return filepath.Join(append(parts, name)...)
}

// rel returns path(name) relative to the root ("." for the root).
func (c *chain) rel(name string) string {
	parts := make([]string, 0, len(c.levels))
	for _, l := range c.levels[1:] {
		parts = append(parts, l.name)
	}
	if p := filepath.Join(append(parts, name)...); p != "" {
		return p
	}
	return "."
}

// push enters the directory name of the deepest one, already open at fd;
// the chain owns fd from then on, also when push fails. It closes the
// shallowest open descriptor below it when more than maxHeld would be
// open, recording that directory's identity first.
func (c *chain) push(name string, fd int) error {
	c.levels = append(c.levels, level{name: name, fd: fd})
	if len(c.levels)-c.lo+1 <= maxHeld {
		return nil
	}
	l := &c.levels[c.lo]
	var st unix.Stat_t
	if err := unix.Fstat(l.fd, &st); err != nil {
		return sysError("stat", c.path(""), err)
	}
	l.dev, l.ino = st.Dev, st.Ino
	unix.Close(l.fd)
	l.fd = -1
	c.lo++
	return nil
}

// pop leaves the deepest directory for its parent, re-opening the parent
// if its descriptor was closed. The root is never popped.
func (c *chain) pop() error {
	top := len(c.levels) - 1
	child := c.levels[top].fd
	defer unix.Close(child)
	c.levels = c.levels[:top]
	if c.lo < top || top == 1 {
		return nil // the parent is open
	}
	if err := c.reopen(top-1, child); err != nil {
		return err
	}
	c.lo = top - 1
	return nil
}

// reopen re-opens levels[i] (closed, as is every level between it and the
// root) given a descriptor of its former child.
func (c *chain) reopen(i, child int) error {
	if testHookReopen != nil {
		testHookReopen(c.root, i)
	}
	l := &c.levels[i]
	// ".." never is a symlink; O_NOFOLLOW and the identity check make sure
	// of what was found.
	fd, err := unix.Openat(child, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		if same(fd, l) {
			l.fd = fd
			return nil
		}
		unix.Close(fd)
	}
	// The child was moved to another parent: walk down from the root by
	// name, checking every directory on the way.
	fd = c.levels[0].fd
	for k := 1; k <= i; k++ {
		nfd, err := c.w.openAt(fd, c.levels[k].name, unix.O_RDONLY|unix.O_DIRECTORY)
		if k > 1 {
			unix.Close(fd)
		}
		if err == nil && !same(nfd, &c.levels[k]) {
			unix.Close(nfd)
			err = unix.ESTALE
		}
		if err != nil {
			c.levels = c.levels[:k+1] // for the message
			return codederr.Errorf(codes.Aborted, err,
				"%s was moved or replaced while the walk was below it: retry", c.path(""))
		}
		fd = nfd
	}
	l.fd = fd
	return nil
}

// same reports whether the directory open at fd is the one l recorded.
func same(fd int, l *level) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Dev == l.dev && st.Ino == l.ino
}

// close closes every descriptor the chain holds except the root's and
// leaves only the root in it.
func (c *chain) close() {
	for i := len(c.levels) - 1; i >= 1 && i >= c.lo; i-- {
		if c.levels[i].fd >= 0 {
			unix.Close(c.levels[i].fd)
		}
	}
	c.levels = c.levels[:1]
	c.lo = 1
}
