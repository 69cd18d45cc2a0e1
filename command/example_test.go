package command_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/csikit/csikit/command"
	"google.golang.org/grpc/status"
)

// A tool's report comes from stdout alone; its warnings stay on stderr.
func ExampleRun() {
	res, err := command.Run(context.Background(), "sh",
		[]string{"-c", `echo 'WARNING: something' >&2; echo '{"size": 1024}'`},
		command.Options{Timeout: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("stdout: %s", res.Stdout)
	fmt.Printf("stderr: %s", res.Stderr)
	// Output:
	// stdout: {"size": 1024}
	// stderr: WARNING: something
}

// A secret reaches the tool on stdin, never in its arguments.
func ExampleRun_secret() {
	res, err := command.Run(context.Background(), "sh",
		[]string{"-c", `IFS= read -r key; echo "read ${#key} bytes"`},
		command.Options{Secret: []byte("s3cr'et\n")})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s", res.Stdout)
	// Output: read 7 bytes
}

// A failure names the command, its status and the cause it wrote, and
// carries a gRPC code.
func ExampleError() {
	_, err := command.Run(context.Background(), "sh",
		[]string{"-c", `echo 'resize2fs 1.47.0 (5-Feb-2023)' >&2; echo 'Permission denied to resize filesystem' >&2; exit 1`},
		command.Options{})
	var e *command.Error
	if errors.As(err, &e) {
		fmt.Println(e.ExitCode, e.Summary())
	}
	fmt.Println(status.Code(err), err)
	_, err = command.Run(context.Background(), "sleep", []string{"10"},
		command.Options{Timeout: 50 * time.Millisecond, Grace: time.Second})
	fmt.Println(status.Code(err), err)
	// Output:
	// 1 Permission denied to resize filesystem
	// Internal sh exited with status 1: Permission denied to resize filesystem
	// DeadlineExceeded sleep timed out after 50ms and was killed
}
