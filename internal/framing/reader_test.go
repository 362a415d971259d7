package framing

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// framed returns payloads as thrift.TFramedTransport writes them.
func framed(t *testing.T, payloads [][]byte) []byte {
	var wire bytes.Buffer
	for _, p := range payloads {
		ft := thrift.NewTFramedTransportConf(thrift.NewStreamTransportW(&wire), nil)
		_, err := ft.Write(p)
		require.NoError(t, err)
		require.NoError(t, ft.Flush(context.Background()))
	}
	return wire.Bytes()
}

// TestReader_ReadsWhatTFramedTransportWrites reads frames of several sizes, delivered one
// byte at a time and all at once, by ReadByte and Read, with RemainingBytes counting down
// each frame.
func TestReader_ReadsWhatTFramedTransportWrites(t *testing.T) {
	var payloads [][]byte
	for _, size := range []int{1, 3, 511, 512, 513, 5000, 70000} {
		payloads = append(payloads, bytes.Repeat([]byte{byte(size)}, size))
	}
	wire := framed(t, payloads)
	for name, r := range map[string]io.Reader{
		"one byte at a time": iotest.OneByteReader(bytes.NewReader(wire)),
		"all at once":        bytes.NewReader(wire),
	} {
		t.Run(name, func(t *testing.T) {
			f := NewReader(r, 1<<20)
			for i, want := range payloads {
				first, err := f.ReadByte()
				require.NoError(t, err, "frame %d", i)
				assert.EqualValues(t, len(want)-1, f.RemainingBytes())
				got := []byte{first}
				for f.RemainingBytes() > 0 {
					buf := make([]byte, 100)
					n, err := f.Read(buf)
					require.NoError(t, err)
					got = append(got, buf[:n]...)
				}
				require.Equal(t, want, got, "frame %d", i)
			}
			_, err := f.ReadByte()
			var te thrift.TTransportException
			require.ErrorAs(t, err, &te)
			assert.Equal(t, thrift.END_OF_FILE, te.TypeId(), "after the last frame")
		})
	}
}

// TestReader_DropsALargeBuffer checks that a buffer grown past KeepBuffer by one frame is not
// kept for the next.
func TestReader_DropsALargeBuffer(t *testing.T) {
	f := NewReader(bytes.NewReader(framed(t, [][]byte{make([]byte, 2*KeepBuffer), {1}})), 1<<20)
	_, err := io.ReadFull(f, make([]byte, 2*KeepBuffer))
	require.NoError(t, err)
	_, err = f.ReadByte()
	require.NoError(t, err)
	assert.LessOrEqual(t, cap(f.in), KeepBuffer)
}

// TestReader_RefusesBadFrames checks a frame over the limit and a frame cut short: each is a
// transport error, and a claimed size alone grows no buffer.
func TestReader_RefusesBadFrames(t *testing.T) {
	over := binary.BigEndian.AppendUint32(nil, 1025)
	_, err := NewReader(bytes.NewReader(over), 1024).ReadByte()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Incorrect frame size (1025)")

	short := append(binary.BigEndian.AppendUint32(nil, 1000), 1, 2, 3)
	f := NewReader(bytes.NewReader(short), 1024)
	_, err = f.ReadByte()
	var te thrift.TTransportException
	require.ErrorAs(t, err, &te)
	assert.True(t, errors.Is(err, io.ErrUnexpectedEOF) || te.TypeId() == thrift.END_OF_FILE, "%v", err)
	assert.Positive(t, cap(f.in))
	assert.Less(t, cap(f.in), 1000, "the buffer grows with the bytes that came, not the size claimed")

	_, err = f.Write([]byte("x"))
	assert.Error(t, err, "a Reader does not write")
}

// countingBudget gives up to max bytes and counts what is held.
type countingBudget struct{ max, used int }

func (b *countingBudget) Reserve(n int) bool {
	if b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

func (b *countingBudget) Release(n int) { b.used -= n }

// TestReader_TakesItsBufferFromTheBudget reads a frame within the budget and one over it:
// the first is read, the second fails once the budget runs out, and Free gives every byte
// back.
func TestReader_TakesItsBufferFromTheBudget(t *testing.T) {
	small, large := bytes.Repeat([]byte{1}, 1000), bytes.Repeat([]byte{2}, 100000)
	b := &countingBudget{max: 70000}
	r := NewReader(bytes.NewReader(framed(t, [][]byte{small, large})), 1<<20)
	r.SetBudget(b)
	got := make([]byte, len(small))
	_, err := io.ReadFull(r, got)
	require.NoError(t, err)
	assert.Equal(t, small, got)
	assert.Positive(t, b.used)
	assert.LessOrEqual(t, b.used, b.max)
	_, err = r.Read(make([]byte, 1))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "over the buffer budget")
	assert.LessOrEqual(t, b.used, b.max)
	r.Free()
	assert.Zero(t, b.used)
}

// TestReader_UnreadAndDiscard: Unread returns the rest of the frame being read without
// reading it, Discard reads past some of it, and the next read after the frame's end starts
// the next frame; before any read, and at a frame's end, the rest is empty.
func TestReader_UnreadAndDiscard(t *testing.T) {
	f := NewReader(bytes.NewReader(framed(t, [][]byte{[]byte("head+rest!"), []byte("next")})), 1<<20)
	assert.Empty(t, f.Unread(), "before any read")
	head := make([]byte, 5)
	_, err := io.ReadFull(f, head)
	require.NoError(t, err)
	assert.Equal(t, "rest!", string(f.Unread()))
	assert.Equal(t, "rest!", string(f.Unread()), "Unread reads nothing")
	f.Discard(4)
	assert.EqualValues(t, 1, f.RemainingBytes())
	b, err := f.ReadByte()
	require.NoError(t, err)
	assert.Equal(t, byte('!'), b)
	assert.Empty(t, f.Unread(), "at the frame's end")
	b, err = f.ReadByte()
	require.NoError(t, err)
	assert.Equal(t, byte('n'), b, "the next frame")
}
