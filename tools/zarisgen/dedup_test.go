package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tokenedIDL is a small valid IDL with one tokened operation (zaris.dedup), which
// TestB8_BadDedup breaks one way at a time.
const tokenedIDL = `namespace go tokened

enum Status { Ok = 0, Moved = 1 } (zaris.answer = "Ok", zaris.refresh = "Moved")

struct Token { 1: required i64 client, 2: required i64 sequence }
struct AddRequest { 1: required binary key, 2: required i64 delta, 3: optional Token token }
struct AddResponse { 1: required Status status, 2: required i64 version, 3: required i64 mapEpoch }
struct GetRequest { 1: required binary key }
struct GetResponse { 1: required Status status, 2: required i64 version, 3: required i64 mapEpoch }
struct Item { 1: required binary key, 2: optional Token token }
struct BatchRequest { 1: required list<Item> items }
struct Outcome { 1: required Status status }
struct BatchResponse { 1: required Status status, 2: required list<Outcome> results, 3: required i64 mapEpoch, 4: required i64 version }

struct NodeInfo { 1: required i32 id, 2: required string host, 3: required i32 port }
struct SegmentInfo { 1: required i32 id, 2: optional i32 owner }
struct ClusterMap { 1: required i64 epoch, 2: required i32 segmentCount,
  3: required list<NodeInfo> nodes, 4: required list<SegmentInfo> segments,
  5: optional i64 dedupWindowMs }

service Tokened {
  AddResponse Add(1: AddRequest req)
    (zaris.kind = "write", zaris.idempotent = "false", zaris.routing = "key",
     zaris.dedup = "token")
  GetResponse Get(1: GetRequest req)
    (zaris.kind = "read", zaris.idempotent = "true", zaris.routing = "key")
  ClusterMap GetMap() (zaris.kind = "admin")
} (zaris.map_operation = "GetMap")
`

// B8: zarisgen generates a tokened operation from a valid IDL (its descriptor names the
// token field, its method sets the token, the map conversion reads the window), and refuses
// a request token wherever it cannot work, naming the line, the operation and the field.
func TestB8_BadDedup(t *testing.T) {
	thriftBin := requireThrift(t)
	dir := t.TempDir()
	load := func(t *testing.T, src string) ([]byte, error) {
		t.Helper()
		path := filepath.Join(dir, "tokened.thrift")
		require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
		p, err := loadIDL(thriftBin, path)
		require.NoError(t, err, "the Thrift compiler must accept every case")
		return generate(p, "idl/tokened.thrift", defaultZarisImport)
	}
	out, err := load(t, tokenedIDL)
	require.NoError(t, err, "the base IDL must be valid")
	client := string(out)
	assert.Contains(t, client, `TokenField:   "token",`)
	assert.Contains(t, client, "tokened.Token = &zaris.Token{Client: t.Client, Sequence: t.Sequence}")
	assert.Contains(t, client, "c.DedupWindowMs = m.GetDedupWindowMs()")
	assert.Equal(t, 1, strings.Count(client, "c.tokens.Next()"), "only the tokened operation takes a token")

	for _, tc := range []struct {
		name     string
		old, new string
		want     []string
	}{
		{"token on an idempotent operation", `zaris.idempotent = "false", zaris.routing = "key",`, `zaris.idempotent = "true", zaris.routing = "key",`,
			[]string{"idl/tokened.thrift:24:", "operation Add", "annotation zaris.dedup", "an idempotent operation needs no request token"}},
		{"token on a read", `(zaris.kind = "read", zaris.idempotent = "true", zaris.routing = "key")`, `(zaris.kind = "read", zaris.idempotent = "false", zaris.routing = "key", zaris.dedup = "key")`,
			[]string{"idl/tokened.thrift:", "operation Get", "annotation zaris.dedup", "only a write operation carries a request token"}},
		{"token field missing", `zaris.dedup = "token"`, `zaris.dedup = "tok"`,
			[]string{"idl/tokened.thrift:22:", "operation Add", "field tok", "request-token field not found in request struct AddRequest"}},
		{"token field of the wrong type", `3: optional Token token }`, `3: optional i64 token }`,
			[]string{"operation Add", "field token", "must be a struct of this IDL with fields client: i64 and sequence: i64", "found i64"}},
		{"token struct of the wrong shape", `struct Token { 1: required i64 client, 2: required i64 sequence }`, `struct Token { 1: required i64 client, 2: required string sequence }`,
			[]string{"operation Add", "field token", "found struct Token: it needs sequence: required i64"}},
		{"token field required", `3: optional Token token }`, `3: required Token token }`,
			[]string{"operation Add", "field token", "must be optional"}},
		{"response without version", `struct AddResponse { 1: required Status status, 2: required i64 version,`, `struct AddResponse { 1: required Status status, 2: required i64 value,`,
			[]string{"idl/tokened.thrift:22:", "operation Add", "response", "must carry version: i64 for a replay to be answered with the first outcome"}},
		{"token on a multi-key operation", `  ClusterMap GetMap() (zaris.kind = "admin")`,
			"  BatchResponse Batch(1: BatchRequest req) (zaris.kind = \"write\", zaris.idempotent = \"false\", zaris.routing = \"items[].key\", zaris.results = \"results\", zaris.dedup = \"items\")\n  ClusterMap GetMap() (zaris.kind = \"admin\")",
			[]string{"idl/tokened.thrift:27:", "operation Batch", "annotation zaris.dedup", "a multi-key operation cannot carry a request token"}},
		{"token annotation one letter off", `zaris.dedup = "token"`, `zaris.dedupe = "token"`,
			[]string{"operation Add", "annotation zaris.dedupe", `did you mean "zaris.dedup"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Contains(t, tokenedIDL, tc.old)
			_, err := load(t, strings.Replace(tokenedIDL, tc.old, tc.new, 1))
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
