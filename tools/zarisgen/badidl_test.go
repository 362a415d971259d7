package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every mistake in an IDL is refused with the file and line, and the operation, enum value,
// field or annotation at fault: testdata/small.thrift, valid as it is, is broken one way at
// a time and run through the Thrift compiler and zarisgen.
func TestBadIDL(t *testing.T) {
	thriftBin := requireThrift(t)
	base, err := os.ReadFile("testdata/small.thrift")
	require.NoError(t, err)
	dir := t.TempDir()
	inc := "namespace go inc\nstruct Req { 1: required binary key }\nservice Base { void ping() }\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "inc.thrift"), []byte(inc), 0o644))
	load := func(t *testing.T, src string) error {
		t.Helper()
		path := filepath.Join(dir, "bad.thrift")
		require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
		p, err := loadIDL(thriftBin, path)
		require.NoError(t, err, "the Thrift compiler must accept every case")
		_, err = generate(p, "idl/bad.thrift", defaultZarisImport)
		return err
	}
	require.NoError(t, load(t, string(base)), "the base IDL must be valid")

	for _, tc := range []struct {
		name     string
		old, new string
		want     []string
		// include, when set, adds an include of the second file (inc) above the namespace (one line more).
		include bool
	}{
		{"unclassified value", `  Busy = 3,`, "  Busy = 3,\n  Throttled = 4,",
			[]string{"idl/bad.thrift:9:", "enum Status: value Throttled", "not classified"}, false},
		{"unknown name in a class", `zaris.retry        = "Busy"`, `zaris.retry        = "Busy,Throttled"`,
			[]string{"idl/bad.thrift:11:", "annotation zaris.retry", `"Throttled" is not a value of Status`}, false},
		{"value in two classes", `zaris.refresh      = "Moved"`, `zaris.refresh      = "Moved,Busy"`,
			[]string{"idl/bad.thrift:12:", "annotation zaris.refresh", "Busy is in two classes (zaris.retry and zaris.refresh)"}, false},
		{"slow answer", `"Busy:4"`, `"Ok:4"`,
			[]string{"idl/bad.thrift:13:", "annotation zaris.slow_backoff", "Ok is not retried"}, false},
		{"slow factor not a number", `"Busy:4"`, `"Busy:x"`,
			[]string{"idl/bad.thrift:13:", "annotation zaris.slow_backoff", `"Busy:x"`}, false},
		{"enum annotation typo", `zaris.slow_backoff`, `zaris.slow_bakoff`,
			[]string{"idl/bad.thrift:13:", "annotation zaris.slow_bakoff", `did you mean "zaris.slow_backoff"`}, false},
		{"no status enum", `zaris.answer       = "Ok,Missing",`, ``,
			[]string{"idl/bad.thrift:", "no status enum"}, false},
		{"status field of another type", `1: required Status status,`, `1: required i32 status,`,
			[]string{"idl/bad.thrift:", "operation Put", "field status", "must be status: Status, found i32 status"}, false},
		{"operation annotation with another separator", `zaris.guards`, `zaris_guards`,
			[]string{"idl/bad.thrift:33:", "operation Put", "annotation zaris_guards", `did you mean "zaris.guards"`}, false},
		{"operation annotation with a swapped prefix", `zaris.guards`, `zairs.guards`,
			[]string{"idl/bad.thrift:33:", "operation Put", "annotation zairs.guards", `did you mean "zaris.guards"`}, false},
		{"operation annotation one letter off", `zaris.guards`, `zaris.guard`,
			[]string{"idl/bad.thrift:33:", "operation Put", "annotation zaris.guard", `did you mean "zaris.guards"`}, false},
		{"operation annotation two letters off", `zaris.routing`, `zaris.rooting`,
			[]string{"idl/bad.thrift:32:", "operation Put", "annotation zaris.rooting", `did you mean "zaris.routing"`}, false},
		{"class annotation on another enum", "struct PutRequest {", "enum Color { Red = 0 } (zaris.retry = \"Red\")\nstruct PutRequest {",
			[]string{"idl/bad.thrift:16:", "enum Color: annotation zaris.retry", "only the status enum, Status"}, false},
		{"oneway operation", "  ClusterMap GetMap() (zaris.kind = \"admin\")", "  ClusterMap GetMap() (zaris.kind = \"admin\")\n  oneway void fire(1: PutRequest req)",
			[]string{"idl/bad.thrift:36:", "operation fire", "oneway", "gets no reply"}, false},
		{"service annotation typo", "} (zaris.map_operation", "} (zaris.map_operaton",
			[]string{"idl/bad.thrift:36:", "service Small: annotation zaris.map_operaton", "unknown annotation"}, false},
		{"no map operation", ` (zaris.map_operation = "GetMap")`, "",
			[]string{"idl/bad.thrift:30:", "service Small: annotation zaris.map_operation", "missing"}, false},
		{"map operation not declared", `zaris.map_operation = "GetMap"`, `zaris.map_operation = "Map"`,
			[]string{"idl/bad.thrift:36:", "service Small: annotation zaris.map_operation", `"Map" is not declared in service Small`}, false},
		{"map struct without owners", `2: optional i32 owner`, `2: optional i32 leader`,
			[]string{"idl/bad.thrift:27:", "field segments", "needs field owner: optional i32 in SegmentInfo"}, false},
		{"map struct without an epoch", `1: required i64 epoch,`, `1: required i32 epoch,`,
			[]string{"idl/bad.thrift:27:", "field epoch", "needs field epoch: i64 in ClusterMap"}, false},
		{"map operation with an argument", `ClusterMap GetMap()`, `ClusterMap GetMap(1: i64 minEpoch)`,
			[]string{"idl/bad.thrift:36:", "service Small: annotation zaris.map_operation", "GetMap must take no arguments"}, false},
		{"enum annotation on an operation", `zaris.idempotent = "true"`, `zaris.idempotent = "true", zaris.retry = "Busy"`,
			[]string{"idl/bad.thrift:32:", "operation Put", "annotation zaris.retry", "unknown annotation", "known here: zaris.kind"}, false},
		{"two operations, one Go name", "  ClusterMap GetMap() (zaris.kind = \"admin\")", "  ClusterMap GetMap() (zaris.kind = \"admin\")\n  ClusterMap getMap() (zaris.kind = \"admin\")",
			[]string{"idl/bad.thrift:36:", "operation getMap", "operation GetMap and operation getMap both become the Go method GetMap"}, false},
		{"operation inherited through extends", `service Small {`, `service Small extends inc.Base {`,
			[]string{"idl/bad.thrift:31:", "service Small", "extends inc.Base: inherited operations are not supported"}, true},
		{"request struct from an include", `Put(1: PutRequest req)`, `Put(1: inc.Req req)`,
			[]string{"idl/bad.thrift:32:", "operation Put", "arguments", "inc.Req comes from an included file"}, true},
		{"unknown routing field", `zaris.routing = "key"`, `zaris.routing = "name"`,
			[]string{"idl/bad.thrift:", "operation Put", "field name", "not found in request struct PutRequest"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Contains(t, string(base), tc.old)
			src := strings.Replace(string(base), tc.old, tc.new, 1)
			if tc.include {
				src = strings.Replace(src, "namespace go small", "include \"inc.thrift\"\nnamespace go small", 1)
			}
			err := load(t, src)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
