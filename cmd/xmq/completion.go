package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/xmq-io/xmq/internal/config"
)

// Shell completion: `xmq completion bash|zsh|fish` writes a script made
// from the same flag sets the commands parse, so a new flag is completed
// without anything to add here (passwd's flags live in auth, and a test
// keeps passwdFlags equal to its help).

// compCmd is one command for completion.
type compCmd struct {
	name, help string
	flags      []compFlag
	args       compArg   // its operands
	sub        []compCmd // commands that may come first after it
}

// compFlag is one flag: a bool when arg is argNone.
type compFlag struct {
	name, help string
	arg        compArg
	values     []string // the choices, when the value is one of a few words
}

// compArg is what a flag's value or a command's operands are.
type compArg int

const (
	argNone compArg = iota
	argWord         // free text: nothing to complete
	argFile
	argDir
)

// flagArgs are the value kinds of flags whose values are paths or choices.
var flagArgs = map[string]compFlag{
	"c": {arg: argFile}, "config": {arg: argFile}, "password-file": {arg: argFile}, "acl-file": {arg: argFile},
	"data":       {arg: argDir},
	"log-level":  {arg: argWord, values: []string{"debug", "info", "warn", "error"}},
	"log-format": {arg: argWord, values: []string{"auto", "console", "json"}},
}

// passwdFlags are `xmq passwd`'s flags (passwdMain parses them).
var passwdFlags = []compFlag{
	{name: "b", help: "password on the command line"},
	{name: "c", help: "empty the file first"},
	{name: "D", help: "delete the user"},
	{name: "U", help: "hash the plain-text passwords of the file"},
	{name: "H", help: "hash", arg: argWord, values: []string{"bcrypt", "sha512-pbkdf2", "sha512"}},
	{name: "hash", help: "hash (as -H)", arg: argWord, values: []string{"bcrypt", "sha512-pbkdf2", "sha512"}},
	{name: "cost", help: "bcrypt cost or PBKDF2 iterations", arg: argWord},
	{name: "scram", help: "SCRAM credentials stored besides the hash", arg: argWord, values: []string{"sha-256,sha-1", "sha-256", "none"}},
}

// compFlags lists fs's flags for completion, -h last.
func compFlags(fs *flag.FlagSet) []compFlag {
	var out []compFlag
	fs.VisitAll(func(f *flag.Flag) {
		cf := compFlag{name: f.Name, help: f.Usage, arg: argWord}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			cf.arg = argNone
		}
		if k, ok := flagArgs[f.Name]; ok {
			cf.arg, cf.values = k.arg, k.values
		}
		out = append(out, cf)
	})
	return append(out, compFlag{name: "h", help: "print the help and exit"})
}

// xmqCommands is the command tree of xmq.
func xmqCommands() compCmd {
	serve := compFlags(config.Flags())
	return compCmd{name: "xmq", flags: serve, sub: []compCmd{
		{name: "version", help: "print the version and exit"},
		{name: "certs", help: "print or make the development CA", flags: compFlags(newCertsFlagSet(&certsFlags{}))},
		{name: "passwd", help: "add, change or delete a user of a password file", flags: passwdFlags, args: argFile},
		{name: "cluster", help: "cluster tools", sub: []compCmd{
			{name: "secret", help: "print a new cluster secret"},
		}},
		{name: "store", help: "check the on-disk store", sub: []compCmd{
			{name: "check", help: "read every record and report damage", args: argDir},
		}},
		{name: "config", help: "print the configuration or its variables", sub: []compCmd{
			{name: "print", help: "print the configuration in effect", flags: serve},
			{name: "env", help: "list the environment variable of every key"},
		}},
		{name: "health", help: "ask a running broker's /healthz", flags: compFlags(newHealthFlagSet(&healthFlags{}))},
		{name: "check-config", help: "check a configuration without serving", flags: serve},
		{name: "import", help: "convert a Mosquitto configuration file", flags: []compFlag{
			{name: "o", help: "write the configuration to FILE", arg: argFile},
			{name: "h", help: "print the help and exit"},
		}, args: argFile},
		{name: "completion", help: "print a shell completion script", sub: []compCmd{
			{name: "bash", help: "bash completion"}, {name: "zsh", help: "zsh completion"}, {name: "fish", help: "fish completion"},
		}},
	}}
}

