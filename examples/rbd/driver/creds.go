package driver

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/ceph/go-ceph/rados"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The CSI secret keys the driver reads its Ceph credentials from (the
// StorageClass's provisioner, node-stage, controller-expand and
// snapshotter secrets).
const (
	// SecretUserID is the Ceph user without the "client." prefix.
	SecretUserID = "userID"
	// SecretUserKey is that user's key (base64, as `ceph auth get-key`
	// prints it).
	SecretUserKey = "userKey"
)

// Credentials are a Ceph user and its key, taken from CSI secrets. They
// are never logged: String and GoString print the user only.
type Credentials struct {
	// User is the Ceph user name without "client.".
	User string
	// Key is the user's secret key.
	Key string
}

// String hides both: the user ID is a CSI secret too.
func (c Credentials) String() string { return "Ceph credentials from the CSI secrets (hidden)" }

// GoString hides the key from %#v.
func (c Credentials) GoString() string { return c.String() }

// fingerprint identifies the credentials for the connection pool without
// keeping the key as a map key.
func (c Credentials) fingerprint() string {
	h := sha256.Sum256([]byte(c.User + "\x00" + c.Key))
	return hex.EncodeToString(h[:])
}

// CredentialsFromSecrets reads userID and userKey. A missing or malformed
// one is InvalidArgument; the message never contains a secret value.
func CredentialsFromSecrets(secrets map[string]string) (Credentials, error) {
	c := Credentials{User: secrets[SecretUserID], Key: secrets[SecretUserKey]}
	if c.User == "" || c.Key == "" {
		return Credentials{}, status.Errorf(codes.InvalidArgument,
			"the request carries no Ceph credentials: its secrets need %q and %q (set the StorageClass's csi.storage.k8s.io/*-secret-name parameters)",
			SecretUserID, SecretUserKey)
	}
	if !validUser(c.User) {
		return Credentials{}, status.Errorf(codes.InvalidArgument, "secret %q is not a valid Ceph user name (want letters, digits, '.', '_' or '-', without \"client.\")", SecretUserID)
	}
	if !validKey(c.Key) {
		return Credentials{}, status.Errorf(codes.InvalidArgument, "secret %q is not a Ceph key (want the base64 text `ceph auth get-key` prints)", SecretUserKey)
	}
	return c, nil
}

// readSecretsDir reads the standing credentials of Options.SecretsDir:
// the files userID and userKey, as a mounted Secret holds them (a final
// newline, which `kubectl create secret --from-file` keeps, is dropped).
// Errors are FailedPrecondition, name the file and never its content.
func readSecretsDir(dir string) (Credentials, error) {
	read := func(key string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, key))
		if err != nil {
			return "", status.Errorf(codes.FailedPrecondition, "the standing Ceph credentials (--secrets-dir): %v", err)
		}
		return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), nil
	}
	user, err := read(SecretUserID)
	if err != nil {
		return Credentials{}, err
	}
	key, err := read(SecretUserKey)
	if err != nil {
		return Credentials{}, err
	}
	if !validUser(user) {
		return Credentials{}, status.Errorf(codes.FailedPrecondition, "the standing Ceph credentials (--secrets-dir): %s is not a valid Ceph user name (want letters, digits, '.', '_' or '-', without \"client.\")", filepath.Join(dir, SecretUserID))
	}
	if !validKey(key) {
		return Credentials{}, status.Errorf(codes.FailedPrecondition, "the standing Ceph credentials (--secrets-dir): %s is not a Ceph key (want the base64 text `ceph auth get-key` prints)", filepath.Join(dir, SecretUserKey))
	}
	return Credentials{User: user, Key: key}, nil
}

// standing returns the credentials of Options.SecretsDir; ok is false
// without one.
func (d *Driver) standing() (c Credentials, ok bool, err error) {
	if d.opts.SecretsDir == "" {
		return Credentials{}, false, nil
	}
	c, err = readSecretsDir(d.opts.SecretsDir)
	return c, err == nil, err
}

func validUser(s string) bool {
	if len(s) > 128 || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// validKey accepts what `ceph auth get-key` prints: the base64 text of an
// encoded cephx key (type AES, creation time, a 16-bit length, a 16-byte
// secret). Base64 text cannot smuggle a newline or a config option into a
// keyring file; and a key librados cannot decode must never reach it,
// because librados prints such a key in full to stderr (the driver's log)
// whatever its log options say.
func validKey(s string) bool {
	const (
		header  = 2 + 8 + 2 // type, created (seconds, nanoseconds), length
		aesType = 1         // CEPH_CRYPTO_AES
		aesLen  = 16
	)
	if len(s) > 256 {
		return false
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != header+aesLen {
		return false
	}
	return binary.LittleEndian.Uint16(b[0:2]) == aesType && binary.LittleEndian.Uint16(b[10:12]) == aesLen
}

// cephErrno returns the positive errno of a go-ceph error, or 0.
func cephErrno(err error) int {
	var ec interface{ ErrorCode() int }
	if errors.As(err, &ec) {
		if c := ec.ErrorCode(); c < 0 {
			return -c
		}
		return ec.ErrorCode()
	}
	return 0
}

// backendError maps a Ceph error to a gRPC status: permission problems are
// PermissionDenied (the secret's user lacks caps), timeouts Unavailable,
// everything else Internal. what says what was being done.
func backendError(err error, what string) error {
	if _, ok := status.FromError(err); ok && status.Code(err) != codes.Unknown {
		return err
	}
	switch cephErrno(err) {
	case 1, 13: // EPERM, EACCES
		return status.Errorf(codes.PermissionDenied, "%s: %v (check the caps of the secret's Ceph user)", what, err)
	case 110, 111, 107, 4: // ETIMEDOUT, ECONNREFUSED, ENOTCONN, EINTR
		return status.Errorf(codes.Unavailable, "%s: %v; retry", what, err)
	case 28, 122: // ENOSPC, EDQUOT
		return status.Errorf(codes.ResourceExhausted, "%s: %v", what, err)
	}
	if errors.Is(err, rados.ErrNotConnected) {
		return status.Errorf(codes.Unavailable, "%s: %v; retry", what, err)
	}
	return status.Errorf(codes.Internal, "%s: %v", what, err)
}
