// Command csikit talks to any CSI driver over its endpoint, whatever the
// language it is written in: it makes one CSI call (call), lists what the
// driver advertises and checks it against what it serves (caps), runs
// csikit's conformance harness against it (sanity), prints the
// Kubernetes CSIDriver object its capabilities imply (csidriver), and
// lists and lifts the fences a csikit driver put between lost nodes and
// volumes (fences, unfence), and measures drivers side by side (bench).
//
// Install it with
//
//	go install github.com/csikit/csikit/cmd/csikit@latest
//
// and run "csikit help" for the commands, "csikit help COMMAND" (or
// "csikit COMMAND --help") for one command's manual page.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// Exit statuses shared by every command.
const (
	exitOK = 0
	// exitFail: the driver answered with an error, broke a rule, or a
	// sanity case failed.
	exitFail = 1
	// exitUsage: bad command line, request or configuration; nothing was
	// asked of the driver, or the driver could not be reached.
	exitUsage = 2
)

// env is what a command runs with: its streams, so tests run commands
// in-process.
type env struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// errorf prints a message prefixed by "csikit: " on stderr.
func (e *env) errorf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "csikit: "+format+"\n", args...)
}

// command is one csikit subcommand and its manual page.
type command struct {
	name        string
	summary     string // one line, for NAME and the command list
	synopsis    []string
	description string
	exitStatus  string
	examples    string
	// flags adds the command's options to fs and returns the function
	// that runs the command on fs's positional arguments.
	flags func(fs *flag.FlagSet) func(e *env, args []string) int
}

// commands returns every subcommand, sorted by name.
func commands() []*command {
	cs := []*command{benchCommand(), callCommand(), capsCommand(), csidriverCommand(), fencesCommand(), sanityCommand(), testdriverCommand(), unfenceCommand(), completionCommand()}
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	return cs
}

// lookup returns the command called name, or nil.
func lookup(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

func main() {
	if path := os.Getenv(sanityChildEnv); path != "" {
		os.Exit(sanityChild(path))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(&env{ctx: ctx, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

// run runs the command line args (without the program name).
func run(e *env, args []string) int {
	if len(args) == 0 {
		usage(e.stderr)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			c := lookup(args[1])
			if c == nil {
				e.errorf("no command %q; run csikit help", args[1])
				return exitUsage
			}
			manual(e.stdout, c, newFlagSet(c))
			return exitOK
		}
		usage(e.stdout)
		return exitOK
	}
	c := lookup(args[0])
	if c == nil {
		e.errorf("no command %q; run csikit help", args[0])
		return exitUsage
	}
	fs := newFlagSet(c)
	runFn := c.flags(fs)
	if err := fs.Parse(interspersed(fs, args[1:])); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			manual(e.stdout, c, fs)
			return exitOK
		}
		e.errorf("%s: %v (see csikit %s --help)", c.name, err, c.name)
		return exitUsage
	}
	return runFn(e, fs.Args())
}

// newFlagSet returns a flag set for c whose errors are returned, not
// printed (run prints them once, with a pointer to --help).
func newFlagSet(c *command) *flag.FlagSet {
	fs := flag.NewFlagSet("csikit "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// interspersed reorders args so options may follow the positional
// arguments ("csikit call EP M '{}' --timeout 5s"), as in most commands; a
// "--" ends the options.
func interspersed(fs *flag.FlagSet, args []string) []string {
	var opts, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' || a == "-" {
			pos = append(pos, a)
			continue
		}
		opts = append(opts, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // Parse reports it
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			i++
			opts = append(opts, args[i])
		}
	}
	return append(append(opts, "--"), pos...)
}

// usage prints the command list.
func usage(w io.Writer) {
	fmt.Fprintf(w, "csikit talks to any CSI driver over its endpoint (unix:///path, /path or tcp://host:port).\n\nUsage:\n\n\tcsikit COMMAND [OPTIONS] ARGS...\n\nCommands:\n\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "\t%-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun \"csikit help COMMAND\" or \"csikit COMMAND --help\" for a command's manual page.\n")
}

// manual prints c's manual page: NAME, SYNOPSIS, DESCRIPTION, OPTIONS,
// EXIT STATUS and EXAMPLES.
func manual(w io.Writer, c *command, fs *flag.FlagSet) {
	if fs.Lookup("help") == nil && len(flagNames(fs)) == 0 {
		c.flags(fs)
	}
	section := func(title, body string) {
		fmt.Fprintf(w, "%s\n", title)
		for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
			if l == "" {
				fmt.Fprintln(w)
				continue
			}
			fmt.Fprintf(w, "       %s\n", l)
		}
		fmt.Fprintln(w)
	}
	section("NAME", "csikit "+c.name+" - "+c.summary)
	section("SYNOPSIS", strings.Join(c.synopsis, "\n"))
	section("DESCRIPTION", c.description)
	var opts strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		arg, text := flag.UnquoteUsage(f)
		fmt.Fprintf(&opts, "--%s", f.Name)
		if arg != "" {
			fmt.Fprintf(&opts, " %s", strings.ToUpper(arg))
		}
		fmt.Fprintf(&opts, "\n")
		for _, l := range wrap(text, 66) {
			fmt.Fprintf(&opts, "       %s\n", l)
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" && f.DefValue != "0" {
			fmt.Fprintf(&opts, "       (default %s)\n", f.DefValue)
		}
	})
	opts.WriteString("--help\n       Print this manual page.\n")
	section("OPTIONS", opts.String())
	section("EXIT STATUS", c.exitStatus)
	section("EXAMPLES", c.examples)
}

// flagNames lists fs's flags.
func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// wrap breaks text into lines of at most width bytes at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// mapFlag is a repeatable key=value option.
type mapFlag map[string]string

func (m mapFlag) String() string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k) // values may be secret: never printed
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func (m mapFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return errors.New("want KEY=VALUE")
	}
	m[k] = val
	return nil
}
