package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// minimalProgram returns a small valid IDL (one Put operation) decoded from testdata, for
// each test to break in one way.
func minimalProgram(t *testing.T) *program {
	t.Helper()
	return decodedProgram(t, "testdata/minimal.json")
}

// decodedProgram returns the program decoded from the thrift JSON in the file path.
func decodedProgram(t *testing.T, path string) *program {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	p, err := parseProgram(data)
	require.NoError(t, err)
	return p
}

func TestBuildModel_Minimal(t *testing.T) {
	m, err := buildModel(minimalProgram(t), "minimal.thrift", defaultZarisImport)
	require.NoError(t, err)
	require.Len(t, m.Ops, 1)
	op := m.Ops[0]
	assert.Equal(t, "Put", op.Name)
	assert.Equal(t, "write", op.Kind)
	assert.True(t, op.Idempotent)
	assert.Equal(t, "req.Key", op.RoutingExpr)
	assert.Equal(t, "req.IsSetIfMatchVersion()", op.GuardExpr)
	assert.Equal(t, "PutRequest", op.Request)
	assert.Equal(t, "PutResponse", op.Response)
}

// Every IDL zarisgen cannot serve is rejected with an error that names the operation and the
// field or annotation at fault.
func TestBuildModel_Rejections(t *testing.T) {
	put := func(p *program) *function { return &p.Services[0].Functions[0] }
	req := func(p *program) *structType { return p.structByName("PutRequest") }
	resp := func(p *program) *structType { return p.structByName("PutResponse") }
	for _, tc := range []struct {
		name    string
		breakIt func(p *program)
		want    []string
	}{
		{"missing kind", func(p *program) { delete(put(p).Annotations, annKind) },
			[]string{"operation Put", "annotation zaris.kind", "missing"}},
		{"unknown kind", func(p *program) { put(p).Annotations[annKind] = "scan" },
			[]string{"operation Put", "annotation zaris.kind", `unknown value "scan"`}},
		{"missing idempotent", func(p *program) { delete(put(p).Annotations, annIdempotent) },
			[]string{"operation Put", "annotation zaris.idempotent", "missing"}},
		{"unknown idempotent", func(p *program) { put(p).Annotations[annIdempotent] = "yes" },
			[]string{"operation Put", "annotation zaris.idempotent", `unknown value "yes"`}},
		{"unknown annotation", func(p *program) { put(p).Annotations["zaris.idempotant"] = "true" },
			[]string{"operation Put", "annotation zaris.idempotant", "unknown annotation"}},
		{"no routing annotation", func(p *program) { delete(put(p).Annotations, annRouting) },
			[]string{"operation Put", "annotation zaris.routing", "missing"}},
		{"routing field absent", func(p *program) { put(p).Annotations[annRouting] = "name" },
			[]string{"operation Put", "field name", "not found in request struct PutRequest"}},
		{"routing field optional", func(p *program) { req(p).Fields[0].Required = "optional" },
			[]string{"operation Put", "field key", "must not be optional"}},
		{"routing field not bytes", func(p *program) { req(p).Fields[0].TypeID = "i64" },
			[]string{"operation Put", "field key", "binary or string"}},
		{"status not field 1", func(p *program) { resp(p).Fields[0].Key, resp(p).Fields[1].Key = 2, 1 },
			[]string{"operation Put", "field status", "field 1 of response struct PutResponse must be status: KvStatus, found i64 version"}},
		{"no field 1", func(p *program) { resp(p).Fields[0].Key = 9 },
			[]string{"operation Put", "field status", "found nothing"}},
		{"field 1 misnamed", func(p *program) { resp(p).Fields[0].Name = "code" },
			[]string{"operation Put", "field status", "found i32 code"}},
		{"field 1 not an enum", func(p *program) { resp(p).Fields[0].TypeID = "string" },
			[]string{"operation Put", "field status", "found string status"}},
		{"no status enum", func(p *program) { p.Enums = nil },
			[]string{"minimal.thrift: no status enum", "zaris.answer"}},
		{"no mapEpoch", func(p *program) { resp(p).Fields = resp(p).Fields[:2] },
			[]string{"operation Put", "field mapEpoch", "must carry mapEpoch"}},
		{"guard absent", func(p *program) { put(p).Annotations[annGuards] = "ifAbsent" },
			[]string{"operation Put", "field ifAbsent", "guard field not found"}},
		{"guard required", func(p *program) { put(p).Annotations[annGuards] = "value" },
			[]string{"operation Put", "field value", "must be optional"}},
		{"two arguments", func(p *program) { put(p).Arguments = append(put(p).Arguments, put(p).Arguments[0]) },
			[]string{"operation Put", "arguments", "exactly one request struct"}},
		{"response not a struct", func(p *program) { put(p).ReturnTypeID = "i64"; put(p).ReturnType = nil },
			[]string{"operation Put", "response", "returns a response struct"}},
		{"no data operations", func(p *program) { put(p).Annotations[annKind] = "admin" },
			[]string{"service ZarisKv has no data operations"}},
		{"operation named Close", func(p *program) { put(p).Name = "Close" },
			[]string{"operation Close", "taken by the client's own method Close"}},
		{"two services", func(p *program) { p.Services = append(p.Services, p.Services[0]) },
			[]string{"exactly one service, found 2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := minimalProgram(t)
			tc.breakIt(p)
			_, err := generate(p, "minimal.thrift", defaultZarisImport)
			require.Error(t, err)
			var se *specError
			require.ErrorAs(t, err, &se)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestParseProgram_Malformed(t *testing.T) {
	_, err := parseProgram([]byte(`{"services": [`))
	require.ErrorContains(t, err, "decoding thrift JSON")
}
