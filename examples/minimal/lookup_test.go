package main

// The README's LookupVolume snippet, compiled against the minimal driver:
// TestREADMEMatchesCompiledCode checks the README shows exactly the
// function below, and TestLookupVolumeAnswersValidate serves it.

import (
	"context"
	"os"
	"path/filepath"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func (d driver) LookupVolume(ctx context.Context, volumeID string) error {
	_, err := os.Stat(filepath.Join(os.TempDir(), "minimal-csi", filepath.Base(volumeID)))
	if os.IsNotExist(err) {
		return status.Errorf(codes.NotFound, "volume %q does not exist", volumeID)
	}
	return err
}
