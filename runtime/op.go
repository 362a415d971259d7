package runtime

import "context"

// OpKind says whether an operation reads or writes the store.
type OpKind int

const (
	// Read marks an operation that only reads a key.
	Read OpKind = iota + 1
	// Write marks an operation that changes a key.
	Write
)

// String returns "read" or "write", the IDL annotation value.
func (k OpKind) String() string {
	switch k {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return "unknown"
}

// Op describes one data operation of a generated service. zarisgen generates one per
// operation from the IDL annotations (gen/zarisclient), so middleware can decide by what an
// operation is (read or write, idempotent or not) rather than by its name.
type Op struct {
	// Service is the name of the service the operation belongs to, for example "ZarisKv"
	// (for telemetry; empty for an operation of no declared service).
	Service string
	// Name is the operation's name in the IDL, for example "Put".
	Name string
	// Kind says whether the operation reads or writes.
	Kind OpKind
	// Idempotent reports whether replaying a request that may already have been applied is
	// harmless. A non-idempotent call whose request was sent but got no reply is returned
	// as in-doubt instead of being replayed (rule B2).
	Idempotent bool
	// RoutingField is the IDL name of the request field whose bytes choose the segment.
	RoutingField string
	// Guards are the IDL names of the request fields that make a replay come back Conflict
	// instead of applying twice (rule R9).
	Guards []string
	// TokenField is the IDL name of the request field that carries the call's request
	// token (zaris.dedup), or empty when the operation has none. The typed client sets it
	// once per call (Call.Token) when the request carries none; a store that advertises a
	// dedup window answers a replay of it with the first outcome (rule B8).
	TokenField string
	// Statuses is the class table of the service's status enum, which the middleware
	// classifies this operation's answers by (rules R1, R2, R5, R8).
	Statuses *StatusTable
	// Status reads the status (field 1) of a response of this operation.
	Status func(resp Response) Status
	// Invoke sends req, which must be this operation's request type, over client, the
	// generated client Service.NewClient bound to a connection (Conn.Client), and returns
	// its response. It never returns a nil Response with a nil error.
	Invoke func(ctx context.Context, client any, req any) (Response, error)
	// Codec, when set, is the operation's generated binary protocol, which the engine's
	// framed binary connections (pipelined, and pooled ones of the built-in Dialer) send
	// the request and read the reply with instead of Invoke; nil: Invoke alone.
	Codec *Codec
	// CompactCodec is Codec for the compact protocol, on framed compact connections.
	CompactCodec *Codec
}

// String returns the operation's IDL name.
func (op *Op) String() string { return op.Name }

// Response is what every data operation's response struct has in common: the answering
// node's cluster-map epoch; its status, field 1, is read with the operation's Op.Status.
// The generated response types satisfy it.
type Response interface {
	GetMapEpoch() int64
}

// StatusName returns the IDL name of resp's status, for logs: op.Status read by
// op.Statuses.
func (op *Op) StatusName(resp Response) string {
	return op.Statuses.Name(int64(op.Status(resp)))
}
