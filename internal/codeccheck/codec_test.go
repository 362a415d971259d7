package codeccheck

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	zaris "github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zariscodec"
)

// A codecCase is one type's two checks in one protocol: values encoded (from fuzz bytes) by
// both codecs, and bytes decoded by both.
type codecCase struct {
	name     string // the type's
	wire     wire
	values   func(t *testing.T, cfg *thrift.TConfiguration, data []byte)
	decodes  func(t *testing.T, cfg *thrift.TConfiguration, data []byte)
	encoding func(data []byte) []byte // the library's encoding of the value data fills
}

// A wire is a protocol the codec speaks, as the library speaks it.
type wire struct {
	name     string
	protocol func(thrift.TTransport, *thrift.TConfiguration) thrift.TProtocol
}

var (
	binaryWire = wire{"binary", func(t thrift.TTransport, c *thrift.TConfiguration) thrift.TProtocol {
		return thrift.NewTBinaryProtocolConf(t, c)
	}}
	compactWire = wire{"compact", func(t thrift.TTransport, c *thrift.TConfiguration) thrift.TProtocol {
		return thrift.NewTCompactProtocolConf(t, c)
	}}
)

// caseOf is the case of the type *T in the protocol w, whose generated codec is app, dec
// and its Copy variant decCopy.
func caseOf[T any, P interface {
	*T
	thrift.TStruct
}](w wire, app func([]byte, P) []byte, dec, decCopy func([]byte, P, *thrift.TConfiguration) (int, error)) codecCase {
	name := reflect.TypeFor[T]().Name() + " (" + w.name + ")"
	return codecCase{
		name: reflect.TypeFor[T]().Name(),
		wire: w,
		values: func(t *testing.T, cfg *thrift.TConfiguration, data []byte) {
			v := P(new(T))
			fill(reflect.ValueOf(v).Elem(), &source{data: data}, 0)
			want := libEncode(t, w, v, cfg)
			got := app(nil, v)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s %+v: generated encoding\n%x\nthe library's\n%x", name, v, got, want)
			}
			// Appending to bytes already there appends the same bytes.
			if again := app([]byte{0xAB}, v); !bytes.Equal(again[1:], want) || again[0] != 0xAB {
				t.Fatalf("%s: appending to a non-empty slice wrote %x, want ab%x", name, again, want)
			}
			decodeBoth[T, P](t, w, name, want, app, dec, cfg, true)
			decodeCopy[T, P](t, name, want, dec, decCopy, cfg)
		},
		decodes: func(t *testing.T, cfg *thrift.TConfiguration, data []byte) {
			decodeBoth[T, P](t, w, name, data, app, dec, cfg, false)
			decodeCopy[T, P](t, name, data, dec, decCopy, cfg)
		},
		encoding: func(data []byte) []byte {
			v := P(new(T))
			fill(reflect.ValueOf(v).Elem(), &source{data: data}, 0)
			return libEncode(nil, w, v, nil)
		},
	}
}

