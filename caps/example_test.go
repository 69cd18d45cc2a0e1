package caps_test

import (
	"fmt"

	"github.com/csikit/csikit/caps"
)

// A node plugin checks at start-up for what online ext4 expansion needs,
// and says how to grant it.
func Example() {
	ok, err := caps.Has(caps.SysResource)
	if err == nil && !ok {
		fmt.Printf("warning: no %s; add %q to the node plugin's securityContext.capabilities\n",
			caps.SysResource, caps.SysResource.Kubernetes())
	}
}

// Missing lists what a process lacks among several capabilities.
func ExampleMissing() {
	miss, err := caps.Missing(caps.SysAdmin, caps.SysResource)
	if err != nil {
		fmt.Println("cannot read capabilities:", err)
		return
	}
	for _, c := range miss {
		fmt.Println("missing", c)
	}
}
