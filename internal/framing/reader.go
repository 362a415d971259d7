// Package framing reads Thrift's framed transport the way its hot paths want: each frame
// whole into one buffer its connection keeps, from which the protocol reads its fields.
package framing

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/apache/thrift/lib/go/thrift"
)

// Reader is the reading half of Thrift's framed transport: each frame is read whole into one
// buffer the Reader keeps, and the protocol reads its fields from there. It reads what
// thrift.TFramedTransport reads, without a buffer from a shared pool and a deferred call on
// every read of a field. Its errors are thrift.TTransportExceptions. Writes fail: a writing
// transport embeds a Reader and adds its own.
type Reader struct {
	r        io.Reader // buffered
	maxFrame int32

	in   []byte // the frame being read
	off  int    // the bytes of in read so far
	size [4]byte

	budget Budget // nil: frames are bounded by maxFrame alone
	held   int    // the bytes of in's capacity taken from budget
}

// A Budget bounds the bytes of frame buffers that the Readers sharing it hold at once: a
// Reader takes the bytes before its buffer grows, as the frame's bytes arrive, and gives
// them back when it drops the buffer.
type Budget interface {
	// Reserve takes n bytes, waiting for them if need be; false refuses them, and the
	// frame fails.
	Reserve(n int) bool
	// Release gives back n bytes Reserve took.
	Release(n int)
}

// SetBudget makes the Reader take its buffer's bytes from b. Call it before the first read.
func (f *Reader) SetBudget(b Budget) { f.budget = b }

// Free drops the Reader's buffer and gives its bytes back to the budget. Call it when the
// connection ends.
func (f *Reader) Free() {
	f.in, f.off = nil, 0
	if f.budget != nil && f.held > 0 {
		f.budget.Release(f.held)
	}
	f.held = 0
}

// KeepBuffer is the largest buffer a Reader keeps from one frame to the next.
const KeepBuffer = 64 << 10

// NewReader reads frames from r, which should be buffered, refusing any larger than maxFrame.
func NewReader(r io.Reader, maxFrame int32) *Reader {
	return &Reader{r: r, maxFrame: maxFrame}
}

func (f *Reader) Open() error                 { return nil }
func (f *Reader) IsOpen() bool                { return true }
func (f *Reader) Close() error                { return nil }
func (f *Reader) Flush(context.Context) error { return nil }

// Write fails: a Reader only reads.
func (f *Reader) Write([]byte) (int, error) {
	return 0, thrift.NewTTransportException(thrift.NOT_OPEN, "framing: a Reader does not write")
}

// Unread returns what is left of the frame being read, without reading it; the bytes are
// valid until the next read.
func (f *Reader) Unread() []byte { return f.in[f.off:] }

// Discard reads past the next n bytes of the frame being read, n at most what Unread
// returns.
func (f *Reader) Discard(n int) { f.off += n }

// RemainingBytes returns what is left of the frame being read.
func (f *Reader) RemainingBytes() uint64 { return uint64(len(f.in) - f.off) }

func (f *Reader) Read(p []byte) (int, error) {
	for f.off == len(f.in) {
		if err := f.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, f.in[f.off:])
	f.off += n
	return n, nil
}

func (f *Reader) ReadByte() (byte, error) {
	for f.off == len(f.in) {
		if err := f.next(); err != nil {
			return 0, err
		}
	}
	b := f.in[f.off]
	f.off++
	return b, nil
}

// FrameTooLargeError is the cause of the transport exception Reader returns for a frame
// whose length is over its limit: the length the peer claimed and the limit. Find it with
// errors.As; the frame's bytes were not read.
type FrameTooLargeError struct {
	Size uint32
	Max  int32
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("Incorrect frame size (%d): over the limit of %d bytes", e.Size, e.Max)
}

// next reads the next frame, refusing one larger than maxFrame as TFramedTransport does.
// The buffer grows only as the frame's bytes arrive, not by the size the peer claims, and,
// with a budget, only by bytes the budget gave. A buffer larger than KeepBuffer is dropped
// before the next frame's size is waited for, so an idle connection holds little.
func (f *Reader) next() error {
	if cap(f.in) > KeepBuffer {
		f.Free()
	}
	if _, err := io.ReadFull(f.r, f.size[:]); err != nil {
		return thrift.NewTTransportExceptionFromError(err)
	}
	size := int(binary.BigEndian.Uint32(f.size[:]))
	if size > int(f.maxFrame) || size < 0 {
		return thrift.NewTTransportExceptionFromError(&FrameTooLargeError{Size: uint32(size), Max: f.maxFrame})
	}
	in := f.in[:0]
	for len(in) < size {
		if len(in) == cap(in) {
			grow := min(size-len(in), max(len(in), 512))
			if f.budget != nil {
				if !f.budget.Reserve(grow) {
					f.in, f.off = in[:0], 0
					return thrift.NewTTransportException(thrift.UNKNOWN_TRANSPORT_EXCEPTION,
						fmt.Sprintf("frame of %d bytes: over the buffer budget", size))
				}
				f.held += grow
				// Exactly the bytes reserved, not slices.Grow's rounding up.
				in = append(make([]byte, 0, cap(in)+grow), in...)
			} else {
				in = slices.Grow(in, grow)
			}
		}
		n, err := f.r.Read(in[len(in):min(cap(in), size)])
		in = in[:len(in)+n]
		if err != nil && len(in) < size {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			f.in, f.off = in[:0], 0
			return thrift.NewTTransportExceptionFromError(err)
		}
	}
	f.in, f.off = in, 0
	return nil
}
