package crypt

// SetMapperDir points c at a directory standing in for /dev/mapper, for
// tests with a fake cryptsetup.
func SetMapperDir(c *Crypt, dir string) { c.mapperDir = dir }

// SetSizeOf replaces how c reads a mapping's size.
func SetSizeOf(c *Crypt, f func(string) (int64, error)) { c.sizeOf = f }
