//go:build !linux

package endpoint

// maxPath is the longest unix socket path bind(2) accepts on the BSDs and
// macOS (sun_path is 104 bytes including the NUL); a conservative bound for
// other systems.
const maxPath = 103
