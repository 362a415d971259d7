// Package thriftbuf is the Thrift binary protocol over two in-memory buffers: a Protocol
// decodes a message held in memory and encodes one into memory, with the bytes and the
// bounds of thrift's binary protocol. It reads and writes a field with a few byte
// operations on its buffers, where the binary protocol over a transport makes several
// calls, an io.ReadFull and an error wrap per field; a message of many small fields (a
// batch's items) spends most of its encoding and decoding time there. The client's framed
// binary connections decode their replies (a reply's binaries sharing one allocation,
// ShareBinaries) and encode their requests with it; the reference store its framed binary
// calls and THeader clients' multi-key calls. Its tests hold it to thrift's binary protocol
// through a framed connection: TestMemFrames_DecodesAsTheBinaryProtocol and FuzzMemFrames
// (the same values, or an error where the binary protocol errs, with and without shared
// binaries), and TestMemFrames_EncodesAsTheBinaryProtocol (the same bytes).
package thriftbuf

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/apache/thrift/lib/go/thrift"
)

// Protocol is the binary protocol reading from an input buffer (filled by Fill) and
// writing to an output buffer (Bytes). Its methods not declared here (ReadByte, WriteByte,
// WriteI16, the message begin and end, ...) are a thrift binary protocol's over the same
// buffers. A Protocol is for one goroutine at a time.
type Protocol struct {
	thrift.TProtocol
	cfg  *thrift.TConfiguration
	bufs buffers

	share bool   // binaries are carved from slab (ShareBinaries)
	slab  []byte // what is left of the input's copy the binaries read are carved from
}

// New returns a Protocol with empty buffers; cfg bounds sizes and sets strictness as for
// thrift's binary protocol.
func New(cfg *thrift.TConfiguration) *Protocol {
	p := &Protocol{cfg: cfg}
	p.TProtocol = thrift.NewTBinaryProtocolConf(&p.bufs, cfg)
	return p
}

// ShareBinaries makes the binaries read from one input share an allocation: the first
// one read copies the rest of the input at once, and it and the binaries after it are
// carved from that copy, where each would otherwise be a copy of its own. A binary kept
// keeps the bytes of the binaries read after it alive. It is for a reader whose binaries
// live and die together, such as the values of one reply.
func (p *Protocol) ShareBinaries() { p.share = true }

// maxKept is the largest buffer a Protocol keeps across Reset.
const maxKept = 1 << 20

// Reset empties both buffers (dropping one that grew past 1 MiB) and sets the transport
// whose IsOpen Transport().IsOpen reports (nil: open).
func (p *Protocol) Reset(conn thrift.TTransport) {
	p.bufs.in, p.bufs.r = kept(p.bufs.in), 0
	p.bufs.Output = kept(p.bufs.Output)
	p.bufs.conn = conn
	p.slab = nil
}

// kept is b emptied, or nil if it grew past maxKept.
func kept(b []byte) []byte {
	if cap(b) > maxKept {
		return nil
	}
	return b[:0]
}

// ResetOutput empties the output buffer.
func (p *Protocol) ResetOutput() { p.bufs.Output = kept(p.bufs.Output) }

// Fill appends the next n bytes of r to the input buffer.
func (p *Protocol) Fill(r io.Reader, n int) error {
	p.slab = nil
	b := &p.bufs
	if b.r == len(b.in) {
		b.in, b.r = b.in[:0], 0
	}
	have := len(b.in)
	b.in = slices.Grow(b.in, n)[:have+n]
	if _, err := io.ReadFull(r, b.in[have:]); err != nil {
		b.in = b.in[:have]
		return err
	}
	return nil
}

// Bytes returns what was written since the output buffer was last emptied; it is valid
// until the next write or reset.
func (p *Protocol) Bytes() []byte { return p.bufs.Output }

// Unread returns the input not read yet, without reading it; it is valid until the input
// is next filled or reset.
func (p *Protocol) Unread() []byte { return p.bufs.in[p.bufs.r:] }

// Detach returns the input not read yet and gives it up: the Protocol reads nothing more of
// it, and the next Fill reads into a new buffer, so the bytes returned are the caller's to
// keep (a decode whose values are slices of them, as gen/zariscodec's).
func (p *Protocol) Detach() []byte {
	b := &p.bufs
	v := b.in[b.r:len(b.in):len(b.in)]
	b.in, b.r = nil, 0
	p.slab = nil
	return v
}

// AppendMessageBegin appends the header of a message, as the strict binary protocol writes
// it, to b.
func AppendMessageBegin(b []byte, name string, typeID thrift.TMessageType, seqID int32) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(thrift.VERSION_1)|uint32(typeID))
	b = append(binary.BigEndian.AppendUint32(b, uint32(len(name))), name...)
	return binary.BigEndian.AppendUint32(b, uint32(seqID))
}

