package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
)

// TestUsageErrors covers exit code 2: everything that is wrong before a call is made. None
// of these runs reaches a network (closedAddr is never dialed when the line is wrong).
func TestUsageErrors(t *testing.T) {
	seeds := "--seeds=" + closedAddr(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))

	tests := []struct {
		name   string
		env    map[string]string
		args   []string
		stderr string
	}{
		{"no command", nil, nil, "Usage: zaris"},
		{"unknown command", nil, []string{"frob"}, `unknown command "frob"`},
		{"help for an unknown command", nil, []string{"help", "frob"}, `help: unknown command "frob"`},
		{"unknown global flag", nil, []string{"--frob", "get", "k"}, "flag provided but not defined: --frob"},
		{"unknown command flag", nil, []string{"get", "k", "--frob"}, "get: flag provided but not defined: --frob"},
		{"get without key", nil, []string{"get"}, "get: missing arguments (want 1)"},
		{"get with two keys", nil, []string{"get", "a", "b"}, "get: too many arguments"},
		{"put without value", nil, []string{"put", "k"}, "put: missing VALUE (or - to read it from stdin, or --value-file FILE)"},
		{"put with three args", nil, []string{"put", "k", "v", "w"}, "put: too many arguments"},
		{"put bad if-version", nil, []string{"put", "k", "v", "--if-version", "x"}, `put: --if-version "x" is not a whole number`},
		{"delete without key", nil, []string{"delete"}, "delete: missing arguments (want 1)"},
		{"delete bad if-version", nil, []string{"delete", "k", "--if-version=1.5"}, `delete: --if-version "1.5" is not a whole number`},
		{"incr without key", nil, []string{"incr"}, "incr: missing arguments (want 1 to 2)"},
		{"incr bad delta", nil, []string{"incr", "k", "ten"}, `incr: DELTA "ten" is not a whole number`},
		{"incr delta overflows", nil, []string{"incr", "k", "9223372036854775808"}, `incr: DELTA "9223372036854775808" is not a whole number`},
		{"map with an argument", nil, []string{"map", "x"}, "map: too many arguments"},
		{"bad timeout", nil, []string{"--timeout", "soon", "get", "k"}, `zaris: --timeout "soon": not a duration: give a number and a unit, such as 500ms, 5s or 1m30s`},
		{"bad timeout after the command", nil, []string{"get", "k", "--timeout=banana"}, `zaris: get: --timeout "banana": not a duration: give a number and a unit, such as 500ms, 5s or 1m30s`},
		{"timeout without a unit", nil, []string{"--timeout", "5", "get", "k"}, `--timeout "5": not a duration: give a number and a unit, such as 500ms`},
		{"timeout without a value", nil, []string{"get", "k", "--timeout"}, "get: flag needs an argument: --timeout"},
		{"bad json bool", nil, []string{"get", "k", "--json=maybe"}, `get: --json "maybe": not true or false`},
		{"bad demo duration", nil, []string{"demo", "--duration", "long"}, `demo: --duration "long": not a duration: give a number and a unit`},
		{"bad demo nodes", nil, []string{"demo", "--nodes", "three"}, `demo: --nodes "three": not a whole number, such as 3`},
		{"negative timeout", nil, []string{"--timeout=-1s", seeds, "get", "k"}, "--timeout -1s: must not be negative"},
		{"negative max attempts", nil, []string{"--max-attempts=-1", seeds, "get", "k"}, "--max-attempts -1: must not be negative"},
		{"bad max attempts", nil, []string{"--max-attempts", "many", "get", "k"}, `zaris: --max-attempts "many": not a whole number, such as 3`},
		{"bad protocol", nil, []string{"--protocol", "xml", seeds, "get", "k"}, `Protocol "xml": unknown protocol`},
		{"bad transport", nil, []string{"get", "k", "--transport", "pigeon", seeds}, `Transport "pigeon": unknown transport`},
		{"bad seed", nil, []string{"--seeds", "nowhere", "get", "k"}, `Seeds "nowhere": not a host:port address`},
		{"empty seeds", nil, []string{"--seeds", " , ", "map"}, "at least one seed address is required"},
		{"bad seed from env", map[string]string{"ZARIS_SEEDS": "host:0"}, []string{"map"}, `Seeds "host:0"`},
		{"bad request timeout env", map[string]string{"ZARIS_REQUEST_TIMEOUT": "soon"}, []string{seeds, "get", "k"}, `ZARIS_REQUEST_TIMEOUT="soon"`},
		{"bad disable retries env", map[string]string{"ZARIS_DISABLE_RETRIES": "maybe"}, []string{seeds, "get", "k"}, `ZARIS_DISABLE_RETRIES="maybe": not a boolean`},
		{"bad refresh wait env", map[string]string{"ZARIS_CLIENT_MAP_REFRESH_WAIT_MS": "-5"}, []string{seeds, "get", "k"}, `ZARIS_CLIENT_MAP_REFRESH_WAIT_MS="-5": must not be negative`},
		{"bad pipeline env", map[string]string{"ZARIS_PIPELINE": "sometimes"}, []string{seeds, "get", "k"}, `ZARIS_PIPELINE="sometimes": not a boolean`},
		{"tls cert without key", nil, []string{"--tls-cert", notPEM, seeds, "get", "k"}, "--tls-cert needs --tls-key"},
		{"tls key without cert", nil, []string{"--tls-key", notPEM, seeds, "get", "k"}, "--tls-key needs --tls-cert"},
		{"tls ca missing", nil, []string{"--tls-ca", filepath.Join(dir, "missing.pem"), seeds, "get", "k"}, "--tls-ca: open"},
		{"tls ca not pem", nil, []string{"--tls-ca", notPEM, seeds, "get", "k"}, "no PEM certificate in the file"},
		{"tls pair not pem", nil, []string{"--tls-cert", notPEM, "--tls-key", notPEM, seeds, "get", "k"}, "--tls-cert/--tls-key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := runZaris(t, tt.env, tt.args...)
			assert.Equal(t, exitUsage, o.code, "stderr: %s", o.stderr)
			assert.Contains(t, o.stderr, tt.stderr)
			assert.Empty(t, o.stdout, "a usage error prints nothing on stdout")
		})
	}
}

