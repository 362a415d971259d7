package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/apache/thrift/lib/go/thrift"
)

// memFrames is the binary protocol of a framed connection that encodes each request and
// decodes each reply's body in memory. Once a reply begins the framed transport holds the
// whole frame; memFrames takes the rest of it at once and decodes the generated code's
// reads from that buffer directly, and it encodes a request into a buffer handed to the
// transport in one write, instead of crossing the protocol's and the transport's layers
// for every field (several calls, an io.ReadFull and an error wrap per field read), which
// is most of the client's time for a batch's many items. The bytes are the binary
// protocol's, read with its bounds (TestMemFrames_DecodesAsTheBinaryProtocol,
// FuzzMemFrames, TestMemFrames_EncodesAsTheBinaryProtocol). A frame whose size the
// transport does not know is read through the connection's protocol. Methods not declared
// here (ReadByte, WriteByte, WriteI16, ...) go through a binary protocol over the same
// buffer.
type memFrames struct {
	// TProtocol is what the methods not declared here go through: conn, or within a body
	// bodyProto (its reads take the same bytes as the methods here).
	thrift.TProtocol
	conn      thrift.TProtocol  // the connection's binary protocol
	frame     thrift.TTransport // the framed transport under conn
	cfg       *thrift.TConfiguration
	body      bodyBuffer // the rest of the message being read, when inBody
	bodyProto *thrift.TBinaryProtocol
	inBody    bool
	out       bodyBuffer // the message being written, when outBody
	outProto  *thrift.TBinaryProtocol
	outBody   bool
	scratch   [8]byte
}

// newMemFrames wraps p, a binary protocol over a framed transport, as memFrames; cfg is the
// connection's configuration.
func newMemFrames(p thrift.TProtocol, cfg *thrift.TConfiguration) *memFrames {
	r := &memFrames{TProtocol: p, conn: p, frame: p.Transport(), cfg: cfg}
	r.bodyProto = thrift.NewTBinaryProtocolConf(&r.body, cfg)
	r.outProto = thrift.NewTBinaryProtocolConf(&r.out, cfg)
	return r
}

// maxKeptBody is the largest body buffer a connection keeps for the next reply.
const maxKeptBody = 1 << 20

func (p *memFrames) ReadMessageBegin(ctx context.Context) (string, thrift.TMessageType, int32, error) {
	p.TProtocol, p.inBody, p.outBody = p.conn, false, false
	name, typeID, seqID, err := p.conn.ReadMessageBegin(ctx)
	if err != nil {
		return name, typeID, seqID, err
	}
	n := p.frame.RemainingBytes()
	if n == 0 || n == thrift.UnknownRemainingBytes || n > uint64(p.cfg.GetMaxMessageSize()) {
		return name, typeID, seqID, nil
	}
	if p.body.Cap() > maxKeptBody {
		p.body.Buffer = bytes.Buffer{}
	}
	p.body.Reset()
	p.body.Grow(int(n))
	buf := p.body.AvailableBuffer()[:n]
	if _, err := io.ReadFull(p.frame, buf); err != nil {
		return name, typeID, seqID, thrift.NewTTransportExceptionFromError(err)
	}
	p.body.Write(buf)
	p.TProtocol, p.inBody = p.bodyProto, true
	return name, typeID, seqID, nil
}

func (p *memFrames) ReadMessageEnd(ctx context.Context) error {
	if !p.inBody {
		return p.conn.ReadMessageEnd(ctx)
	}
	p.TProtocol, p.inBody = p.conn, false
	return nil
}

// WriteMessageBegin starts a request, whatever became of the last reply: the request is
// encoded into a buffer (by the methods here, and by a binary protocol over the same
// buffer for the rest) and handed to the framed transport at WriteMessageEnd.
func (p *memFrames) WriteMessageBegin(ctx context.Context, name string, typeID thrift.TMessageType, seqID int32) error {
	p.inBody = false
	if p.out.Cap() > maxKeptBody {
		p.out.Buffer = bytes.Buffer{}
	}
	p.out.Reset()
	p.TProtocol, p.outBody = p.outProto, true
	return p.outProto.WriteMessageBegin(ctx, name, typeID, seqID)
}

