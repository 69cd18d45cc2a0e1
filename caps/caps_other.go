//go:build !linux

package caps

import (
	"errors"
	"fmt"
)

func effective() (uint64, error) {
	return 0, fmt.Errorf("caps: capabilities are a Linux feature: %w", errors.ErrUnsupported)
}
