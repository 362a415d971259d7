package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// minimalBatchProgram returns a small valid IDL with one multi-key operation, MultiPut,
// decoded from testdata, for each test to break in one way.
func minimalBatchProgram(t *testing.T) *program {
	t.Helper()
	return decodedProgram(t, "testdata/minimal_batch.json")
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
	setAnn := func(key, value string) func(p *program) { return func(p *program) { ann(p)[key] = value } }
	for _, tc := range []struct {
		name    string
		breakIt func(p *program)
		at, why string // the field or annotation at fault, and why
	}{
		{"routing without item field", setAnn(annRouting, "items[]"), "annotation zaris.routing", `"items[]" is not "<list field>[].<item field>"`},
		{"routing without list", setAnn(annRouting, "[].key"), "annotation zaris.routing", "is not"},
		{"routing nested", setAnn(annRouting, "items[].key[].x"), "annotation zaris.routing", "is not"},
		{"list absent", setAnn(annRouting, "entries[].key"), "field entries", "list field not found in request struct MultiPutRequest"},
		{"list not a list", setAnn(annRouting, "label[].key"), "field label", "must be a list of structs, not string"},
		{"list of scalars", func(p *program) { req(p).Fields[0].Type.ElemTypeID = "binary" }, "field items", "must be a list of structs"},
		{"list optional", func(p *program) { req(p).Fields[0].Required = "optional" }, "field items", "must not be optional"},
		{"item struct undeclared", func(p *program) { req(p).Fields[0].Type.ElemType.Class = "Nope" }, "field items", `element struct "Nope"`},
		{"key absent", setAnn(annRouting, "items[].name"), "field items[].name", "not found in item struct PutItem"},
		{"key optional", func(p *program) { item(p).Fields[0].Required = "optional" }, "field items[].key", "must not be optional"},
		{"key not bytes", func(p *program) { item(p).Fields[0].TypeID = "i64" }, "field items[].key", "binary or string, not i64"},
		{"no results annotation", func(p *program) { delete(ann(p), annResults) }, "annotation zaris.results", "missing"},
		{"results not a name", setAnn(annResults, "results[]"), "annotation zaris.results", "is not a field name"},
		{"results absent", setAnn(annResults, "outcomes"), "field outcomes", "not found in response struct MultiPutResponse"},
		{"results of scalars", setAnn(annResults, "tags"), "field tags", "must be a list of structs"},
		{"result without status", func(p *program) { outcome(p).Fields[0].Name = "code" }, "field results[].status", "field 1 of result struct PutOutcome must be status"},
		{"results on a single-key op", setAnn(annRouting, "label"), "annotation zaris.results", "only a multi-key operation"},
		{"guard of another list", setAnn(annGuards, "others[].ifAbsent"), "annotation zaris.guards", `"others[].ifAbsent" is not "items[]." followed by an item field`},
		{"guard without list", setAnn(annGuards, "ifAbsent"), "annotation zaris.guards", "is not"},
		{"guard absent", setAnn(annGuards, "items[].ifNewer"), "field items[].ifNewer", "guard field not found in item struct PutItem"},
		{"guard required", setAnn(annGuards, "items[].value"), "field items[].value", "must be optional"},
		{"response without mapEpoch", func(p *program) { resp(p).Fields[2].Name = "epoch" }, "field mapEpoch", "must carry mapEpoch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := minimalBatchProgram(t)
			tc.breakIt(p)
			_, err := generate(p, "minimal_batch.thrift", defaultZarisImport)
			require.Error(t, err)
			var se *specError
			require.ErrorAs(t, err, &se)
			for _, w := range []string{"operation MultiPut", tc.at, tc.why} {
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
