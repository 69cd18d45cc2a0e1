package block

import "github.com/csikit/csikit/internal/codederr"

// The package's errors carry gRPC codes and unwrap to their causes (see
// internal/codederr), so a driver can return them from a handler as-is.
var (
	errorf    = codederr.Errorf
	checkPath = codederr.CheckPath
	ctxError  = codederr.FromContext
)
