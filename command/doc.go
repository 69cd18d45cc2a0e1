// Package command runs a driver's external tools (mkfs, lvcreate, rbd,
// cryptsetup, …) the one way csikit runs them:
//
//   - argv semantics, no shell; stdout and stderr captured apart, so a
//     tool that reports JSON on stdout (`lvs --reportformat json`,
//     `rbd --format json`) is parsed from clean stdout, never mixed with
//     its warnings;
//   - each stream stored up to Options.MaxOutput bytes (default
//     DefaultMaxOutput) and drained to its end past that, so a chatty tool
//     never blocks on a full pipe; Result and Error say what was cut;
//   - the program runs in a process group of its own. When the context
//     ends or Options.Timeout passes, the whole group gets SIGTERM, and
//     SIGKILL after Options.Grace: a helper the tool forked, even one that
//     ignores SIGTERM and holds the output pipes open, neither outlives the
//     call nor keeps it waiting;
//   - secrets reach the program on stdin only (Options.Secret), never in
//     its argv or environment, which any process on the node can read
//     from /proc;
//   - a failure is an *Error carrying the command name, the exit status or
//     the signal, both streams and a summary of the cause (Summarize: the
//     tool's first meaningful stderr lines, not its progress or usage
//     text), with a gRPC code: DeadlineExceeded for a timeout or an
//     expired context, Canceled for a cancelled one, Internal otherwise.
//
// mount.ExecRunner runs its tools through Run.
package command
