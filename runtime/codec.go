package runtime

import (
	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// Codec is an operation's Thrift protocol, binary (Op.Codec) or compact (Op.CompactCodec),
// generated for its types (zarisgen -codec-out, gen/zariscodec): the same bytes as the Thrift
// library's, written into and read out of the connection's buffers with no protocol call
// per field. The engine's pipelined and pooled connections use it over the framed
// transport (binary is the default): the call's arguments are appended to the request's
// buffer after the message header, and the reply's result is decoded from the body of its
// frame (with DecodeResultCopy from a buffer the connection keeps, else from a buffer of
// the reply's own). JSON, THeader and the buffered transport, custom Dialers' connections,
// and operations without one, go through Op.Invoke and the Thrift library.
type Codec struct {
	// AppendArgs appends the operation's argument struct carrying req (the operation's
	// request type) to b, as the Thrift client writes it in a call message.
	AppendArgs func(b []byte, req any) []byte
	// DecodeResult decodes the operation's result struct, the body of a reply message, from
	// b within cfg's bounds. It returns the response, or a nil Response when the result
	// carries none, or an error for bytes that are no result (the connection is then
	// failed). The response's binaries may be slices of b: the engine hands it a buffer the
	// reply owns.
	DecodeResult func(b []byte, cfg *thrift.TConfiguration) (Response, error)
	// DecodeResultCopy, when set, is DecodeResult with the response's binaries copied out
	// of b, so that b may be reused once it returns: the engine then decodes the reply from
	// a buffer its connection keeps, and the response holds only the bytes of its binaries.
	DecodeResultCopy func(b []byte, cfg *thrift.TConfiguration) (Response, error)
}

// codecWire is the protocol a connection's calls use an operation's Codec in: none, or the
// binary or compact protocol over the framed transport.
type codecWire int

const (
	noCodec codecWire = iota
	binaryCodec
	compactCodec
)

// codecWireOf is the codecWire of a connection speaking p over t.
func codecWireOf(p Protocol, t Transport) codecWire {
	switch {
	case t != TransportFramed:
		return noCodec
	case p == ProtocolBinary:
		return binaryCodec
	case p == ProtocolCompact:
		return compactCodec
	}
	return noCodec
}

// of returns op's Codec in w's protocol, or nil when op has none or w is noCodec.
func (w codecWire) of(op *Op) *Codec {
	switch w {
	case binaryCodec:
		return op.Codec
	case compactCodec:
		return op.CompactCodec
	}
	return nil
}

// appendCall appends the message header of a call of op with sequence id seq, in w's
// protocol, to b.
func (w codecWire) appendCall(b []byte, op *Op, seq int32) []byte {
	if w == compactCodec {
		return thriftbuf.AppendCompactMessageBegin(b, op.Name, thrift.CALL, seq)
	}
	return thriftbuf.AppendMessageBegin(b, op.Name, thrift.CALL, seq)
}