// cases are every type of gen/zariscodec, in both protocols (TestCases_CoverTheCodec).
var cases = []codecCase{
	caseOf(binaryWire, zariscodec.AppendGetRequest, zariscodec.DecodeGetRequest, zariscodec.DecodeGetRequestCopy),
	caseOf(binaryWire, zariscodec.AppendGetResponse, zariscodec.DecodeGetResponse, zariscodec.DecodeGetResponseCopy),
	caseOf(binaryWire, zariscodec.AppendPutRequest, zariscodec.DecodePutRequest, zariscodec.DecodePutRequestCopy),
	caseOf(binaryWire, zariscodec.AppendPutResponse, zariscodec.DecodePutResponse, zariscodec.DecodePutResponseCopy),
	caseOf(binaryWire, zariscodec.AppendDeleteRequest, zariscodec.DecodeDeleteRequest, zariscodec.DecodeDeleteRequestCopy),
	caseOf(binaryWire, zariscodec.AppendDeleteResponse, zariscodec.DecodeDeleteResponse, zariscodec.DecodeDeleteResponseCopy),
	caseOf(binaryWire, zariscodec.AppendRequestToken, zariscodec.DecodeRequestToken, zariscodec.DecodeRequestTokenCopy),
	caseOf(binaryWire, zariscodec.AppendIncrementRequest, zariscodec.DecodeIncrementRequest, zariscodec.DecodeIncrementRequestCopy),
	caseOf(binaryWire, zariscodec.AppendIncrementResponse, zariscodec.DecodeIncrementResponse, zariscodec.DecodeIncrementResponseCopy),
	caseOf(binaryWire, zariscodec.AppendGetItem, zariscodec.DecodeGetItem, zariscodec.DecodeGetItemCopy),
	caseOf(binaryWire, zariscodec.AppendMultiGetRequest, zariscodec.DecodeMultiGetRequest, zariscodec.DecodeMultiGetRequestCopy),
	caseOf(binaryWire, zariscodec.AppendGetOutcome, zariscodec.DecodeGetOutcome, zariscodec.DecodeGetOutcomeCopy),
	caseOf(binaryWire, zariscodec.AppendMultiGetResponse, zariscodec.DecodeMultiGetResponse, zariscodec.DecodeMultiGetResponseCopy),
	caseOf(binaryWire, zariscodec.AppendPutItem, zariscodec.DecodePutItem, zariscodec.DecodePutItemCopy),
	caseOf(binaryWire, zariscodec.AppendMultiPutRequest, zariscodec.DecodeMultiPutRequest, zariscodec.DecodeMultiPutRequestCopy),
	caseOf(binaryWire, zariscodec.AppendPutOutcome, zariscodec.DecodePutOutcome, zariscodec.DecodePutOutcomeCopy),
	caseOf(binaryWire, zariscodec.AppendMultiPutResponse, zariscodec.DecodeMultiPutResponse, zariscodec.DecodeMultiPutResponseCopy),
	caseOf(binaryWire, zariscodec.AppendDeleteItem, zariscodec.DecodeDeleteItem, zariscodec.DecodeDeleteItemCopy),
	caseOf(binaryWire, zariscodec.AppendMultiDeleteRequest, zariscodec.DecodeMultiDeleteRequest, zariscodec.DecodeMultiDeleteRequestCopy),
	caseOf(binaryWire, zariscodec.AppendDeleteOutcome, zariscodec.DecodeDeleteOutcome, zariscodec.DecodeDeleteOutcomeCopy),
	caseOf(binaryWire, zariscodec.AppendMultiDeleteResponse, zariscodec.DecodeMultiDeleteResponse, zariscodec.DecodeMultiDeleteResponseCopy),
	caseOf(binaryWire, zariscodec.AppendNodeInfo, zariscodec.DecodeNodeInfo, zariscodec.DecodeNodeInfoCopy),
	caseOf(binaryWire, zariscodec.AppendSegmentInfo, zariscodec.DecodeSegmentInfo, zariscodec.DecodeSegmentInfoCopy),
	caseOf(binaryWire, zariscodec.AppendClusterMap, zariscodec.DecodeClusterMap, zariscodec.DecodeClusterMapCopy),
	caseOf(binaryWire, zariscodec.AppendZarisKvGetArgs, zariscodec.DecodeZarisKvGetArgs, zariscodec.DecodeZarisKvGetArgsCopy),
	caseOf(binaryWire, zariscodec.AppendZarisKvGetResult, zariscodec.DecodeZarisKvGetResult, zariscodec.DecodeZarisKvGetResultCopy),
	caseOf(binaryWire, zariscodec.AppendZarisKvPutArgs, zariscodec.DecodeZarisKvPutArgs, zariscodec.DecodeZarisKvPutArgsCopy),
	caseOf(binaryWire, zariscodec.AppendZarisKvPutResult, zariscodec.DecodeZarisKvPutResult, zariscodec.DecodeZarisKvPutResultCopy),
	caseOf(binaryWire, zariscodec.AppendZarisKvDeleteArgs, zariscodec.DecodeZarisKvDeleteArgs, zariscodec.DecodeZarisKvDeleteArgsCopy),
	caseOf(binaryWire, zariscodec.AppendZarisKvDeleteResult, zariscodec.DecodeZarisKvDeleteResult, zariscodec.DecodeZarisKvDeleteResultCopy),
	caseOf(binaryWire, zariscodec.AppendZarisKvIncrementArgs, zariscodec.DecodeZarisKvIncrementArgs, zariscodec.DecodeZarisKvIncrementArgsCopy),
	caseOf(binaryWire, zariscodec.AppendZarisKvIncrementResult, zariscodec.DecodeZarisKvIncrementResult, zariscodec.DecodeZarisKvIncrementResultCopy),
	caseOf(binaryWire, zariscodec.AppendZarisKvMultiGetArgs, zariscodec.DecodeZarisKvMultiGetArgs, zariscodec.DecodeZarisKvMultiGetArgsCopy),
	caseOf(binaryWire, zariscodec.AppendZarisKvMultiGetResult, zariscodec.DecodeZarisKvMultiGetResult, zariscodec.DecodeZarisKvMultiGetResultCopy),
	caseOf(binaryWire, zariscodec.AppendZarisKvMultiPutArgs, zariscodec.DecodeZarisKvMultiPutArgs, zariscodec.DecodeZarisKvMultiPutArgsCopy),
	caseOf(binaryWire, zariscodec.AppendZarisKvMultiPutResult, zariscodec.DecodeZarisKvMultiPutResult, zariscodec.DecodeZarisKvMultiPutResultCopy),
	caseOf(binaryWire, zariscodec.AppendZarisKvMultiDeleteArgs, zariscodec.DecodeZarisKvMultiDeleteArgs, zariscodec.DecodeZarisKvMultiDeleteArgsCopy),
	caseOf(binaryWire, zariscodec.AppendZarisKvMultiDeleteResult, zariscodec.DecodeZarisKvMultiDeleteResult, zariscodec.DecodeZarisKvMultiDeleteResultCopy),
	caseOf(binaryWire, zariscodec.AppendZarisKvGetClusterMapArgs, zariscodec.DecodeZarisKvGetClusterMapArgs, zariscodec.DecodeZarisKvGetClusterMapArgsCopy),
	caseOf(binaryWire, zariscodec.AppendZarisKvGetClusterMapResult, zariscodec.DecodeZarisKvGetClusterMapResult, zariscodec.DecodeZarisKvGetClusterMapResultCopy),
	caseOf(compactWire, zariscodec.AppendCompactGetRequest, zariscodec.DecodeCompactGetRequest, zariscodec.DecodeCompactGetRequestCopy),
	caseOf(compactWire, zariscodec.AppendCompactGetResponse, zariscodec.DecodeCompactGetResponse, zariscodec.DecodeCompactGetResponseCopy),
	caseOf(compactWire, zariscodec.AppendCompactPutRequest, zariscodec.DecodeCompactPutRequest, zariscodec.DecodeCompactPutRequestCopy),
	caseOf(compactWire, zariscodec.AppendCompactPutResponse, zariscodec.DecodeCompactPutResponse, zariscodec.DecodeCompactPutResponseCopy),
	caseOf(compactWire, zariscodec.AppendCompactDeleteRequest, zariscodec.DecodeCompactDeleteRequest, zariscodec.DecodeCompactDeleteRequestCopy),
	caseOf(compactWire, zariscodec.AppendCompactDeleteResponse, zariscodec.DecodeCompactDeleteResponse, zariscodec.DecodeCompactDeleteResponseCopy),
	caseOf(compactWire, zariscodec.AppendCompactRequestToken, zariscodec.DecodeCompactRequestToken, zariscodec.DecodeCompactRequestTokenCopy),
	caseOf(compactWire, zariscodec.AppendCompactIncrementRequest, zariscodec.DecodeCompactIncrementRequest, zariscodec.DecodeCompactIncrementRequestCopy),
	caseOf(compactWire, zariscodec.AppendCompactIncrementResponse, zariscodec.DecodeCompactIncrementResponse, zariscodec.DecodeCompactIncrementResponseCopy),
	caseOf(compactWire, zariscodec.AppendCompactGetItem, zariscodec.DecodeCompactGetItem, zariscodec.DecodeCompactGetItemCopy),
	caseOf(compactWire, zariscodec.AppendCompactMultiGetRequest, zariscodec.DecodeCompactMultiGetRequest, zariscodec.DecodeCompactMultiGetRequestCopy),
	caseOf(compactWire, zariscodec.AppendCompactGetOutcome, zariscodec.DecodeCompactGetOutcome, zariscodec.DecodeCompactGetOutcomeCopy),
	caseOf(compactWire, zariscodec.AppendCompactMultiGetResponse, zariscodec.DecodeCompactMultiGetResponse, zariscodec.DecodeCompactMultiGetResponseCopy),
	caseOf(compactWire, zariscodec.AppendCompactPutItem, zariscodec.DecodeCompactPutItem, zariscodec.DecodeCompactPutItemCopy),
	caseOf(compactWire, zariscodec.AppendCompactMultiPutRequest, zariscodec.DecodeCompactMultiPutRequest, zariscodec.DecodeCompactMultiPutRequestCopy),
	caseOf(compactWire, zariscodec.AppendCompactPutOutcome, zariscodec.DecodeCompactPutOutcome, zariscodec.DecodeCompactPutOutcomeCopy),
	caseOf(compactWire, zariscodec.AppendCompactMultiPutResponse, zariscodec.DecodeCompactMultiPutResponse, zariscodec.DecodeCompactMultiPutResponseCopy),
	caseOf(compactWire, zariscodec.AppendCompactDeleteItem, zariscodec.DecodeCompactDeleteItem, zariscodec.DecodeCompactDeleteItemCopy),
	caseOf(compactWire, zariscodec.AppendCompactMultiDeleteRequest, zariscodec.DecodeCompactMultiDeleteRequest, zariscodec.DecodeCompactMultiDeleteRequestCopy),
	caseOf(compactWire, zariscodec.AppendCompactDeleteOutcome, zariscodec.DecodeCompactDeleteOutcome, zariscodec.DecodeCompactDeleteOutcomeCopy),
	caseOf(compactWire, zariscodec.AppendCompactMultiDeleteResponse, zariscodec.DecodeCompactMultiDeleteResponse, zariscodec.DecodeCompactMultiDeleteResponseCopy),
	caseOf(compactWire, zariscodec.AppendCompactNodeInfo, zariscodec.DecodeCompactNodeInfo, zariscodec.DecodeCompactNodeInfoCopy),
	caseOf(compactWire, zariscodec.AppendCompactSegmentInfo, zariscodec.DecodeCompactSegmentInfo, zariscodec.DecodeCompactSegmentInfoCopy),
	caseOf(compactWire, zariscodec.AppendCompactClusterMap, zariscodec.DecodeCompactClusterMap, zariscodec.DecodeCompactClusterMapCopy),
	caseOf(compactWire, zariscodec.AppendCompactZarisKvGetArgs, zariscodec.DecodeCompactZarisKvGetArgs, zariscodec.DecodeCompactZarisKvGetArgsCopy),
	caseOf(compactWire, zariscodec.AppendCompactZarisKvGetResult, zariscodec.DecodeCompactZarisKvGetResult, zariscodec.DecodeCompactZarisKvGetResultCopy),
	caseOf(compactWire, zariscodec.AppendCompactZarisKvPutArgs, zariscodec.DecodeCompactZarisKvPutArgs, zariscodec.DecodeCompactZarisKvPutArgsCopy),
	caseOf(compactWire, zariscodec.AppendCompactZarisKvPutResult, zariscodec.DecodeCompactZarisKvPutResult, zariscodec.DecodeCompactZarisKvPutResultCopy),
	caseOf(compactWire, zariscodec.AppendCompactZarisKvDeleteArgs, zariscodec.DecodeCompactZarisKvDeleteArgs, zariscodec.DecodeCompactZarisKvDeleteArgsCopy),
	caseOf(compactWire, zariscodec.AppendCompactZarisKvDeleteResult, zariscodec.DecodeCompactZarisKvDeleteResult, zariscodec.DecodeCompactZarisKvDeleteResultCopy),
	caseOf(compactWire, zariscodec.AppendCompactZarisKvIncrementArgs, zariscodec.DecodeCompactZarisKvIncrementArgs, zariscodec.DecodeCompactZarisKvIncrementArgsCopy),
	caseOf(compactWire, zariscodec.AppendCompactZarisKvIncrementResult, zariscodec.DecodeCompactZarisKvIncrementResult, zariscodec.DecodeCompactZarisKvIncrementResultCopy),
	caseOf(compactWire, zariscodec.AppendCompactZarisKvMultiGetArgs, zariscodec.DecodeCompactZarisKvMultiGetArgs, zariscodec.DecodeCompactZarisKvMultiGetArgsCopy),
	caseOf(compactWire, zariscodec.AppendCompactZarisKvMultiGetResult, zariscodec.DecodeCompactZarisKvMultiGetResult, zariscodec.DecodeCompactZarisKvMultiGetResultCopy),
	caseOf(compactWire, zariscodec.AppendCompactZarisKvMultiPutArgs, zariscodec.DecodeCompactZarisKvMultiPutArgs, zariscodec.DecodeCompactZarisKvMultiPutArgsCopy),
	caseOf(compactWire, zariscodec.AppendCompactZarisKvMultiPutResult, zariscodec.DecodeCompactZarisKvMultiPutResult, zariscodec.DecodeCompactZarisKvMultiPutResultCopy),
	caseOf(compactWire, zariscodec.AppendCompactZarisKvMultiDeleteArgs, zariscodec.DecodeCompactZarisKvMultiDeleteArgs, zariscodec.DecodeCompactZarisKvMultiDeleteArgsCopy),
	caseOf(compactWire, zariscodec.AppendCompactZarisKvMultiDeleteResult, zariscodec.DecodeCompactZarisKvMultiDeleteResult, zariscodec.DecodeCompactZarisKvMultiDeleteResultCopy),
	caseOf(compactWire, zariscodec.AppendCompactZarisKvGetClusterMapArgs, zariscodec.DecodeCompactZarisKvGetClusterMapArgs, zariscodec.DecodeCompactZarisKvGetClusterMapArgsCopy),
	caseOf(compactWire, zariscodec.AppendCompactZarisKvGetClusterMapResult, zariscodec.DecodeCompactZarisKvGetClusterMapResult, zariscodec.DecodeCompactZarisKvGetClusterMapResultCopy),
}