// AppendCompactMessageBegin appends the header of a message, as the compact protocol writes
// it, to b.
func AppendCompactMessageBegin(b []byte, name string, typeID thrift.TMessageType, seqID int32) []byte {
	b = append(b, thrift.COMPACT_PROTOCOL_ID, thrift.COMPACT_VERSION|byte(typeID)<<thrift.COMPACT_TYPE_SHIFT_AMOUNT&thrift.COMPACT_TYPE_MASK)
	b = binary.AppendUvarint(b, uint64(uint32(seqID)))
	return append(binary.AppendUvarint(b, uint64(len(name))), name...)
}

// Transport returns the transport over the buffers.
func (p *Protocol) Transport() thrift.TTransport { return &p.bufs }

// next returns the input's next k bytes, or an error when fewer are left.
func (p *Protocol) next(k int) ([]byte, error) {
	b := &p.bufs
	if k < 0 || len(b.in)-b.r < k {
		b.r = len(b.in)
		return nil, thrift.NewTProtocolException(io.ErrUnexpectedEOF)
	}
	v := b.in[b.r : b.r+k]
	b.r += k
	return v, nil
}

func (p *Protocol) ReadStructBegin(context.Context) (string, error) { return "", nil }
func (p *Protocol) ReadStructEnd(context.Context) error             { return nil }
func (p *Protocol) ReadFieldEnd(context.Context) error              { return nil }
func (p *Protocol) ReadMapEnd(context.Context) error                { return nil }
func (p *Protocol) ReadListEnd(context.Context) error               { return nil }
func (p *Protocol) ReadSetEnd(context.Context) error                { return nil }

func (p *Protocol) ReadFieldBegin(ctx context.Context) (string, thrift.TType, int16, error) {
	b := &p.bufs
	if b.left() == 0 {
		return "", 0, 0, thrift.NewTProtocolException(io.EOF)
	}
	t := thrift.TType(b.in[b.r])
	b.r++
	if t == thrift.STOP {
		return "", thrift.STOP, 0, nil
	}
	id, err := p.ReadI16(ctx)
	return "", t, id, err
}

func (p *Protocol) ReadMapBegin(context.Context) (thrift.TType, thrift.TType, int, error) {
	b, err := p.next(6)
	if err != nil {
		return 0, 0, 0, err
	}
	k, v := thrift.TType(b[0]), thrift.TType(b[1])
	size, err := p.containerSize(int32(binary.BigEndian.Uint32(b[2:])), minSize(k)+minSize(v))
	return k, v, size, err
}

func (p *Protocol) ReadListBegin(context.Context) (thrift.TType, int, error) { return p.elems() }
func (p *Protocol) ReadSetBegin(context.Context) (thrift.TType, int, error)  { return p.elems() }

// elems reads a list's or a set's element type and size.
func (p *Protocol) elems() (thrift.TType, int, error) {
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
// than the input has bytes left.
func (p *Protocol) containerSize(size int32, elem int) (int, error) {
	switch {
	case size < 0:
		return 0, thrift.NewTProtocolExceptionWithType(thrift.NEGATIVE_SIZE, fmt.Errorf("negative size: %d", size))
	case size > p.cfg.GetMaxContainerSize():
		return 0, thrift.NewTProtocolExceptionWithType(thrift.SIZE_LIMIT,
			fmt.Errorf("container of %d elements exceeds the limit of %d", size, p.cfg.GetMaxContainerSize()))
	case int64(size)*int64(elem) > int64(p.bufs.left()):
		return 0, thrift.NewTProtocolExceptionWithType(thrift.SIZE_LIMIT,
			fmt.Errorf("container of %d elements exceeds the %d bytes left", size, p.bufs.left()))
	}
	return int(size), nil
}

// minSize is the fewest bytes the binary protocol counts for a value of type t when it
// checks a container's size against the bytes left: a list or a set counts four (its
// size), as thrift's binary protocol counts it, although it takes five, since the generated
// code reads an element as the type it declares, whatever type the header names.
func minSize(t thrift.TType) int {
	switch t {
	case thrift.I16:
		return 2
	case thrift.I32, thrift.STRING, thrift.MAP, thrift.LIST, thrift.SET:
		return 4
	case thrift.I64, thrift.DOUBLE:
		return 8
	case thrift.UUID:
		return 16
	}
	return 1 // bool, byte, struct (its stop byte)
}

func (p *Protocol) ReadBool(context.Context) (bool, error) {
	b, err := p.next(1)
	if err != nil {
		return false, err
	}
	return b[0] == 1, nil
}

func (p *Protocol) ReadI16(context.Context) (int16, error) {
	b, err := p.next(2)
	if err != nil {
		return 0, err
	}
	return int16(binary.BigEndian.Uint16(b)), nil
}

func (p *Protocol) ReadI32(context.Context) (int32, error) {
	b, err := p.next(4)
	if err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(b)), nil
}

