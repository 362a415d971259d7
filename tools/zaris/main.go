package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/clustron/zaris-go/runtime/batch"
)

// Exit codes of the zaris command. Scripts may rely on them; doc.go and the usage text list
// them too.
const (
	// exitOK: the command succeeded (for get, the key was found).
	exitOK = 0
	// exitError: an unexpected error (a bug, an application exception from a node, a TLS
	// file that cannot be read, ...).
	exitError = 1
	// exitUsage: the command line or the configuration is wrong: an unknown command or flag,
	// a missing or extra argument, a number that does not parse, a bad protocol, transport
	// or seed address, a bad ZARIS_* environment value.
	exitUsage = 2
	// exitNotFound: the store answered NotFound.
	exitNotFound = 3
	// exitConflict: the store answered Conflict (an --if-version or --if-absent guard failed).
	exitConflict = 4
	// exitGaveUp: no answer came: the client gave up after its attempts or its deadline, the
	// outcome of a non-idempotent write is in doubt, the call was interrupted, or no seed
	// answered with a cluster map. Any *runtime.CallError ends here.
	exitGaveUp = 5
	// exitInvalid: the store answered InvalidRequest (an empty or oversized key or value, an
	// increment of a value that is not a number).
	exitInvalid = 6
)

// command is one subcommand of zaris: one entry in commands, its body in keys.go (one key),
// batch.go (many keys), map.go or demo_cmd.go.
type command struct {
	// name is what the user types: "get".
	name string
	// args is the synopsis after the name: "KEY [--if-version N]".
	args string
	// summary is a one-line description for the usage text.
	summary string
	// minArgs and maxArgs bound the number of positional arguments.
	minArgs, maxArgs int
	// bare marks a command that does not talk to an existing cluster: it takes no client flags.
	bare bool
	// run is the body of a command without flags of its own. setup, for a command with
	// flags, declares them on fs and returns the body, which reads them.
	run   body
	setup func(fs *flag.FlagSet) body
}

// body runs a command with its positional arguments, its flags parsed, writes through c and
// returns the exit code.
type body func(ctx context.Context, c *cli, pos []string) int

// exec parses args (flags and positional arguments in any order) for cmd and runs it. Given
// --help it prints cmd's usage on stdout and returns exitOK: "zaris help NAME" relies on that.
func (cmd *command) exec(ctx context.Context, c *cli, args []string) int {
	fs := newFlagSet(cmd.name, cmd.args)
	if !cmd.bare {
		c.clientFlags(fs.FlagSet)
	}
	run := cmd.run
	if cmd.setup != nil {
		run = cmd.setup(fs.FlagSet)
	}
	pos, code, ok := c.parse(fs, args, cmd.minArgs, cmd.maxArgs)
	if !ok {
		return code
	}
	return run(ctx, c, pos)
}

// commands lists the subcommands in the order the usage text shows them.
var commands = []*command{
	{name: "get", args: "KEY", minArgs: 1, maxArgs: 1, run: runGet,
		summary: "print KEY's value (exit 3 if there is none)"},
	{name: "put", args: "KEY VALUE|- [--value-file F] [--if-version N] [--if-absent]", minArgs: 1, maxArgs: 2, setup: setupPut,
		summary: "write VALUE (- reads stdin) to KEY; print the new version (exit 4 if a guard fails)"},
	{name: "mget", args: "KEY...", minArgs: 1, maxArgs: batch.MaxItems, run: runMget,
		summary: "print each KEY=VALUE in one batch call (exit 5 if some key got no answer)"},
	{name: "mput", args: "KEY=VALUE...", minArgs: 1, maxArgs: batch.MaxItems, run: runMput,
		summary: "write each VALUE to its KEY in one batch call, not atomically; print each new version"},
	{name: "delete", args: "KEY [--if-version N]", minArgs: 1, maxArgs: 1, setup: setupDelete,
		summary: "delete KEY; print the deleted version (exit 3 if absent, 4 if the guard fails)"},
	{name: "incr", args: "KEY [DELTA]", minArgs: 1, maxArgs: 2, run: runIncr,
		summary: "add DELTA (default 1, may be negative) to KEY's decimal value; print the sum"},
	{name: "map", args: "", run: runMap,
		summary: "print the cluster map: epoch, nodes, and each segment's owner and replicas"},
	{name: "wait", args: "[--timeout D]", run: runWait,
		summary: "wait until the cluster answers with a map that owns every segment (exit 5 at --timeout, default 60s)"},
	{name: "version", args: "", bare: true, run: runVersion,
		summary: "print the versions of the client runtime and of the generated code (also: zaris --version)"},
	{name: "demo", args: "[flags]", bare: true, setup: setupDemo,
		summary: "run a workload on an embedded cluster under churn; report what it saw (exit 1 if a write was lost)"},
}