// TestUsageErrors_JSON: --json does not turn a usage error into a result object.
func TestUsageErrors_JSON(t *testing.T) {
	o := runZaris(t, nil, "--json", "get")
	assert.Equal(t, exitUsage, o.code)
	assert.Empty(t, o.stdout)
}

func TestHelp(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"help", []string{"help"}, []string{"Commands:", "get KEY", "put KEY VALUE|- [--value-file F] [--if-version N] [--if-absent]",
			"delete KEY [--if-version N]", "incr KEY [DELTA]", "map", "--seeds", "--protocol", "--transport",
			"--tls-ca", "--tls-cert", "--tls-key", "--timeout", "--max-attempts", "--stats", "--json", "ZARIS_SEEDS",
			"ZARIS_REQUEST_TIMEOUT", "ZARIS_DISABLE_RETRIES", "ZARIS_CLIENT_MAP_REFRESH_WAIT_MS", "ZARIS_PIPELINE",
			"Exit codes:", "3  not found", "4  conflict", "5  gave up", "6  invalid request"}},
		{"-h", []string{"-h"}, []string{"Commands:"}},
		{"--help", []string{"--help"}, []string{"Commands:"}},
		{"help put", []string{"help", "put"}, []string{"Usage: zaris put KEY VALUE", "--if-version N", "--if-absent", "--value-file FILE", "--seeds"}},
		{"put --help", []string{"put", "--help"}, []string{"Usage: zaris put KEY VALUE"}},
		{"incr -h", []string{"incr", "k", "-h"}, []string{"Usage: zaris incr KEY [DELTA]"}},
		{"map --help", []string{"map", "--help"}, []string{"Usage: zaris map"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := runZaris(t, nil, tt.args...)
			assert.Equal(t, exitOK, o.code, "stderr: %s", o.stderr)
			for _, w := range tt.want {
				assert.Contains(t, o.stdout, w)
			}
			assert.Empty(t, o.stderr)
		})
	}
}

