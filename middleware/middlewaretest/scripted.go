package middlewaretest

import "github.com/clustron/zaris-go/runtime"

// Scripted returns a copy of op, a generated operation descriptor, whose Status also reads a
// scripted *Response, so calls of it can run against a Transport's script as well as against
// a generated client (ClientTransport). Use the copy for every call and ForOps of a test:
// middleware tells operations apart by pointer.
func Scripted(op *runtime.Op) *runtime.Op {
	scripted := *op
	status := op.Status
	scripted.Status = func(resp runtime.Response) runtime.Status {
		if r, ok := resp.(*Response); ok {
			return r.Status
		}
		return status(resp)
	}
	return &scripted
}
