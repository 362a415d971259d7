package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// maxKeptReply is the largest reply buffer a pooled connection keeps for its next call.
const maxKeptReply = 64 << 10

// messageHeaderSize is the size of a strict binary message header without its name: the
// version and type, the name's length and the sequence id.
const messageHeaderSize = 12

// codecCall is Op.Invoke for an operation with a Codec, codec, on a pooled framed binary or
// compact connection (c.codec): the request's frame is encoded by codec into the
// connection's buffer and written in one write. A binary reply's frame is read from the
// socket's buffer, its header in place and its body into the connection's buffer; a compact
// reply's frame is read whole into the connection's buffer and its header read there with
// the Thrift library's compact protocol. codec.DecodeResultCopy decodes the response from
// that buffer, copying its binaries out (without DecodeResultCopy, the body goes into a
// buffer of the reply's own that DecodeResult decodes it from, its binaries slices of it).
// The outcomes are the generated client's over the Thrift library: the same bytes on the
// wire, a request over the map's message limit or the frame limit refused before any of
// it is written, the same application exceptions for a reply to another method or
// sequence id, an exception reply or a result without a response.
func (c *thriftConn) codecCall(op *Op, codec *Codec, req any) (Response, error) {
	if err := c.writeCodec(op, codec, req); err != nil {
		return nil, err
	}
	decode, kept := codec.DecodeResultCopy, true
	if decode == nil {
		decode, kept = codec.DecodeResult, false
	}
	var body []byte
	var err error
	if c.codec == compactCodec {
		body, err = c.readCompactReply(op, kept)
	} else {
		body, err = c.readReply(op, kept)
	}
	if err != nil {
		return nil, err
	}
	resp, err := decode(body, c.tcfg)
	if err != nil {
		return nil, err
	}
	if resp == nil {
		return nil, thrift.NewTApplicationException(thrift.MISSING_RESULT, op.Name+" failed: unknown result")
	}
	return resp, nil
}

// writeCodec encodes req's call message with codec, framed, into c.wire and writes it.
func (c *thriftConn) writeCodec(op *Op, codec *Codec, req any) error {
	c.seq++
	b := append(c.wire[:0], 0, 0, 0, 0) // the frame's size, set once the message is encoded
	b = c.codec.appendCall(b, op, c.seq)
	b = codec.AppendArgs(b, req)
	c.wire = b
	if cap(b) > maxKeptRequest {
		c.wire = nil
	}
	size := len(b) - 4
	if err := thriftbuf.OverLimit(c.limit, size); err != nil {
		return err
	}
	if int64(size) > int64(c.tcfg.GetMaxFrameSize()) {
		return thrift.NewTProtocolExceptionWithType(thrift.SIZE_LIMIT, fmt.Errorf("frame too large: %d bytes", size))
	}
	binary.BigEndian.PutUint32(b, uint32(size))
	// The socket's write buffer is empty between calls: the frame goes out in one write.
	_, err := sockWriter{c.sock}.Write(b)
	return wrapTransport(err)
}

// readReply reads the frame of the reply to op's call, which c.writeCodec sent, and returns
// its body: in the connection's buffer c.body when kept, valid until the next call, else in
// a buffer of its own (nil when empty). A reply other than op's result fails as the Thrift
// client fails it.
func (c *thriftConn) readReply(op *Op, kept bool) ([]byte, error) {
	r := c.sock.r
	size, err := c.frameSize()
	if err != nil {
		return nil, err
	}
	// The header, up to the name of op's length: no byte past the frame is waited for.
	p, err := r.Peek(4 + int(min(size, uint32(messageHeaderSize+len(op.Name)))))
	if err != nil {
		return nil, wrapTransport(err)
	}
	typeID, nameLen, err := c.checkReplyHeader(p[4:], size, op)
	if err != nil {
		return nil, err
	}
	r.Discard(4 + messageHeaderSize + int(nameLen)) // peeked: cannot fail
	var body []byte
	if n := int(size) - messageHeaderSize - int(nameLen); n > 0 {
		if kept {
			body = slices.Grow(c.body[:0], n)[:n]
			c.body = body
			if cap(body) > maxKeptReply {
				c.body = nil
			}
		} else {
			body = make([]byte, n)
		}
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, wrapTransport(err)
		}
	}
	if typeID == thrift.EXCEPTION {
		return nil, c.readException(body)
	}
	return body, nil
}

// frameSize peeks at the size of the next frame, which the framed transport refuses past
// the frame limit.
func (c *thriftConn) frameSize() (uint32, error) {
	p, err := c.sock.r.Peek(4)
	if err != nil {
		return 0, wrapTransport(err)
	}
	size := binary.BigEndian.Uint32(p)
	if size > uint32(c.tcfg.GetMaxFrameSize()) {
		return 0, thrift.NewTTransportException(thrift.UNKNOWN_TRANSPORT_EXCEPTION, fmt.Sprintf("Incorrect frame size (%d)", size))
	}
	return size, nil
}