func (p *Protocol) ReadI64(context.Context) (int64, error) {
	b, err := p.next(8)
	if err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

func (p *Protocol) ReadDouble(context.Context) (float64, error) {
	b, err := p.next(8)
	if err != nil {
		return 0, err
	}
	return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
}

// sized reads a string's or a binary's length and returns its bytes, still in the input.
func (p *Protocol) sized(ctx context.Context) ([]byte, error) {
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

func (p *Protocol) ReadString(ctx context.Context) (string, error) {
	b, err := p.sized(ctx)
	return string(b), err
}

// ReadBinary returns a copy, since the input buffer is reused: one of its own, or one
// carved from the input's copy (ShareBinaries).
func (p *Protocol) ReadBinary(ctx context.Context) ([]byte, error) {
	b, err := p.sized(ctx)
	if err != nil {
		return nil, err
	}
	if !p.share || len(b) == 0 {
		return append([]byte{}, b...), nil
	}
	if len(p.slab) < len(b) {
		// The rest of the input holds every binary still to be read.
		p.slab = make([]byte, len(b)+p.bufs.left())
	}
	v := p.slab[:len(b):len(b)]
	copy(v, b)
	p.slab = p.slab[len(b):]
	return v, nil
}

func (p *Protocol) ReadUUID(context.Context) (thrift.Tuuid, error) {
	var u thrift.Tuuid
	b, err := p.next(16)
	if err == nil {
		copy(u[:], b)
	}
	return u, err
}

func (p *Protocol) Skip(ctx context.Context, t thrift.TType) error {
	return thrift.SkipDefaultDepth(ctx, p, t)
}

func (p *Protocol) WriteStructBegin(context.Context, string) error { return nil }
func (p *Protocol) WriteStructEnd(context.Context) error           { return nil }
func (p *Protocol) WriteFieldEnd(context.Context) error            { return nil }
func (p *Protocol) WriteListEnd(context.Context) error             { return nil }

func (p *Protocol) WriteFieldBegin(_ context.Context, _ string, typeID thrift.TType, id int16) error {
	p.bufs.Output = append(p.bufs.Output, byte(typeID), byte(uint16(id)>>8), byte(id))
	return nil
}

func (p *Protocol) WriteFieldStop(context.Context) error {
	p.bufs.Output = append(p.bufs.Output, byte(thrift.STOP))
	return nil
}

func (p *Protocol) WriteListBegin(_ context.Context, elemType thrift.TType, size int) error {
	p.bufs.Output = binary.BigEndian.AppendUint32(append(p.bufs.Output, byte(elemType)), uint32(int32(size)))
	return nil
}

func (p *Protocol) WriteI32(_ context.Context, v int32) error {
	p.bufs.Output = binary.BigEndian.AppendUint32(p.bufs.Output, uint32(v))
	return nil
}

func (p *Protocol) WriteI64(_ context.Context, v int64) error {
	p.bufs.Output = binary.BigEndian.AppendUint64(p.bufs.Output, uint64(v))
	return nil
}

func (p *Protocol) WriteBinary(_ context.Context, v []byte) error {
	p.bufs.Output = append(binary.BigEndian.AppendUint32(p.bufs.Output, uint32(len(v))), v...)
	return nil
}

func (p *Protocol) WriteString(_ context.Context, v string) error {
	p.bufs.Output = append(binary.BigEndian.AppendUint32(p.bufs.Output, uint32(len(v))), v...)
	return nil
}

// buffers is a Thrift transport reading from in and writing to out. Reading past the end
// of in is a transport error (end of file), as reading past a frame is on a connection.
type buffers struct {
	in []byte // in[r:] is not read yet
	r  int
	Output
	conn thrift.TTransport // IsOpen asks it; nil: open
}

// left is how many input bytes are not read yet.
func (b *buffers) left() int { return len(b.in) - b.r }

func (b *buffers) Read(p []byte) (int, error) {
	if b.left() == 0 {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, thrift.NewTTransportExceptionFromError(io.EOF)
	}
	n := copy(p, b.in[b.r:])
	b.r += n
	return n, nil
}

func (b *buffers) ReadByte() (byte, error) {
	if b.left() == 0 {
		return 0, thrift.NewTTransportExceptionFromError(io.EOF)
	}
	b.r++
	return b.in[b.r-1], nil
}

func (b *buffers) Flush(context.Context) error { return nil }
func (b *buffers) RemainingBytes() uint64      { return uint64(b.left()) }
func (b *buffers) Open() error                 { return nil }
func (b *buffers) Close() error                { return nil }
func (b *buffers) IsOpen() bool                { return b.conn == nil || b.conn.IsOpen() }

// Output is the write side of a Thrift transport in memory: each write appends to it. It is
// the output of a Protocol, and the store's framed transport builds each reply in one.
type Output []byte

func (o *Output) Write(p []byte) (int, error) {
	*o = append(*o, p...)
	return len(p), nil
}

func (o *Output) WriteByte(c byte) error {
	*o = append(*o, c)
	return nil
}

func (o *Output) WriteString(s string) (int, error) {
	*o = append(*o, s...)
	return len(s), nil
}