// configs are the bounds decodes run with: the client's, and tight ones that the fuzzer's
// small inputs reach.
var configs = []*thrift.TConfiguration{
	{MaxMessageSize: 16 << 20, MaxFrameSize: 16 << 20, MaxContainerSize: 1 << 20},
	{MaxMessageSize: 40, MaxFrameSize: 40, MaxContainerSize: 3},
	nil,
}

// libEncode is v's encoding by the Thrift library's protocol w.
func libEncode(t *testing.T, w wire, v thrift.TStruct, cfg *thrift.TConfiguration) []byte {
	buf := thrift.NewTMemoryBuffer()
	p := w.protocol(buf, cfg)
	if err := v.Write(context.Background(), p); err != nil && t != nil {
		t.Fatalf("the library's Write: %v", err)
	}
	if err := p.Flush(context.Background()); err != nil && t != nil {
		t.Fatalf("the library's Flush: %v", err)
	}
	return buf.Bytes()
}

// decodeBoth decodes b with the library and with the generated codec and fails unless both
// err or both decode the same value, reading the same bytes; whole says b is one encoding
// the library made, which both must read to its end.
func decodeBoth[T any, P interface {
	*T
	thrift.TStruct
}](t *testing.T, w wire, name string, b []byte, app func([]byte, P) []byte, dec func([]byte, P, *thrift.TConfiguration) (int, error), cfg *thrift.TConfiguration, whole bool) {
	t.Helper()
	buf := thrift.NewTMemoryBuffer()
	buf.Write(b)
	want := P(new(T))
	wantErr := want.Read(context.Background(), w.protocol(buf, cfg))
	wantN := len(b) - buf.Len()

	in := slices.Clone(b) // the library's Read consumed buf, not b; the decode gets its own copy
	got := P(new(T))
	n, gotErr := dec(in, got, cfg)
	switch {
	case (gotErr == nil) != (wantErr == nil):
		t.Fatalf("%s from %x: generated decode: %v, the library's: %v", name, b, gotErr, wantErr)
	case gotErr != nil:
		return
	case whole && (n != len(b) || wantN != len(b)):
		t.Fatalf("%s from %x: read %d bytes, the library %d, of %d", name, b, n, wantN, len(b))
	case n != wantN:
		t.Fatalf("%s from %x: read %d bytes, the library %d", name, b, n, wantN)
	case !reflect.DeepEqual(got, want):
		t.Fatalf("%s from %x: generated decode %+v, the library's %+v", name, b, got, want)
	}
	// Both values encode to the same bytes again.
	if g, l := app(nil, got), libEncode(t, w, want, cfg); !bytes.Equal(g, l) {
		t.Fatalf("%s: re-encoded %x, the library %x", name, g, l)
	}
}

