package crypt_test

import (
	"context"
	"fmt"
	"log"

	"github.com/csikit/csikit/crypt"
	"github.com/csikit/csikit/mount"
)

func ExampleMappingName() {
	fmt.Println(crypt.MappingName("pvc-4f1c2a"))
	// Output: csikit-4657554fe259d1bb4245eb8b5be44076
}

// A node stage of an encrypted volume by hand: format the device if it is
// blank, open it, and stage the file system on the mapping. (mount's
// StageOptions.Encryption does all of this in one field.)
func ExampleCrypt() {
	ctx := context.Background()
	m := mount.New(mount.Options{})
	c := crypt.New(crypt.Options{Prober: m})
	key := []byte("from the node-stage secret")
	if _, err := c.Format(ctx, "/dev/loop3", key); err != nil {
		log.Fatal(err)
	}
	dev, err := c.Open(ctx, "/dev/loop3", crypt.MappingName("vol-1"), key, false)
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Stage(ctx, mount.StageOptions{Device: dev, Target: "/var/lib/kubelet/staging/vol-1"}); err != nil {
		log.Fatal(err)
	}
}