// runCompletion is `xmq completion bash|zsh|fish`.
func runCompletion(args []string, stdout io.Writer) error {
	if len(args) == 1 && slices.Contains([]string{"-h", "-help", "--help", "help"}, args[0]) {
		printCompletionUsage(stdout)
		return nil
	}
	if len(args) != 1 {
		return config.UsageError{Err: errors.New("usage: xmq completion bash|zsh|fish")}
	}
	root := xmqCommands()
	switch args[0] {
	case "bash":
		writeBash(stdout, root)
	case "zsh":
		writeZsh(stdout, root)
	case "fish":
		writeFish(stdout, root)
	default:
		return config.UsageError{Err: fmt.Errorf("completion: no script for shell %q: bash, zsh or fish", args[0])}
	}
	return nil
}

func printCompletionUsage(w io.Writer) {
	fmt.Fprint(w, `xmq completion prints a script that completes xmq's commands, flags and
their values (files, directories, levels) in a shell.

Usage:
  xmq completion bash   source it, or save it as
                        /usr/share/bash-completion/completions/xmq
  xmq completion zsh    save it as _xmq in a directory of $fpath, e.g.
                        /usr/share/zsh/vendor-completions/_xmq
  xmq completion fish   save it as ~/.config/fish/completions/xmq.fish

Example:
  source <(xmq completion bash)
`)
}

// walk calls f for cmd and every command below it, with the words that
// lead to it ("xmq", "store", "check").
func (c compCmd) walk(path []string, f func(path []string, c compCmd)) {
	path = append(slices.Clip(path), c.name)
	f(path, c)
	for _, s := range c.sub {
		s.walk(path, f)
	}
}

func writeBash(w io.Writer, root compCmd) {
	fmt.Fprint(w, `# bash completion for xmq; made by `+"`xmq completion bash`"+`.
_xmq() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	# The command is the leading words that name subcommands.
	local cmd=xmq i
	for ((i = 1; i < COMP_CWORD; i++)); do
		case "$cmd ${COMP_WORDS[i]}" in
`)
	root.walk(nil, func(path []string, c compCmd) {
		if len(path) > 1 {
			fmt.Fprintf(w, "\t\t%q) cmd=\"$cmd %s\" ;;\n", strings.Join(path, " "), c.name)
		}
	})
	fmt.Fprint(w, `		*) break ;;
		esac
	done
	case "$cmd" in
`)
	root.walk(nil, func(path []string, c compCmd) {
		fmt.Fprintf(w, "\t%q)\n\t\tcase $prev in\n", strings.Join(path, " "))
		for _, f := range c.flags {
			var action string
			switch {
			case f.arg == argNone:
				continue
			case len(f.values) > 0:
				action = fmt.Sprintf("COMPREPLY=($(compgen -W %q -- \"$cur\"))", strings.Join(f.values, " "))
			case f.arg == argFile:
				action = `compopt -o filenames; COMPREPLY=($(compgen -f -- "$cur"))`
			case f.arg == argDir:
				action = `compopt -o filenames; COMPREPLY=($(compgen -d -- "$cur"))`
			default:
				action = "COMPREPLY=()"
			}
			fmt.Fprintf(w, "\t\t-%s | --%s) %s; return ;;\n", f.name, f.name, action)
		}
		fmt.Fprint(w, "\t\tesac\n")
		// Subcommands only right after their parent, flags anywhere.
		var subs []string
		for _, s := range c.sub {
			subs = append(subs, s.name)
		}
		fmt.Fprintf(w, "\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n", flagWords(c.flags))
		if len(subs) > 0 {
			fmt.Fprintf(w, "\t\t((COMP_CWORD == %d)) && COMPREPLY+=($(compgen -W %q -- \"$cur\"))\n", len(path), strings.Join(subs, " "))
		}
		switch c.args {
		case argFile:
			fmt.Fprint(w, "\t\t[[ $cur == -* ]] || { compopt -o filenames; COMPREPLY+=($(compgen -f -- \"$cur\")); }\n")
		case argDir:
			fmt.Fprint(w, "\t\t[[ $cur == -* ]] || { compopt -o filenames; COMPREPLY+=($(compgen -d -- \"$cur\")); }\n")
		}
		fmt.Fprint(w, "\t\t;;\n")
	})
	fmt.Fprint(w, `	esac
}
complete -F _xmq xmq
`)
}

// flagWords is the flags as a word list for compgen.
func flagWords(fs []compFlag) string {
	words := make([]string, len(fs))
	for i, f := range fs {
		words[i] = "-" + f.name
	}
	return strings.Join(words, " ")
}

// zshQuote escapes s for a single-quoted _arguments spec.
func zshQuote(s string) string {
	return strings.NewReplacer(`'`, `'\''`, `[`, `\[`, `]`, `\]`, `:`, `\:`).Replace(s)
}