// readCompactReply is readReply for the compact protocol: the reply's frame is read whole
// into c.reply, its header with the Thrift library's compact protocol; the body returned
// is the rest of the frame, in c.reply when kept, valid until the next call, else taken
// from it.
func (c *thriftConn) readCompactReply(op *Op, kept bool) ([]byte, error) {
	r := c.sock.r
	size, err := c.frameSize()
	if err != nil {
		return nil, err
	}
	r.Discard(4) // peeked: cannot fail
	if c.reply == nil {
		c.reply = thriftbuf.New(c.tcfg)
		c.replyHeader = thrift.NewTCompactProtocolConf(c.reply.Transport(), c.tcfg)
	}
	c.reply.Reset(nil)
	if err := c.reply.Fill(r, int(size)); err != nil {
		return nil, wrapTransport(err)
	}
	ctx := context.Background()
	name, typeID, seq, err := c.replyHeader.ReadMessageBegin(ctx)
	switch {
	case err != nil:
		return nil, err
	case name != op.Name:
		return nil, thrift.NewTApplicationException(thrift.WRONG_METHOD_NAME, op.Name+": wrong method name")
	case seq != c.seq:
		return nil, thrift.NewTApplicationException(thrift.BAD_SEQUENCE_ID, op.Name+": out of order sequence response")
	case typeID == thrift.EXCEPTION:
		exc := thrift.NewTApplicationException(thrift.UNKNOWN_APPLICATION_EXCEPTION, "Unknown Exception")
		if err := exc.Read(ctx, c.replyHeader); err != nil {
			return nil, err
		}
		return nil, exc
	case typeID != thrift.REPLY:
		return nil, thrift.NewTApplicationException(thrift.INVALID_MESSAGE_TYPE_EXCEPTION, op.Name+": invalid message type")
	case kept:
		return c.reply.Unread(), nil
	}
	return c.reply.Detach(), nil
}

// checkReplyHeader reads the message header at the start of p, the first bytes of a reply
// frame of size bytes, and returns its type and the length of its name; a header other
// than that of a reply to op's call with c.seq fails as the Thrift client fails it.
func (c *thriftConn) checkReplyHeader(p []byte, size uint32, op *Op) (thrift.TMessageType, int32, error) {
	if len(p) < 8 {
		return 0, 0, thrift.NewTProtocolException(io.ErrUnexpectedEOF)
	}
	word := int32(binary.BigEndian.Uint32(p))
	switch {
	case word >= 0:
		return 0, 0, thrift.NewTProtocolExceptionWithType(thrift.BAD_VERSION, errMissingVersion)
	case int64(word)&thrift.VERSION_MASK != thrift.VERSION_1:
		return 0, 0, thrift.NewTProtocolExceptionWithType(thrift.BAD_VERSION, errBadVersion)
	}
	typeID := thrift.TMessageType(word & 0xff)
	nameLen := int32(binary.BigEndian.Uint32(p[4:]))
	switch {
	case nameLen < 0:
		return 0, 0, thrift.NewTProtocolExceptionWithType(thrift.NEGATIVE_SIZE, fmt.Errorf("negative size: %d", nameLen))
	case int64(nameLen)+messageHeaderSize > int64(size):
		return 0, 0, thrift.NewTProtocolException(io.ErrUnexpectedEOF)
	case int(nameLen) != len(op.Name) || string(p[8:8+nameLen]) != op.Name:
		return 0, 0, thrift.NewTApplicationException(thrift.WRONG_METHOD_NAME, op.Name+": wrong method name")
	}
	if seq := int32(binary.BigEndian.Uint32(p[8+nameLen:])); seq != c.seq {
		return 0, 0, thrift.NewTApplicationException(thrift.BAD_SEQUENCE_ID, op.Name+": out of order sequence response")
	}
	if typeID != thrift.REPLY && typeID != thrift.EXCEPTION {
		return 0, 0, thrift.NewTApplicationException(thrift.INVALID_MESSAGE_TYPE_EXCEPTION, op.Name+": invalid message type")
	}
	return typeID, nameLen, nil
}

// readException decodes the application exception an exception reply's body carries.
func (c *thriftConn) readException(body []byte) error {
	in := thriftbuf.New(c.tcfg)
	if err := in.Fill(bytes.NewReader(body), len(body)); err != nil {
		return thrift.NewTProtocolException(err)
	}
	exc := thrift.NewTApplicationException(thrift.UNKNOWN_APPLICATION_EXCEPTION, "Unknown Exception")
	if err := exc.Read(context.Background(), in); err != nil {
		return err
	}
	return exc
}
