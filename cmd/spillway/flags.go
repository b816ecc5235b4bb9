package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/internal/suggest"
)

// flagSet is one command's flags. A command declares them as with package
// flag (fs.String, fs.Duration, fs.Int, fs.Bool, fs.Var, and the helpers
// addTableFlags, bucketCountFlag, fs.verbose), only those it uses, then
// calls parse. parse accepts -name and --name alike, as package flag does,
// and explains every mistake in a sentence that names the flag as --name:
// an unknown flag with the nearest known one, a value that does not parse
// with an example of one that does.
type flagSet struct {
	*flag.FlagSet
	// out receives the help -h prints (stdout).
	out io.Writer
	// warn receives deprecation notices; nil discards them.
	warn io.Writer
}

// newFlagSet returns the flag set of the command or verb name (a key of
// docs).
func newFlagSet(name string, stdout io.Writer) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, out: stdout}
}

// alias is a second name of a flag: setting it sets target. Help lists a
// one-letter alias beside its flag (-v, --verbose) and no other: a synonym
// kept for old command lines (--count) or a deprecated name, whose use
// prints deprecated to the flag set's warn writer.
type alias struct {
	flag.Value
	target     string
	deprecated string
}

// IsBoolFlag lets a boolean flag's alias stand without a value.
func (a alias) IsBoolFlag() bool { return isBoolValue(a.Value) }

// addAlias registers name as an alias of the flag target, which must
// already be declared.
func addAlias(fs *flag.FlagSet, name, target, deprecated string) {
	fs.Var(alias{Value: fs.Lookup(target).Value, target: target, deprecated: deprecated}, name, "alias of --"+target)
}

// verbose declares --verbose, also spelled -v, as Go's tools spell it.
func (fs *flagSet) verbose(usage string) *bool {
	v := fs.Bool("verbose", false, usage)
	addAlias(fs.FlagSet, "v", "verbose", "")
	return v
}

// shortOf returns the one-letter alias of the flag name, if it has one.
func shortOf(fs *flag.FlagSet, name string) string {
	short := ""
	fs.VisitAll(func(f *flag.Flag) {
		if a, ok := f.Value.(alias); ok && a.target == name && len(f.Name) == 1 {
			short = f.Name
		}
	})
	return short
}

// spelled is how an error names the flag the user typed: -v for a
// one-letter flag, --name for every other.
func spelled(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// parse parses args: -h or --help prints the help (flag.ErrHelp, exit 0);
// any mistake is a usage error (exit 2) that says what was expected.
func parse(fs *flagSet, args []string) error {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			if i+1 < len(args) {
				return fs.unexpected(args[i+1])
			}
			return nil
		}
		if len(arg) < 2 || arg[0] != '-' {
			return fs.unexpected(arg)
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(arg[1:], "-"), "=")
		if name == "h" || name == "help" {
			printHelp(fs.out, fs.Name(), fs.FlagSet, nil)
			return flag.ErrHelp
		}
		f := fs.Lookup(name)
		if f == nil || name == "" || name[0] == '-' {
			return fs.unknown(arg)
		}
		if a, ok := f.Value.(alias); ok {
			if a.deprecated != "" && fs.warn != nil {
				fmt.Fprintf(fs.warn, "spillway %s: %s is deprecated: %s\n", fs.Name(), spelled(name), a.deprecated)
			}
			f = fs.Lookup(a.target)
		}
		switch {
		case hasValue:
		case isBoolValue(f.Value):
			value = "true"
		case i+1 == len(args):
			return usagef("%s needs a value: %s (spillway help %s)", spelled(name), expected(f), fs.Name())
		default:
			i++
			value = args[i]
		}
		if err := fs.Set(f.Name, value); err != nil {
			return usagef("%s %s: %s", spelled(name), value, badValue(f, err))
		}
	}
	return nil
}

func (fs *flagSet) unexpected(arg string) error {
	return usagef("unexpected argument %q (spillway help %s lists the flags)", arg, fs.Name())
}

// unknown refuses the flag arg, naming the nearest declared one.
func (fs *flagSet) unknown(arg string) error {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if a, ok := f.Value.(alias); !ok || (len(f.Name) == 1 && a.deprecated == "") {
			names = append(names, f.Name)
		}
	})
	if near, ok := suggest.Nearest(name, names); ok && name != "" {
		return usagef("unknown flag %s; did you mean %s? (spillway help %s lists the flags)", arg, spelled(near), fs.Name())
	}
	return usagef("unknown flag %s (spillway help %s lists the flags)", arg, fs.Name())
}

// expected says what a flag's value looks like.
func expected(f *flag.Flag) string {
	switch valueOf(f).(type) {
	case time.Duration:
		return "a duration with its unit, like 30s, 5m or 1h30m"
	case int, int64, uint, uint64:
		return "a whole number"
	case float64:
		return "a number"
	}
	if arg, _ := flag.UnquoteUsage(f); arg != "" && arg != "value" && arg != "string" {
		return strings.ToUpper(arg)
	}
	return "a value"
}

// badValue explains why value does not suit f: what a value of its kind
// looks like, or the flag's own reason for a value of a type of ours.
func badValue(f *flag.Flag, err error) string {
	switch valueOf(f).(type) {
	case time.Duration, int, int64, uint, uint64, float64:
		if err.Error() == "value out of range" { // package flag's own words
			return "out of range"
		}
		return "want " + expected(f)
	case bool:
		return "want true or false"
	}
	return err.Error()
}

// valueOf returns the flag's current value as its Go type, nil for a
// value of a type of ours.
func valueOf(f *flag.Flag) any {
	if g, ok := f.Value.(flag.Getter); ok {
		return g.Get()
	}
	return nil
}

func isBoolValue(v flag.Value) bool {
	b, ok := v.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
