package endpoint

import "github.com/csikit/csikit/internal/codederr"

// wrap attaches a gRPC code derived from err (permission, context) or
// fallback, keeping err unwrappable, so both status.Code(err) and
// errors.Is(err, fs.ErrPermission) work.
var wrap = codederr.Wrap