// WriteMessageEnd hands the request to the framed transport; Flush sends it.
func (p *memFrames) WriteMessageEnd(ctx context.Context) error {
	if !p.outBody {
		return p.conn.WriteMessageEnd(ctx)
	}
	p.TProtocol, p.outBody = p.conn, false
	if _, err := p.frame.Write(p.out.Bytes()); err != nil {
		return thrift.NewTTransportExceptionFromError(err)
	}
	return nil
}

func (p *memFrames) WriteStructBegin(ctx context.Context, name string) error {
	if !p.outBody {
		return p.conn.WriteStructBegin(ctx, name)
	}
	return nil
}

func (p *memFrames) WriteStructEnd(ctx context.Context) error {
	if !p.outBody {
		return p.conn.WriteStructEnd(ctx)
	}
	return nil
}

func (p *memFrames) WriteFieldBegin(ctx context.Context, name string, typeID thrift.TType, id int16) error {
	if !p.outBody {
		return p.conn.WriteFieldBegin(ctx, name, typeID, id)
	}
	p.out.WriteByte(byte(typeID))
	p.out.Write(binary.BigEndian.AppendUint16(p.scratch[:0], uint16(id)))
	return nil
}

func (p *memFrames) WriteFieldEnd(ctx context.Context) error {
	if !p.outBody {
		return p.conn.WriteFieldEnd(ctx)
	}
	return nil
}

func (p *memFrames) WriteFieldStop(ctx context.Context) error {
	if !p.outBody {
		return p.conn.WriteFieldStop(ctx)
	}
	p.out.WriteByte(byte(thrift.STOP))
	return nil
}

func (p *memFrames) WriteListBegin(ctx context.Context, elemType thrift.TType, size int) error {
	if !p.outBody {
		return p.conn.WriteListBegin(ctx, elemType, size)
	}
	p.out.WriteByte(byte(elemType))
	p.out.Write(binary.BigEndian.AppendUint32(p.scratch[:0], uint32(int32(size))))
	return nil
}

func (p *memFrames) WriteListEnd(ctx context.Context) error {
	if !p.outBody {
		return p.conn.WriteListEnd(ctx)
	}
	return nil
}

func (p *memFrames) WriteI32(ctx context.Context, v int32) error {
	if !p.outBody {
		return p.conn.WriteI32(ctx, v)
	}
	p.out.Write(binary.BigEndian.AppendUint32(p.scratch[:0], uint32(v)))
	return nil
}

func (p *memFrames) WriteI64(ctx context.Context, v int64) error {
	if !p.outBody {
		return p.conn.WriteI64(ctx, v)
	}
	p.out.Write(binary.BigEndian.AppendUint64(p.scratch[:0], uint64(v)))
	return nil
}

func (p *memFrames) WriteBinary(ctx context.Context, v []byte) error {
	if !p.outBody {
		return p.conn.WriteBinary(ctx, v)
	}
	p.out.Write(binary.BigEndian.AppendUint32(p.scratch[:0], uint32(len(v))))
	p.out.Write(v)
	return nil
}

func (p *memFrames) WriteString(ctx context.Context, v string) error {
	if !p.outBody {
		return p.conn.WriteString(ctx, v)
	}
	p.out.Write(binary.BigEndian.AppendUint32(p.scratch[:0], uint32(len(v))))
	p.out.WriteString(v)
	return nil
}

func (p *memFrames) Flush(ctx context.Context) error { return p.conn.Flush(ctx) }

func (p *memFrames) Transport() thrift.TTransport { return p.frame }

// next returns the body's next k bytes, or an error when fewer are left.
func (p *memFrames) next(k int) ([]byte, error) {
	if k < 0 || p.body.Len() < k {
		p.body.Reset()
		return nil, thrift.NewTProtocolException(io.ErrUnexpectedEOF)
	}
	return p.body.Next(k), nil
}