// decodeCopy decodes b with dec and with its Copy variant decCopy and fails unless both err
// or both decode the same value, reading the same bytes, and the Copy's value stays the same
// once its input is overwritten: its binaries are copies.
func decodeCopy[T any, P interface {
	*T
	thrift.TStruct
}](t *testing.T, name string, b []byte, dec, decCopy func([]byte, P, *thrift.TConfiguration) (int, error), cfg *thrift.TConfiguration) {
	t.Helper()
	want := P(new(T))
	wantN, wantErr := dec(slices.Clone(b), want, cfg)
	in := slices.Clone(b)
	got := P(new(T))
	n, gotErr := decCopy(in, got, cfg)
	switch {
	case (gotErr == nil) != (wantErr == nil):
		t.Fatalf("%s from %x: Copy decode: %v, decode: %v", name, b, gotErr, wantErr)
	case gotErr != nil:
		return
	case n != wantN:
		t.Fatalf("%s from %x: Copy read %d bytes, decode %d", name, b, n, wantN)
	case !reflect.DeepEqual(got, want):
		t.Fatalf("%s from %x: Copy decode %+v, decode %+v", name, b, got, want)
	}
	for i := range in {
		in[i] = ^in[i]
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s from %x: the Copy decode changed with its input: %+v, want %+v", name, b, got, want)
	}
}

