package proof

import (
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
)

// op builds a history entry of client 0.
func op(call, ret int64, in kvInput, out kvOutput) porcupine.Operation {
	return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
}

func put(v string) kvInput { return kvInput{kind: opPut, key: "k", value: v} }
func casPut(v string, match int64) kvInput {
	return kvInput{kind: opPut, key: "k", value: v, hasMatch: true, ifMatch: match}
}
func get() kvInput                      { return kvInput{kind: opGet, key: "k"} }
func del() kvInput                      { return kvInput{kind: opDelete, key: "k"} }
func incr(d int64) kvInput              { return kvInput{kind: opIncrement, key: "k", delta: d} }
func ok(v int64) kvOutput               { return kvOutput{out: outOk, version: v} }
func read(val string, v int64) kvOutput { return kvOutput{out: outOk, value: val, version: v} }
func conflict(v int64) kvOutput         { return kvOutput{out: outConflict, version: v} }

var (
	notFound = kvOutput{out: outNotFound}
	unknown  = kvOutput{out: outUnknown}
)

// The model itself is checked on small hand-written histories, linearizable or not.
func TestModel(t *testing.T) {
	tests := []struct {
		name string
		ops  []porcupine.Operation
		want bool
	}{
		{"read your write", []porcupine.Operation{
			op(0, 1, put("1"), ok(5)), op(2, 3, get(), read("1", 5)),
		}, true},
		{"a read after a write misses it", []porcupine.Operation{
			op(0, 1, put("1"), ok(5)), op(2, 3, get(), notFound),
		}, false},
		{"a concurrent read may miss it", []porcupine.Operation{
			op(0, 3, put("1"), ok(5)), op(1, 2, get(), notFound),
		}, true},
		{"versions only grow", []porcupine.Operation{
			op(0, 1, put("1"), ok(5)), op(2, 3, put("2"), ok(5)),
		}, false},
		{"versions need not grow by one", []porcupine.Operation{
			op(0, 1, put("1"), ok(5)), op(2, 3, put("2"), ok(9)), op(4, 5, get(), read("2", 9)),
		}, true},
		{"a read sees the version of the value", []porcupine.Operation{
			op(0, 1, put("1"), ok(5)), op(2, 3, get(), read("1", 6)),
		}, false},
		{"a guarded put on the current version applies", []porcupine.Operation{
			op(0, 1, put("1"), ok(5)), op(2, 3, casPut("2", 5), ok(7)), op(4, 5, get(), read("2", 7)),
		}, true},
		{"a guarded put on an old version conflicts with the current one", []porcupine.Operation{
			op(0, 1, put("1"), ok(5)), op(2, 3, put("2"), ok(6)), op(4, 5, casPut("3", 5), conflict(6)),
		}, true},
		{"a guarded put on the current version does not conflict", []porcupine.Operation{
			op(0, 1, put("1"), ok(5)), op(2, 3, casPut("2", 5), conflict(5)),
		}, false},
		{"a replayed guarded put: its lost first attempt applied, the replay conflicts", []porcupine.Operation{
			op(0, 1, put("1"), ok(5)), op(2, 10, casPut("2", 5), unknown), op(2, 3, casPut("2", 5), conflict(8)),
			op(4, 5, get(), read("2", 8)),
		}, true},
		{"a possibly-applied put may apply late", []porcupine.Operation{
			op(0, 10, put("1"), unknown), op(1, 2, get(), notFound), op(3, 4, get(), read("1", 3)),
		}, true},
		{"a possibly-applied put cannot apply twice", []porcupine.Operation{
			op(0, 10, put("1"), unknown), op(1, 2, get(), read("1", 3)), op(3, 4, put("2"), ok(4)),
			op(5, 6, get(), read("1", 5)),
		}, false},
		{"a possibly-applied put cannot apply before it was invoked", []porcupine.Operation{
			op(0, 1, get(), read("1", 3)), op(2, 10, put("1"), unknown),
		}, false},
		{"increments add up", []porcupine.Operation{
			op(0, 1, incr(2), kvOutput{out: outOk, sum: 2, version: 1}),
			op(2, 3, incr(3), kvOutput{out: outOk, sum: 5, version: 2}),
			op(4, 5, get(), read("5", 2)),
		}, true},
		{"an increment lost", []porcupine.Operation{
			op(0, 1, incr(2), kvOutput{out: outOk, sum: 2, version: 1}),
			op(2, 3, incr(3), kvOutput{out: outOk, sum: 3, version: 2}),
		}, false},
		{"an in-doubt increment may have applied", []porcupine.Operation{
			op(0, 10, incr(2), unknown),
			op(2, 3, incr(3), kvOutput{out: outOk, sum: 5, version: 2}),
		}, true},
		{"delete then read", []porcupine.Operation{
			op(0, 1, put("1"), ok(5)), op(2, 3, del(), ok(5)), op(4, 5, get(), notFound),
			op(6, 7, del(), notFound), op(8, 9, put("2"), ok(7)),
		}, true},
		{"a deleted key reappears", []porcupine.Operation{
			op(0, 1, put("1"), ok(5)), op(2, 3, del(), ok(5)), op(4, 5, get(), read("1", 5)),
		}, false},
		{"keys are independent", []porcupine.Operation{
			op(0, 1, put("1"), ok(5)), op(2, 3, kvInput{kind: opGet, key: "other"}, notFound),
		}, true},
	}
	model := kvModel.ToModel()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, porcupine.CheckOperations(model, tt.ops))
		})
	}
}
