//go:build linux && encryptedsanity

package driver_test

import (
	"testing"

	"github.com/csikit/csikit/sanity"
)

// TestSanityEncryptedAllAreas runs every sanity area against encrypted
// volumes, in the VM lane. It is built only with the tag encryptedsanity
// (`make sanity-encrypted`): in a TCG VM it takes well over the 15
// minutes CI gives a package, and CI runs TestSanityEncrypted (DataPath
// and Encryption) instead.
func TestSanityEncryptedAllAreas(t *testing.T) {
	runEncryptedSanity(t, sanity.AllAreas)
}
