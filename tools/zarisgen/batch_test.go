package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// minimalBatchProgram returns a small valid IDL with one multi-key operation, MultiPut,
// decoded from testdata, for each test to break in one way.
func minimalBatchProgram(t *testing.T) *program {
	t.Helper()
	data, err := os.ReadFile("testdata/minimal_batch.json")
	require.NoError(t, err)
	p, err := parseProgram(data)
	require.NoError(t, err)
	return p
}

func TestBuildModel_MinimalBatch(t *testing.T) {
	m, err := buildModel(minimalBatchProgram(t), "minimal_batch.thrift", defaultZarisImport)
	require.NoError(t, err)
	require.Empty(t, m.Ops)
	require.Len(t, m.BatchOps, 1)
	op := m.BatchOps[0]
	assert.Equal(t, "MultiPut", op.Name)
	assert.Equal(t, "items[].key", op.RoutingField)
	assert.Equal(t, []string{"items[].ifMatchVersion", "items[].ifAbsent"}, op.Guards)
	require.NotNil(t, op.Batch)
	assert.Equal(t, batchModel{
		ItemsField: "Items", Item: "PutItem", KeyExpr: "it.Key",
		Guards: op.Guards, GuardExpr: "it.IsSetIfMatchVersion() || it.GetIfAbsent()",
		SizeExpr:     "40 + len(it.GetKey()) + len(it.GetValue())",
		ResultsField: "Results", Result: "PutOutcome",
	}, *op.Batch)
}

// An item's size counts its binary and string fields' lengths, whatever their
// requiredness, and fieldOverhead for the item and each of its fields.
func TestSizeExpr(t *testing.T) {
	s := &structType{Name: "Item", Fields: []field{
		{Name: "key", TypeID: "binary", Required: "required"},
		{Name: "name", TypeID: "string", Required: "optional"},
		{Name: "n", TypeID: "i64"},
		{Name: "tags", TypeID: "list"},
	}}
	assert.Equal(t, "40 + len(it.GetKey()) + len(it.GetName())", sizeExpr("it", s))
	assert.Equal(t, "8", sizeExpr("it", &structType{Name: "Empty"}))
}

