package endpoint

// maxPath is the longest unix socket path bind(2) accepts: sun_path is 108
// bytes on Linux, including the terminating NUL.
const maxPath = 107