// source hands out the fuzz input's bytes, zeros once it is used up.
type source struct {
	data []byte
	i    int
}

func (s *source) byte() byte {
	if s.i >= len(s.data) {
		return 0
	}
	s.i++
	return s.data[s.i-1]
}

func (s *source) uint64() uint64 {
	var x uint64
	for range 8 {
		x = x<<8 | uint64(s.byte())
	}
	return x
}

// fill sets v, a Thrift-generated value, from s: pointers and slices nil or not, lengths of
// up to 7, any integer, any bytes.
func fill(v reflect.Value, s *source, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		if depth > 6 || s.byte()%4 == 0 {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), s, depth+1)
	case reflect.Slice:
		c := s.byte()
		if c%5 == 0 || depth > 6 {
			return
		}
		n := int(c/5) % 8
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			fill(v.Index(i), s, depth+1)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), s, depth)
			}
		}
	case reflect.Bool:
		v.SetBool(s.byte()&1 == 1)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(s.uint64()))
	case reflect.Uint8:
		v.SetUint(uint64(s.byte()))
	case reflect.Float64:
		f := math.Float64frombits(s.uint64())
		if math.IsNaN(f) {
			f = 0
		}
		v.SetFloat(f)
	case reflect.String:
		n := int(s.byte() % 8)
		b := make([]byte, n)
		for i := range b {
			b[i] = s.byte()
		}
		v.SetString(string(b))
	}
}

