// Package crypt encrypts a volume at rest with LUKS2 through cryptsetup
// (Debian package cryptsetup-bin): Format a blank device, Open it as a
// device-mapper mapping named after the volume, Close it, Resize it online
// after the device grew, and read its Status; IsLUKS tells a LUKS header.
// mount.StageOptions.Encryption and the block helpers use it, so a driver
// encrypts a volume with one field.
//
// Invariants:
//
//   - The key reaches cryptsetup only on its stdin (--key-file=-, through
//     command.Options.Secret): never in its argv, its environment, a file
//     or a log line. A failure's message has the key's bytes redacted.
//   - Format never destroys data: it formats only a device on which the
//     Prober (mount.Mounter.DiskFormat, the check mount uses before mkfs)
//     finds nothing — no file system, partition table or LUKS header. A
//     device that already holds LUKS is left as it is (a retry after a
//     crash between format and open opens it; it is not formatted again);
//     a device with anything else is refused with codes.FailedPrecondition.
//   - A key that opens no key slot gives codes.InvalidArgument, and the
//     device is left untouched.
//   - Open and Close are idempotent: Open finds the mapping of a previous
//     call (or of the driver before a restart) through cryptsetup status
//     and returns it when it maps the same device (codes.AlreadyExists
//     when it maps another); Close of a missing mapping succeeds.
//   - Few cryptsetup runs (each is a process and libcryptsetup's start):
//     a mapping whose /dev/mapper node is missing is known closed without
//     one, and failures are told apart after the fact. A first stage runs
//     cryptsetup 3 times (isLuks, luksFormat, open), a restage, an
//     unstage or an expansion once.
//   - A mapping's name comes from the volume ID through MappingName: a
//     fixed prefix and a hash, so any ID (slashes, 200 bytes, unicode)
//     gives a valid device-mapper name of fixed length, and two IDs never
//     share a mapping.
//
// Key derivation: LUKS2 key slots use argon2id with 64 MiB of memory, 4
// passes and 1 thread by default (PBKDF), fixed rather than benchmarked,
// so a header formatted on a fast node opens in the same bounded time and
// memory on a slow one (about 0.1–0.3 s of one core). PBKDF{Type: "pbkdf2"}
// uses PBKDF2-SHA256 with 600000 iterations instead, for nodes that cannot
// spare the memory. The data is encrypted with aes-xts-plain64 and a
// 512-bit volume key.
//
// What it protects: the data on the backing device (a disk, an image
// file, a Ceph image) when the device, a snapshot of it or the storage
// behind it is read without the key. It does not protect data on a node
// where the volume is open: the mapping is plaintext to root on that node,
// and the key is in the node-stage secret.
package crypt
