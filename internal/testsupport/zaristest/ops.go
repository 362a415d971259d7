// Package zaristest is test support: it binds the generated Zaris service to the scripted
// fakes of middleware/middlewaretest. Its operations are the generated ones made Scripted,
// and its calls build the generated requests. Tests of the engine use it; the engine never
// imports it.
package zaristest

import (
	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
)

// The generated operations, Scripted: each also reads the status of a scripted
// middlewaretest.Response.
var (
	OpGet       = middlewaretest.Scripted(zarisclient.OpGet)
	OpPut       = middlewaretest.Scripted(zarisclient.OpPut)
	OpDelete    = middlewaretest.Scripted(zarisclient.OpDelete)
	OpIncrement = middlewaretest.Scripted(zarisclient.OpIncrement)
)

// StatusOf reads the status of a scripted middlewaretest.Response or of a generated
// response of any of the operations above.
func StatusOf(resp runtime.Response) runtime.Status {
	switch r := resp.(type) {
	case *middlewaretest.Response:
		return r.Status
	case interface{ GetStatus() zaris.KvStatus }:
		return runtime.Status(r.GetStatus())
	}
	return -1
}

// GetCall returns a call of OpGet for key.
func GetCall(key string, opts ...runtime.CallOption) *runtime.Call {
	return runtime.NewCall(OpGet, []byte(key), &zaris.GetRequest{Key: []byte(key)}, false, opts...)
}

// PutCall returns an unguarded call of OpPut writing value to key.
func PutCall(key, value string, opts ...runtime.CallOption) *runtime.Call {
	return runtime.NewCall(OpPut, []byte(key), &zaris.PutRequest{Key: []byte(key), Value: []byte(value)}, false, opts...)
}

// GuardedPutCall returns a call of OpPut writing value to key only if the key's version is
// version (ifMatchVersion), so a replay of it answers Conflict.
func GuardedPutCall(key, value string, version int64, opts ...runtime.CallOption) *runtime.Call {
	req := &zaris.PutRequest{Key: []byte(key), Value: []byte(value), IfMatchVersion: &version}
	return runtime.NewCall(OpPut, []byte(key), req, true, opts...)
}

// IncrementCall returns a call of OpIncrement adding delta to key.
func IncrementCall(key string, delta int64, opts ...runtime.CallOption) *runtime.Call {
	return runtime.NewCall(OpIncrement, []byte(key), &zaris.IncrementRequest{Key: []byte(key), Delta: delta}, false, opts...)
}