func (p *memFrames) ReadStructBegin(ctx context.Context) (string, error) {
	if !p.inBody {
		return p.conn.ReadStructBegin(ctx)
	}
	return "", nil
}

func (p *memFrames) ReadStructEnd(ctx context.Context) error {
	if !p.inBody {
		return p.conn.ReadStructEnd(ctx)
	}
	return nil
}

func (p *memFrames) ReadFieldBegin(ctx context.Context) (string, thrift.TType, int16, error) {
	if !p.inBody {
		return p.conn.ReadFieldBegin(ctx)
	}
	t, err := p.body.ReadByte()
	if err != nil {
		return "", 0, 0, thrift.NewTProtocolException(err)
	}
	if thrift.TType(t) == thrift.STOP {
		return "", thrift.STOP, 0, nil
	}
	id, err := p.ReadI16(ctx)
	return "", thrift.TType(t), id, err
}

func (p *memFrames) ReadFieldEnd(ctx context.Context) error {
	if !p.inBody {
		return p.conn.ReadFieldEnd(ctx)
	}
	return nil
}

func (p *memFrames) ReadMapBegin(ctx context.Context) (thrift.TType, thrift.TType, int, error) {
	if !p.inBody {
		return p.conn.ReadMapBegin(ctx)
	}
	b, err := p.next(6)
	if err != nil {
		return 0, 0, 0, err
	}
	k, v := thrift.TType(b[0]), thrift.TType(b[1])
	size, err := p.containerSize(int32(binary.BigEndian.Uint32(b[2:])), minSize(k)+minSize(v))
	return k, v, size, err
}

func (p *memFrames) ReadMapEnd(ctx context.Context) error {
	if !p.inBody {
		return p.conn.ReadMapEnd(ctx)
	}
	return nil
}

func (p *memFrames) ReadListBegin(ctx context.Context) (thrift.TType, int, error) {
	if !p.inBody {
		return p.conn.ReadListBegin(ctx)
	}
	return p.elems()
}

func (p *memFrames) ReadListEnd(ctx context.Context) error {
	if !p.inBody {
		return p.conn.ReadListEnd(ctx)
	}
	return nil
}

func (p *memFrames) ReadSetBegin(ctx context.Context) (thrift.TType, int, error) {
	if !p.inBody {
		return p.conn.ReadSetBegin(ctx)
	}
	return p.elems()
}

func (p *memFrames) ReadSetEnd(ctx context.Context) error {
	if !p.inBody {
		return p.conn.ReadSetEnd(ctx)
	}
	return nil
}

// elems reads a list's or a set's element type and size.
func (p *memFrames) elems() (thrift.TType, int, error) {
	b, err := p.next(5)
	if err != nil {
		return 0, 0, err
	}
	t := thrift.TType(b[0])
	size, err := p.containerSize(int32(binary.BigEndian.Uint32(b[1:])), minSize(t))
	return t, size, err
}

// containerSize checks a container's size as the binary protocol does: not negative,
// within the configuration's limit, and not more elements of at least elem bytes each
// than the body has bytes left.
func (p *memFrames) containerSize(size int32, elem int) (int, error) {
	switch {
	case size < 0:
		return 0, thrift.NewTProtocolExceptionWithType(thrift.NEGATIVE_SIZE, fmt.Errorf("negative size: %d", size))
	case size > p.cfg.GetMaxContainerSize():
		return 0, thrift.NewTProtocolExceptionWithType(thrift.SIZE_LIMIT,
			fmt.Errorf("container of %d elements exceeds the limit of %d", size, p.cfg.GetMaxContainerSize()))
	case int64(size)*int64(elem) > int64(p.body.Len()):
		return 0, thrift.NewTProtocolExceptionWithType(thrift.SIZE_LIMIT,
			fmt.Errorf("container of %d elements exceeds the %d bytes left", size, p.body.Len()))
	}
	return int(size), nil
}