// FuzzCodec holds the generated codec to the library: the value the input fills, of the
// type it picks, encodes to the same bytes with both, and both decode those bytes to the
// same value; the input itself, taken as an encoding, decodes to the same value with both,
// or both refuse it.
func FuzzCodec(f *testing.F) {
	for i, c := range cases {
		for _, data := range [][]byte{
			nil,
			{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20},
			bytes.Repeat([]byte{0xFF, 0x11, 0x3B}, 20),
		} {
			f.Add(uint8(i), uint8(0), data)
			enc := c.encoding(data)
			f.Add(uint8(i), uint8(0), enc)
			f.Add(uint8(i), uint8(1), enc)
			if len(enc) > 1 {
				f.Add(uint8(i), uint8(0), enc[:len(enc)-1]) // cut short
			}
		}
	}
	// Unknown fields of every type before the known ones (a newer peer's), and a struct
	// nested past the skip depth.
	for i, c := range cases {
		f.Add(uint8(i), uint8(0), slices.Concat(unknownFields(c.wire), c.encoding(nil)))
		f.Add(uint8(i), uint8(0), nested(c.wire, 70))
	}
	f.Fuzz(func(t *testing.T, which, cfg uint8, data []byte) {
		c := cases[int(which)%len(cases)]
		conf := configs[int(cfg)%len(configs)]
		c.values(t, conf, data)
		c.decodes(t, conf, data)
	})
}

