package middlewaretest

import (
	"context"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
)

// Operation descriptors shaped like the generated ones (gen/zarisclient), from the IDL's
// annotations, so middleware tests do not depend on the generator.
var (
	// OpGet reads a key: idempotent.
	OpGet = &runtime.Op{Name: "Get", Kind: runtime.Read, Idempotent: true, RoutingField: "key", Statuses: zarisclient.Statuses, Status: StatusOf,
		Invoke: func(ctx context.Context, client any, req any) (runtime.Response, error) {
			kv := client.(zaris.ZarisKv)
			return response(kv.Get(ctx, req.(*zaris.GetRequest)))
		}}
	// OpPut writes a key: idempotent, guarded by ifMatchVersion and ifAbsent.
	OpPut = &runtime.Op{Name: "Put", Kind: runtime.Write, Idempotent: true, RoutingField: "key", Statuses: zarisclient.Statuses, Status: StatusOf,
		Guards: []string{"ifMatchVersion", "ifAbsent"},
		Invoke: func(ctx context.Context, client any, req any) (runtime.Response, error) {
			kv := client.(zaris.ZarisKv)
			return response(kv.Put(ctx, req.(*zaris.PutRequest)))
		}}
	// OpDelete deletes a key: idempotent, guarded by ifMatchVersion.
	OpDelete = &runtime.Op{Name: "Delete", Kind: runtime.Write, Idempotent: true, RoutingField: "key", Statuses: zarisclient.Statuses, Status: StatusOf,
		Guards: []string{"ifMatchVersion"},
		Invoke: func(ctx context.Context, client any, req any) (runtime.Response, error) {
			kv := client.(zaris.ZarisKv)
			return response(kv.Delete(ctx, req.(*zaris.DeleteRequest)))
		}}
	// OpIncrement adds to a counter: not idempotent, not guarded.
	OpIncrement = &runtime.Op{Name: "Increment", Kind: runtime.Write, Idempotent: false, RoutingField: "key", Statuses: zarisclient.Statuses, Status: StatusOf,
		Invoke: func(ctx context.Context, client any, req any) (runtime.Response, error) {
			kv := client.(zaris.ZarisKv)
			return response(kv.Increment(ctx, req.(*zaris.IncrementRequest)))
		}}
)

// StatusOf reads the status of a scripted *Response or of a generated response, for the
// ops above.
func StatusOf(resp runtime.Response) runtime.Status {
	switch r := resp.(type) {
	case *Response:
		return r.Status
	case interface{ GetStatus() zaris.KvStatus }:
		return runtime.Status(r.GetStatus())
	}
	return -1
}

// response turns a generated method's result into a Response without a typed nil.
func response[R runtime.Response](r R, err error) (runtime.Response, error) {
	if err != nil {
		return nil, err
	}
	return r, nil
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

// Items is a runtime.BatchItems of n items with key "k", for a multi-key call that never
// reaches a transport (a test of call-level middleware sets the call's Batch by hand).
type Items int

func (n Items) Len() int                      { return int(n) }
func (Items) Key(int) []byte                  { return []byte("k") }
func (Items) Invalid(int) bool                { return false }
func (Items) Guarded(int) bool                { return false }
func (Items) SubRequest([]int) any            { return nil }
func (Items) Response(int64) runtime.Response { return nil }
func (Items) Record(runtime.Response, []int) ([]runtime.Status, error) {
	return nil, nil
}