// minSize is the fewest bytes the binary protocol encodes a value of type t in.
func minSize(t thrift.TType) int {
	switch t {
	case thrift.I16:
		return 2
	case thrift.I32, thrift.STRING, thrift.MAP:
		return 4
	case thrift.I64, thrift.DOUBLE:
		return 8
	case thrift.LIST, thrift.SET:
		return 5
	case thrift.UUID:
		return 16
	}
	return 1 // bool, byte, struct (its stop byte)
}

func (p *memFrames) ReadBool(ctx context.Context) (bool, error) {
	if !p.inBody {
		return p.conn.ReadBool(ctx)
	}
	b, err := p.next(1)
	if err != nil {
		return false, err
	}
	return b[0] == 1, nil
}

func (p *memFrames) ReadI16(ctx context.Context) (int16, error) {
	if !p.inBody {
		return p.conn.ReadI16(ctx)
	}
	b, err := p.next(2)
	if err != nil {
		return 0, err
	}
	return int16(binary.BigEndian.Uint16(b)), nil
}

func (p *memFrames) ReadI32(ctx context.Context) (int32, error) {
	if !p.inBody {
		return p.conn.ReadI32(ctx)
	}
	b, err := p.next(4)
	if err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(b)), nil
}

func (p *memFrames) ReadI64(ctx context.Context) (int64, error) {
	if !p.inBody {
		return p.conn.ReadI64(ctx)
	}
	b, err := p.next(8)
	if err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

func (p *memFrames) ReadDouble(ctx context.Context) (float64, error) {
	if !p.inBody {
		return p.conn.ReadDouble(ctx)
	}
	b, err := p.next(8)
	if err != nil {
		return 0, err
	}
	return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
}

// sized reads a string's or a binary's length and returns its bytes, still in the body.
func (p *memFrames) sized(ctx context.Context) ([]byte, error) {
	size, err := p.ReadI32(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case size < 0:
		return nil, thrift.NewTProtocolExceptionWithType(thrift.NEGATIVE_SIZE, fmt.Errorf("negative size: %d", size))
	case size > p.cfg.GetMaxMessageSize():
		return nil, thrift.NewTProtocolExceptionWithType(thrift.SIZE_LIMIT, fmt.Errorf("size exceeded max allowed: %d", size))
	}
	return p.next(int(size))
}

func (p *memFrames) ReadString(ctx context.Context) (string, error) {
	if !p.inBody {
		return p.conn.ReadString(ctx)
	}
	b, err := p.sized(ctx)
	return string(b), err
}

func (p *memFrames) ReadBinary(ctx context.Context) ([]byte, error) {
	if !p.inBody {
		return p.conn.ReadBinary(ctx)
	}
	b, err := p.sized(ctx)
	if err != nil {
		return nil, err
	}
	return append([]byte{}, b...), nil // a copy: the buffer holds the next reply later
}

func (p *memFrames) ReadUUID(ctx context.Context) (thrift.Tuuid, error) {
	if !p.inBody {
		return p.conn.ReadUUID(ctx)
	}
	var u thrift.Tuuid
	b, err := p.next(16)
	if err == nil {
		copy(u[:], b)
	}
	return u, err
}

func (p *memFrames) Skip(ctx context.Context, t thrift.TType) error {
	if !p.inBody {
		return p.conn.Skip(ctx, t)
	}
	return thrift.SkipDefaultDepth(ctx, p, t)
}

// bodyBuffer is a Thrift transport over a buffer holding one message body.
type bodyBuffer struct{ bytes.Buffer }

func (b *bodyBuffer) IsOpen() bool                { return true }
func (b *bodyBuffer) Open() error                 { return nil }
func (b *bodyBuffer) Close() error                { return nil }
func (b *bodyBuffer) Flush(context.Context) error { return nil }
func (b *bodyBuffer) RemainingBytes() uint64      { return uint64(b.Len()) }
