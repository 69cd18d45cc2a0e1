// Package drivertest is what csitest's process runner (csitest.Build,
// csitest.StartProcess) was before it became public, so that examples
// copied out of this tree can use it: the same functions under their old
// names, for the tests that still import them (examples/hostpath). New
// tests use csitest.
package drivertest