// lookupCommand returns the command called name, or nil.
func lookupCommand(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run is the whole zaris command: it parses the client flags, picks the command and runs it,
// reading a value from stdin when a command is told to (put KEY -), writing results to
// stdout and diagnostics to stderr, and returns the exit code. env reads
// the environment (os.Getenv in main; tests pass their own): both ZARIS_SEEDS and the
// variables the client runtime reads come from it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) string) int {
	c := newCLI(stdout, stderr, env)
	c.stdin = stdin
	fs := flag.NewFlagSet("zaris", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.clientFlags(fs)
	version := fs.Bool("version", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.usage(stdout)
			return exitOK
		}
		return c.usageError("%s", flagError(fs, err))
	}
	rest := fs.Args()
	if *version {
		return runVersion(ctx, c, nil)
	}
	if len(rest) == 0 {
		c.usage(stderr)
		return exitUsage
	}
	if rest[0] == "help" {
		if len(rest) > 1 {
			if cmd := lookupCommand(rest[1]); cmd != nil {
				return cmd.exec(ctx, c, []string{"--help"})
			}
			return c.usageError("help: unknown command %q", rest[1])
		}
		c.usage(stdout)
		return exitOK
	}
	cmd := lookupCommand(rest[0])
	if cmd == nil {
		return c.usageError("unknown command %q", rest[0])
	}
	return cmd.exec(ctx, c, rest[1:])
}

// usage writes the full usage text to w.
func (c *cli) usage(w io.Writer) {
	var b strings.Builder
	b.WriteString("Usage: zaris [flags] COMMAND [ARGS] [flags]\n\nCommands:\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, cmd := range commands {
		fmt.Fprintf(tw, "  %s %s\t%s\n", cmd.name, cmd.args, cmd.summary)
	}
	tw.Flush()
	b.WriteString("\nFlags (before or after the command):\n")
	fs := flag.NewFlagSet("zaris", flag.ContinueOnError)
	newCLI(nil, nil, c.env).clientFlags(fs)
	b.WriteString(flagDefaults(fs))
	b.WriteString(usageFooter)
	io.WriteString(w, b.String())
}

// flagDefaults returns fs's flags as flag.PrintDefaults lists them, with two dashes.
func flagDefaults(fs *flag.FlagSet) string {
	var b strings.Builder
	out := fs.Output()
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(out)
	return strings.TrimPrefix(strings.ReplaceAll("\n"+b.String(), "\n  -", "\n  --"), "\n")
}

const usageFooter = `
Environment:
  ZARIS_SEEDS                       default for --seeds (comma-separated host:port)
  ZARIS_REQUEST_TIMEOUT             whole-call bound: "90s", "60" (seconds) or "infinite"; default 60s
  ZARIS_DISABLE_RETRIES             "true" makes every call a single attempt
  ZARIS_CLIENT_MAP_REFRESH_WAIT_MS  longest wait for a shared map refresh, in ms; default 15000
  ZARIS_PIPELINE                    "false" gives each call a pooled connection of its own
  A value that does not parse is a configuration error (exit 2).

Exit codes:
  0  ok
  1  unexpected error
  2  usage or configuration error
  3  not found
  4  conflict (an --if-version or --if-absent guard failed)
  5  gave up: no answer within the attempts or the deadline, outcome in doubt,
     interrupted, or no seed reachable
  6  invalid request (empty or oversized key or value, increment of a non-number)
`