// unknownFields is the library's encoding in w of fields of every type, of ids no struct of
// the IDL has (near and far from each other, and negative), without the struct's end.
func unknownFields(w wire) []byte {
	ctx := context.Background()
	buf := thrift.NewTMemoryBuffer()
	p := w.protocol(buf, nil)
	field := func(t thrift.TType, id int16, value func()) {
		p.WriteFieldBegin(ctx, "", t, id)
		value()
		p.WriteFieldEnd(ctx)
	}
	p.WriteStructBegin(ctx, "")
	field(thrift.STRUCT, 9, func() {
		p.WriteStructBegin(ctx, "")
		field(thrift.LIST, 1, func() { p.WriteListBegin(ctx, thrift.I32, 1); p.WriteI32(ctx, 7) })
		field(thrift.BOOL, 2, func() { p.WriteBool(ctx, true) })
		p.WriteFieldStop(ctx)
		p.WriteStructEnd(ctx)
	})
	field(thrift.MAP, 10, func() {
		p.WriteMapBegin(ctx, thrift.STRING, thrift.BOOL, 1)
		p.WriteString(ctx, "k")
		p.WriteBool(ctx, true)
	})
	field(thrift.DOUBLE, 11, func() { p.WriteDouble(ctx, 1.5) })
	field(thrift.SET, 12, func() { p.WriteSetBegin(ctx, thrift.I16, 1); p.WriteI16(ctx, 5) })
	field(thrift.UUID, 13, func() { p.WriteUUID(ctx, thrift.Tuuid{1}) })
	field(thrift.BYTE, 14, func() { p.WriteByte(ctx, 9) })
	field(thrift.BOOL, 15, func() { p.WriteBool(ctx, false) })
	field(thrift.LIST, 300, func() { p.WriteListBegin(ctx, thrift.BOOL, 2); p.WriteBool(ctx, true); p.WriteBool(ctx, false) })
	field(thrift.I64, -4, func() { p.WriteI64(ctx, -1<<40) })
	field(thrift.MAP, 16, func() { p.WriteMapBegin(ctx, thrift.I32, thrift.I32, 0) })
	p.Flush(ctx)
	return buf.Bytes()
}

