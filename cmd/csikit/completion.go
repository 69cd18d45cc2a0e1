package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

func completionCommand() *command {
	return &command{
		name:     "completion",
		summary:  "print a shell completion script (bash, zsh or fish)",
		synopsis: []string{"csikit completion bash|zsh|fish"},
		description: `Prints a script that completes csikit's commands, their options, the
CSI methods of "csikit call" and unix socket paths, for the shell named.
Load it in the current shell or install it where the shell looks for
completions.`,
		exitStatus: `0      the script was printed.
2      no shell, or one csikit has no script for.`,
		examples: `source <(csikit completion bash)
csikit completion zsh > "${fpath[1]}/_csikit"
csikit completion fish > ~/.config/fish/completions/csikit.fish`,
		flags: func(fs *flag.FlagSet) func(*env, []string) int {
			return func(e *env, args []string) int {
				if len(args) != 1 {
					e.errorf("completion: want one of bash, zsh, fish")
					return exitUsage
				}
				switch args[0] {
				case "bash":
					bashCompletion(e.stdout)
				case "zsh":
					fmt.Fprint(e.stdout, "#compdef csikit\nautoload -U +X bashcompinit && bashcompinit\n")
					bashCompletion(e.stdout)
				case "fish":
					fishCompletion(e.stdout)
				default:
					e.errorf("completion: no script for %q; want bash, zsh or fish", args[0])
					return exitUsage
				}
				return exitOK
			}
		},
	}
}

// completionWords returns the command names, each command's options and
// the CSI method names.
func completionWords() (names []string, opts map[string][]string, methods []string) {
	opts = map[string][]string{}
	for _, c := range commands() {
		names = append(names, c.name)
		fs := newFlagSet(c)
		c.flags(fs)
		for _, n := range flagNames(fs) {
			opts[c.name] = append(opts[c.name], "--"+n)
		}
		opts[c.name] = append(opts[c.name], "--help")
	}
	for _, m := range csiMethods() {
		methods = append(methods, m.Name())
	}
	return names, opts, methods
}

// bashCompletion writes the bash (and, through bashcompinit, zsh) script.
func bashCompletion(w io.Writer) {
	names, opts, methods := completionWords()
	fmt.Fprintf(w, "_csikit() {\n\tlocal cur=\"${COMP_WORDS[COMP_CWORD]}\" cmd=\"${COMP_WORDS[1]}\"\n")
	fmt.Fprintf(w, "\tif [ \"$COMP_CWORD\" -eq 1 ]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); return; fi\n", strings.Join(append(names, "help"), " "))
	fmt.Fprintf(w, "\tcase \"$cmd\" in\n")
	for _, n := range names {
		fmt.Fprintf(w, "\t%s) local opts=%q;;\n", n, strings.Join(opts[n], " "))
	}
	fmt.Fprintf(w, "\thelp) COMPREPLY=($(compgen -W %q -- \"$cur\")); return;;\n", strings.Join(names, " "))
	fmt.Fprintf(w, "\tcompletion) COMPREPLY=($(compgen -W \"bash zsh fish\" -- \"$cur\")); return;;\n")
	fmt.Fprintf(w, "\tesac\n")
	fmt.Fprintf(w, "\tif [[ \"$cur\" == -* ]]; then COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\")); return; fi\n")
	fmt.Fprintf(w, "\tif [ \"$cmd\" = call ] && [ \"$COMP_CWORD\" -ge 3 ] && [[ \"${COMP_WORDS[COMP_CWORD-1]}\" != -* ]]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); return; fi\n", strings.Join(methods, " "))
	fmt.Fprintf(w, "\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n}\ncomplete -o filenames -F _csikit csikit\n")
}

// fishCompletion writes the fish script.
func fishCompletion(w io.Writer) {
	names, opts, methods := completionWords()
	fmt.Fprintf(w, "complete -c csikit -n __fish_use_subcommand -f -a %q\n", strings.Join(append(names, "help"), " "))
	for _, n := range names {
		for _, o := range opts[n] {
			fmt.Fprintf(w, "complete -c csikit -n '__fish_seen_subcommand_from %s' -l %s\n", n, strings.TrimPrefix(o, "--"))
		}
	}
	fmt.Fprintf(w, "complete -c csikit -n '__fish_seen_subcommand_from call' -a %q\n", strings.Join(methods, " "))
	fmt.Fprintf(w, "complete -c csikit -n '__fish_seen_subcommand_from completion' -f -a 'bash zsh fish'\n")
	fmt.Fprintf(w, "complete -c csikit -n '__fish_seen_subcommand_from help' -f -a %q\n", strings.Join(names, " "))
}