// Every malformed multi-key annotation or shape is rejected with an error naming the
// operation and the field or annotation at fault.
func TestBuildModel_BatchRejections(t *testing.T) {
	fn := func(p *program) *function { return &p.Services[0].Functions[0] }
	ann := func(p *program) map[string]string { return fn(p).Annotations }
	item := func(p *program) *structType { return p.structByName("PutItem") }
	req := func(p *program) *structType { return p.structByName("MultiPutRequest") }
	resp := func(p *program) *structType { return p.structByName("MultiPutResponse") }
	outcome := func(p *program) *structType { return p.structByName("PutOutcome") }
	for _, tc := range []struct {
		name    string
		breakIt func(p *program)
		want    []string
	}{
		{"routing without item field", func(p *program) { ann(p)[annRouting] = "items[]" },
			[]string{"operation MultiPut", "annotation zaris.routing", `"items[]" is not "<list field>[].<item field>"`}},
		{"routing without list", func(p *program) { ann(p)[annRouting] = "[].key" },
			[]string{"operation MultiPut", "annotation zaris.routing", "is not"}},
		{"routing nested", func(p *program) { ann(p)[annRouting] = "items[].key[].x" },
			[]string{"operation MultiPut", "annotation zaris.routing", "is not"}},
		{"list absent", func(p *program) { ann(p)[annRouting] = "entries[].key" },
			[]string{"operation MultiPut", "field entries", "list field not found in request struct MultiPutRequest"}},
		{"list not a list", func(p *program) { ann(p)[annRouting] = "label[].key" },
			[]string{"operation MultiPut", "field label", "must be a list of structs, not string"}},
		{"list of scalars", func(p *program) { req(p).Fields[0].Type.ElemTypeID = "binary" },
			[]string{"operation MultiPut", "field items", "must be a list of structs"}},
		{"list optional", func(p *program) { req(p).Fields[0].Required = "optional" },
			[]string{"operation MultiPut", "field items", "must not be optional"}},
		{"item struct undeclared", func(p *program) { req(p).Fields[0].Type.ElemType.Class = "Nope" },
			[]string{"operation MultiPut", "field items", `element struct "Nope"`}},
		{"key absent", func(p *program) { ann(p)[annRouting] = "items[].name" },
			[]string{"operation MultiPut", "field items[].name", "not found in item struct PutItem"}},
		{"key optional", func(p *program) { item(p).Fields[0].Required = "optional" },
			[]string{"operation MultiPut", "field items[].key", "must not be optional"}},
		{"key not bytes", func(p *program) { item(p).Fields[0].TypeID = "i64" },
			[]string{"operation MultiPut", "field items[].key", "binary or string, not i64"}},
		{"no results annotation", func(p *program) { delete(ann(p), annResults) },
			[]string{"operation MultiPut", "annotation zaris.results", "missing"}},
		{"results not a name", func(p *program) { ann(p)[annResults] = "results[]" },
			[]string{"operation MultiPut", "annotation zaris.results", "is not a field name"}},
		{"results absent", func(p *program) { ann(p)[annResults] = "outcomes" },
			[]string{"operation MultiPut", "field outcomes", "not found in response struct MultiPutResponse"}},
		{"results of scalars", func(p *program) { ann(p)[annResults] = "tags" },
			[]string{"operation MultiPut", "field tags", "must be a list of structs"}},
		{"result without status", func(p *program) { outcome(p).Fields[0].Name = "code" },
			[]string{"operation MultiPut", "field results[].status", "field 1 of result struct PutOutcome must be status"}},
		{"results on a single-key op", func(p *program) { ann(p)[annRouting] = "label" },
			[]string{"operation MultiPut", "annotation zaris.results", "only a multi-key operation"}},
		{"guard of another list", func(p *program) { ann(p)[annGuards] = "others[].ifAbsent" },
			[]string{"operation MultiPut", "annotation zaris.guards", `"others[].ifAbsent" is not "items[]." followed by an item field`}},
		{"guard without list", func(p *program) { ann(p)[annGuards] = "ifAbsent" },
			[]string{"operation MultiPut", "annotation zaris.guards", "is not"}},
		{"guard absent", func(p *program) { ann(p)[annGuards] = "items[].ifNewer" },
			[]string{"operation MultiPut", "field items[].ifNewer", "guard field not found in item struct PutItem"}},
		{"guard required", func(p *program) { ann(p)[annGuards] = "items[].value" },
			[]string{"operation MultiPut", "field items[].value", "must be optional"}},
		{"response without mapEpoch", func(p *program) { resp(p).Fields[2].Name = "epoch" },
			[]string{"operation MultiPut", "field mapEpoch", "must carry mapEpoch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := minimalBatchProgram(t)
			tc.breakIt(p)
			_, err := generate(p, "minimal_batch.thrift", defaultZarisImport)
			require.Error(t, err)
			var se *specError
			require.ErrorAs(t, err, &se)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// A multi-key operation's result alias (<Name>Result, which KV names) must not be another
// operation's descriptor (Op<Name>): OpMultiPut's alias OpMultiPutResult is refused when
// MultiPutResult is an operation too.
func TestBuildModel_ResultAliasTaken(t *testing.T) {
	p := minimalBatchProgram(t)
	fns := p.Services[0].Functions
	other := fns[0]
	other.Name = "MultiPutResult"
	fns[0].Name = "OpMultiPut"
	p.Services[0].Functions = append(fns, other)
	_, err := buildModel(p, "minimal_batch.thrift", defaultZarisImport)
	var se *specError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), "operation OpMultiPut: its result type OpMultiPutResult is the name of operation MultiPutResult's descriptor")

	m, err := buildModel(minimalBatchProgram(t), "minimal_batch.thrift", defaultZarisImport)
	require.NoError(t, err)
	assert.Equal(t, "MultiPutResult", m.BatchOps[0].ResultAlias())
}