func writeZsh(w io.Writer, root compCmd) {
	fmt.Fprint(w, "#compdef xmq\n# zsh completion for xmq; made by `xmq completion zsh`.\n")
	root.walk(nil, func(path []string, c compCmd) {
		fn := "_" + strings.Join(path, "_")
		fmt.Fprintf(w, "\n%s() {\n", fn)
		if len(c.sub) > 0 {
			fmt.Fprint(w, "\tif (( CURRENT > 2 )); then\n\t\tcase ${words[2]} in\n")
			for _, s := range c.sub {
				fmt.Fprintf(w, "\t\t%s) shift words; (( CURRENT-- )); %s_%s; return ;;\n", s.name, fn, s.name)
			}
			fmt.Fprint(w, "\t\tesac\n\tfi\n")
		}
		fmt.Fprint(w, "\t_arguments")
		for _, f := range c.flags {
			spec := fmt.Sprintf("-%s[%s]", f.name, zshQuote(f.help))
			switch {
			case f.arg == argNone:
			case len(f.values) > 0:
				spec += fmt.Sprintf(":%s:(%s)", f.name, strings.Join(f.values, " "))
			case f.arg == argFile:
				spec += ":file:_files"
			case f.arg == argDir:
				spec += ":directory:_files -/"
			default:
				spec += ":" + f.name + ": "
			}
			fmt.Fprintf(w, " \\\n\t\t'%s'", spec)
		}
		if len(c.sub) > 0 {
			var subs []string
			for _, s := range c.sub {
				subs = append(subs, fmt.Sprintf(`%s\:"%s"`, s.name, zshQuote(s.help)))
			}
			fmt.Fprintf(w, " \\\n\t\t'1:command:((%s))'", strings.Join(subs, " "))
		}
		switch c.args {
		case argFile:
			fmt.Fprint(w, " \\\n\t\t'*:file:_files'")
		case argDir:
			fmt.Fprint(w, " \\\n\t\t'*:directory:_files -/'")
		}
		fmt.Fprint(w, "\n}\n")
	})
	fmt.Fprint(w, "\nif [[ $zsh_eval_context[-1] == loadautofunc ]]; then\n\t_xmq \"$@\"\nelse\n\tcompdef _xmq xmq\nfi\n")
}

// fishQuote quotes s for fish.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func writeFish(w io.Writer, root compCmd) {
	fmt.Fprint(w, "# fish completion for xmq; made by `xmq completion fish`.\ncomplete -c xmq -f\n")
	root.walk(nil, func(path []string, c compCmd) {
		// The condition that the words so far are exactly this command's.
		// A subcommand comes right after xmq (__fish_use_subcommand); the
		// root's flags go on after flag values (-c FILE), which fish cannot
		// tell from operands.
		var cond, subCond string
		switch len(path) {
		case 1:
			var subs []string
			for _, s := range c.sub {
				subs = append(subs, s.name)
			}
			cond, subCond = "not __fish_seen_subcommand_from "+strings.Join(subs, " "), "__fish_use_subcommand"
		case 2:
			cond = fmt.Sprintf("__fish_seen_subcommand_from %s", path[1])
			if len(c.sub) > 0 {
				var subs []string
				for _, s := range c.sub {
					subs = append(subs, s.name)
				}
				cond += "; and not __fish_seen_subcommand_from " + strings.Join(subs, " ")
			}
		default:
			cond = fmt.Sprintf("__fish_seen_subcommand_from %s; and __fish_seen_subcommand_from %s", path[len(path)-2], path[len(path)-1])
		}
		if subCond == "" {
			subCond = cond
		}
		for _, s := range c.sub {
			fmt.Fprintf(w, "complete -c xmq -n %s -a %s -d %s\n", fishQuote(subCond), s.name, fishQuote(s.help))
		}
		for _, f := range c.flags {
			line := fmt.Sprintf("complete -c xmq -n %s -o %s -d %s", fishQuote(cond), f.name, fishQuote(f.help))
			switch {
			case f.arg == argNone:
			case len(f.values) > 0:
				line += " -x -a " + fishQuote(strings.Join(f.values, " "))
			case f.arg == argFile:
				line += " -r -F"
			case f.arg == argDir:
				line += " -x -a '(__fish_complete_directories)'"
			default:
				line += " -x"
			}
			fmt.Fprintln(w, line)
		}
		switch c.args {
		case argFile:
			fmt.Fprintf(w, "complete -c xmq -n %s -F\n", fishQuote(cond))
		case argDir:
			fmt.Fprintf(w, "complete -c xmq -n %s -a '(__fish_complete_directories)'\n", fishQuote(cond))
		}
	})
}
