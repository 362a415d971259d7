package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultSeeds is where zaris looks for the cluster when neither --seeds nor ZARIS_SEEDS
// says otherwise: the three nodes of the local cluster that tools/zarisd's documentation
// starts (ports 7001 to 7003). The first that answers gives the map.
const DefaultSeeds = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"

// EnvSeeds is the environment variable that gives the default of --seeds.
const EnvSeeds = "ZARIS_SEEDS"

// cli is one run of the zaris command: where output goes, the environment, and the client
// flags, which every command accepts before or after its name.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	env            func(string) string

	seeds     string
	protocol  string
	transport string
	tlsCA     string
	tlsCert   string
	tlsKey    string
	timeout   time.Duration
	attempts  int
	stats     bool
	json      bool

	// bootstrap is what fetching the first map cost, once connect tried.
	bootstrap *bootstrapStats
}

// newCLI returns a cli with the client flags at their defaults (--seeds from ZARIS_SEEDS).
func newCLI(stdout, stderr io.Writer, env func(string) string) *cli {
	if env == nil {
		env = func(string) string { return "" }
	}
	seeds := strings.TrimSpace(env(EnvSeeds))
	if seeds == "" {
		seeds = DefaultSeeds
	}
	return &cli{
		stdin: strings.NewReader(""), stdout: stdout, stderr: stderr, env: env,
		seeds:     seeds,
		protocol:  "binary",
		transport: "framed",
	}
}

// clientFlags defines the client flags on fs. Each flag's default is its current value, so a
// command's FlagSet keeps what was given before the command name.
func (c *cli) clientFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.seeds, "seeds", c.seeds, "comma-separated host:port `addresses` of nodes to fetch the cluster map from (env "+EnvSeeds+")")
	fs.StringVar(&c.protocol, "protocol", c.protocol, "Thrift `protocol`: binary, compact, json or header")
	fs.StringVar(&c.transport, "transport", c.transport, "Thrift `transport`: framed or buffered (header frames itself)")
	fs.StringVar(&c.tlsCA, "tls-ca", c.tlsCA, "PEM `file` of the CA certificates that sign the nodes' certificates; enables TLS")
	fs.StringVar(&c.tlsCert, "tls-cert", c.tlsCert, "PEM `file` of the client certificate, for mutual TLS (with --tls-key); enables TLS")
	fs.StringVar(&c.tlsKey, "tls-key", c.tlsKey, "PEM `file` of the client certificate's private key (with --tls-cert)")
	fs.DurationVar(&c.timeout, "timeout", c.timeout, "bound on the whole call, all attempts included, and on fetching the first map (0: ZARIS_REQUEST_TIMEOUT, default 60s)")
	fs.IntVar(&c.attempts, "max-attempts", c.attempts, "cap on the attempts of the call, the first included (0: the default, 3; ZARIS_DISABLE_RETRIES=true still makes it 1)")
	fs.BoolVar(&c.stats, "stats", c.stats, "report attempts, map refreshes and the statuses seen (on stderr, or in the --json object)")
	fs.BoolVar(&c.json, "json", c.json, "print one JSON object per command on stdout")
}

// flagSet is a command's FlagSet and what its --help prints.
type flagSet struct {
	*flag.FlagSet
	// name is the command's name.
	name string
	// synopsis is the command's argument synopsis.
	synopsis string
}

// newFlagSet returns an empty FlagSet for the command name, whose --help shows synopsis.
func newFlagSet(name, synopsis string) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // parse prints the help
	return &flagSet{FlagSet: fs, name: name, synopsis: synopsis}
}

// parse parses args with fs, flags and positional arguments in any order ("--" ends the
// flags; a negative number is a positional argument), and checks that there are between
// minArgs and maxArgs positional arguments. On failure it reports the problem and returns
// the exit code with ok false.
func (c *cli) parse(fs *flagSet, args []string, minArgs, maxArgs int) (pos []string, code int, ok bool) {
	pos, err := parseInterspersed(fs.FlagSet, args)
	name := fs.name
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(c.stdout, "Usage: zaris %s %s\n\nFlags:\n%s", fs.name, fs.synopsis, flagDefaults(fs.FlagSet))
		return nil, exitOK, false
	case err != nil:
		return nil, c.usageError("%s: %s", name, flagError(fs.FlagSet, err)), false
	case len(pos) < minArgs:
		return nil, c.usageError("%s: missing arguments (want %s)", name, argCount(minArgs, maxArgs)), false
	case len(pos) > maxArgs:
		return nil, c.usageError("%s: too many arguments (want %s): %q", name, argCount(minArgs, maxArgs), pos[maxArgs:]), false
	}
	return pos, exitOK, true
}

func argCount(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

// parseInterspersed parses the flags in args with fs wherever they stand and returns the
// other arguments in order. Arguments after "--", "-" itself and negative numbers are
// positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !isFlag(a) {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		// A flag that takes a value takes the next argument, as flag.Parse would.
		if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if err := fs.Parse(flags); err != nil {
		return nil, err
	}
	return append(pos, fs.Args()...), nil
}

// isFlag reports whether a looks like a flag rather than a value: it starts with "-", is not
// "-" alone and is not a number.
func isFlag(a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	_, err := strconv.ParseFloat(a, 64)
	return err != nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// invalidValue matches the flag package's error for a value that does not parse.
var invalidValue = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-([^:]+): `)

// flagError rewrites an error of fs.Parse for a person: flags with two dashes, as the usage
// shows them, and a value that does not parse with an example of one that does.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := invalidValue.FindStringSubmatch(msg); m != nil {
		if f := fs.Lookup(m[2]); f != nil {
			if want := valueExample(f); want != "" {
				return fmt.Sprintf("--%s %q: %s", m[2], m[1], want)
			}
		}
	}
	for _, p := range []string{"for flag -", "not defined: -", "an argument: -"} {
		msg = strings.Replace(msg, p, p+"-", 1)
	}
	return msg
}

// valueExample says what a valid value of f looks like, by its type; "" if it cannot tell.
func valueExample(f *flag.Flag) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return ""
	}
	switch g.Get().(type) {
	case time.Duration:
		return "not a duration: give a number and a unit, such as 500ms, 5s or 1m30s"
	case int, int64:
		return "not a whole number, such as 3"
	case uint, uint64:
		return "not a whole number of zero or more, such as 3"
	case float64:
		return "not a number, such as 0.5"
	case bool:
		return "not true or false"
	}
	return ""
}

// usageError reports a usage or configuration problem on stderr and returns exitUsage.
func (c *cli) usageError(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "zaris: "+format+"\n", args...)
	fmt.Fprintln(c.stderr, "Run 'zaris help' for usage.")
	return exitUsage
}

// parseInt64 parses a decimal int64 argument named what, or reports a usage error.
func (c *cli) parseInt64(cmd, what, s string) (int64, int, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, c.usageError("%s: %s %q is not a whole number", cmd, what, s), false
	}
	return n, exitOK, true
}
