// csikit: unreleased
//
// Release tooling, a module of its own so that no released module (and so
// no vendor's dependency graph) requires golang.org/x/mod, x/exp or
// x/tools: cmd/modproxy builds a file:// module proxy from release tags
// (scripts/proxy-proof.sh), cmd/apicheck runs apidiff against the previous
// release (scripts/apicheck.sh). Never tagged: scripts/release.sh skips a
// go.mod with the line above.
module github.com/csikit/csikit/tools

go 1.26.0

require (
	golang.org/x/exp v0.0.0-20260908205506-85c1c2202aba
	golang.org/x/mod v0.41.0
)

require (
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/tools v0.50.0
)