func TestHelp_SeedsDefault(t *testing.T) {
	assert.Contains(t, runZaris(t, nil, "help").stdout, `(default "`+DefaultSeeds+`")`)
	assert.Contains(t, runZaris(t, map[string]string{"ZARIS_SEEDS": "10.0.0.1:9"}, "help").stdout, `(default "10.0.0.1:9")`)
}

func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		pos     []string
		version string
		absent  bool
		json    bool
	}{
		{"flags last", []string{"k", "v", "--if-version", "3", "--json"}, []string{"k", "v"}, "3", false, true},
		{"flags first", []string{"--if-absent", "-json", "k", "v"}, []string{"k", "v"}, "", true, true},
		{"flags between", []string{"k", "--if-version=4", "v"}, []string{"k", "v"}, "4", false, false},
		{"negative numbers are arguments", []string{"k", "-5"}, []string{"k", "-5"}, "", false, false},
		{"negative flag value", []string{"k", "--if-version", "-1"}, []string{"k"}, "-1", false, false},
		{"double dash ends flags", []string{"--json", "--", "--if-absent", "-x"}, []string{"--if-absent", "-x"}, "", false, true},
		{"lone dash is an argument", []string{"-", "v"}, []string{"-", "v"}, "", false, false},
		{"bool flag with value", []string{"--if-absent=false", "k"}, []string{"k"}, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			version := fs.String("if-version", "", "")
			absent := fs.Bool("if-absent", false, "")
			js := fs.Bool("json", false, "")
			pos, err := parseInterspersed(fs, tt.args)
			require.NoError(t, err)
			assert.Equal(t, tt.pos, pos)
			assert.Equal(t, tt.version, *version)
			assert.Equal(t, tt.absent, *absent)
			assert.Equal(t, tt.json, *js)
		})
	}
}

// TestGaveUp_NoSeed: a cluster that cannot be reached is "gave up" (exit 5), like a call
// that runs out of attempts: a script can retry both later.
func TestGaveUp_NoSeed(t *testing.T) {
	addr := closedAddr(t)
	tests := []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"flag", nil, []string{"--seeds", addr, "get", "k"}},
		{"env", map[string]string{"ZARIS_SEEDS": addr}, []string{"put", "k", "v"}},
		{"map", nil, []string{"map", "--seeds", addr}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := runZaris(t, tt.env, tt.args...)
			assert.Equal(t, exitGaveUp, o.code)
			assert.Contains(t, o.stderr, "no seed reachable")
			assert.Contains(t, o.stderr, addr)
			assert.Empty(t, o.stdout)
		})
	}
	t.Run("json", func(t *testing.T) {
		o := runZaris(t, nil, "--json", "--stats", "--seeds", addr, "delete", "k")
		assert.Equal(t, exitGaveUp, o.code)
		r := jsonResult(t, o)
		assert.Equal(t, "delete", r["command"])
		assert.Equal(t, "k", r["key"])
		assert.Equal(t, statusGaveUp, r["status"])
		assert.EqualValues(t, exitGaveUp, r["exit"])
		assert.Contains(t, r["error"], "no seed reachable")
		stats := r["stats"].(map[string]any)
		assert.EqualValues(t, 0, stats["attempts"], "no call was made")
		assert.Len(t, stats["bootstrap"].(map[string]any)["seeds"], 1, "one seed was asked")
	})
}

// zaris version and zaris --version print the client runtime's version and the version of
// zarisgen that generated the typed client; neither dials a node.
func TestVersion(t *testing.T) {
	want := "client runtime " + runtime.Version + "\ngenerated code zarisgen " + zarisclient.GeneratorVersion + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}, {"--seeds", closedAddr(t), "--version"}} {
		o := runZaris(t, nil, args...)
		assert.Equal(t, exitOK, o.code, "%v: %s", args, o.stderr)
		assert.Equal(t, want, o.stdout, "%v", args)
		assert.Empty(t, o.stderr, "%v", args)
	}
	o := runZaris(t, nil, "version", "x")
	assert.Equal(t, exitUsage, o.code)
	assert.Contains(t, o.stderr, "version: too many arguments")
	assert.Contains(t, runZaris(t, nil, "help").stdout, "  version ")
}
