package runtime

import "github.com/apache/thrift/lib/go/thrift"

// Codec is an operation's Thrift binary protocol, generated for its types (zarisgen
// -codec-out, gen/zariscodec): the same bytes as the Thrift library's, written into and read
// out of the connection's buffers with no protocol call per field. The engine's pipelined
// and pooled connections use it for framed binary (the default): the call's arguments are
// appended to the request's buffer after the message header, and the reply's result is
// decoded from the body of its frame (with DecodeResultCopy from a buffer the connection
// keeps, else from a buffer of the reply's own). Other protocols and transports, custom
// Dialers' connections, and operations without one, go through Op.Invoke and the Thrift
// library.
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