// nested is the library's encoding in w of depth+1 structs, each but the first the field 1
// of the one around it.
func nested(w wire, depth int) []byte {
	ctx := context.Background()
	buf := thrift.NewTMemoryBuffer()
	p := w.protocol(buf, nil)
	for range depth {
		p.WriteStructBegin(ctx, "")
		p.WriteFieldBegin(ctx, "", thrift.STRUCT, 1)
	}
	p.WriteStructBegin(ctx, "")
	p.WriteFieldStop(ctx)
	p.WriteStructEnd(ctx)
	for range depth {
		p.WriteFieldEnd(ctx)
		p.WriteFieldStop(ctx)
		p.WriteStructEnd(ctx)
	}
	p.Flush(ctx)
	return buf.Bytes()
}

// The cases cover every type the codec encodes: a type the IDL gains is checked once it is
// added to cases.
func TestCases_CoverTheCodec(t *testing.T) {
	for _, f := range []struct {
		file, prefix string
		wire         wire
	}{{"codec.go", "Append", binaryWire}, {"compact.go", "AppendCompact", compactWire}} {
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, "../../gen/zariscodec/"+f.file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		var codec []string
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, f.prefix) {
				codec = append(codec, strings.TrimPrefix(fn.Name.Name, f.prefix))
			}
		}
		var checked []string
		for _, c := range cases {
			if c.wire.name == f.wire.name {
				checked = append(checked, c.name)
			}
		}
		slices.Sort(codec)
		slices.Sort(checked)
		if len(codec) == 0 || !slices.Equal(codec, checked) {
			t.Fatalf("gen/zariscodec/%s encodes %v; the cases check %v: add a caseOf for each new type", f.file, codec, checked)
		}
	}
}

// The Copy variant's binaries are copies: the first of its own, the next ones sharing one
// copy of the rest of the input, each with its capacity cut at its length.
func TestDecodeCopy_BinariesAreCopies(t *testing.T) {
	in := zariscodec.AppendPutRequest(nil, &zaris.PutRequest{Key: []byte("key"), Value: []byte("value")})
	var r zaris.PutRequest
	n, err := zariscodec.DecodePutRequestCopy(in, &r, nil)
	if err != nil || n != len(in) {
		t.Fatalf("decode: %d of %d bytes, %v", n, len(in), err)
	}
	for i := range in {
		in[i] = 0
	}
	if string(r.Key) != "key" || cap(r.Key) != len(r.Key) || string(r.Value) != "value" || cap(r.Value) != len(r.Value) {
		t.Fatalf("key %q cap %d, value %q cap %d", r.Key, cap(r.Key), r.Value, cap(r.Value))
	}
}

// A reply's binary is a slice of the bytes decoded, its capacity cut at its length, so
// appending to it cannot overwrite what follows.
func TestDecode_BinariesAliasTheInput(t *testing.T) {
	in := zariscodec.AppendGetResponse(nil, &zaris.GetResponse{Status: zaris.KvStatus_Ok, Value: []byte("value"), Version: 3, MapEpoch: 9})
	var r zaris.GetResponse
	n, err := zariscodec.DecodeGetResponse(in, &r, nil)
	if err != nil || n != len(in) {
		t.Fatalf("decode: %d of %d bytes, %v", n, len(in), err)
	}
	if string(r.Value) != "value" || cap(r.Value) != len(r.Value) {
		t.Fatalf("value %q, cap %d", r.Value, cap(r.Value))
	}
	at := bytes.Index(in, []byte("value"))
	in[at] = 'V'
	if string(r.Value) != "Value" {
		t.Fatalf("the value does not alias the input: %q", r.Value)
	}
}
