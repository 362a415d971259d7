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

// A codecCase is one type's two checks: values encoded (from fuzz bytes) by both codecs, and
// bytes decoded by both.
type codecCase struct {
	name     string
	values   func(t *testing.T, cfg *thrift.TConfiguration, data []byte)
	wire     func(t *testing.T, cfg *thrift.TConfiguration, data []byte)
	encoding func(data []byte) []byte // the library's encoding of the value data fills
}

// caseOf is the case of the type *T, whose generated codec is app, dec and its Copy
// variant decCopy.
func caseOf[T any, P interface {
	*T
	thrift.TStruct
}](app func([]byte, P) []byte, dec, decCopy func([]byte, P, *thrift.TConfiguration) (int, error)) codecCase {
	name := reflect.TypeFor[T]().Name()
	return codecCase{
		name: name,
		values: func(t *testing.T, cfg *thrift.TConfiguration, data []byte) {
			v := P(new(T))
			fill(reflect.ValueOf(v).Elem(), &source{data: data}, 0)
			want := libEncode(t, v, cfg)
			got := app(nil, v)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s %+v: generated encoding\n%x\nthe library's\n%x", name, v, got, want)
			}
			// Appending to bytes already there appends the same bytes.
			if again := app([]byte{0xAB}, v); !bytes.Equal(again[1:], want) || again[0] != 0xAB {
				t.Fatalf("%s: appending to a non-empty slice wrote %x, want ab%x", name, again, want)
			}
			decodeBoth[T, P](t, name, want, app, dec, cfg, true)
			decodeCopy[T, P](t, name, want, dec, decCopy, cfg)
		},
		wire: func(t *testing.T, cfg *thrift.TConfiguration, data []byte) {
			decodeBoth[T, P](t, name, data, app, dec, cfg, false)
			decodeCopy[T, P](t, name, data, dec, decCopy, cfg)
		},
		encoding: func(data []byte) []byte {
			v := P(new(T))
			fill(reflect.ValueOf(v).Elem(), &source{data: data}, 0)
			return libEncode(nil, v, nil)
		},
	}
}

// cases are every type of gen/zariscodec (TestCases_CoverTheCodec).
var cases = []codecCase{
	caseOf(zariscodec.AppendGetRequest, zariscodec.DecodeGetRequest, zariscodec.DecodeGetRequestCopy),
	caseOf(zariscodec.AppendGetResponse, zariscodec.DecodeGetResponse, zariscodec.DecodeGetResponseCopy),
	caseOf(zariscodec.AppendPutRequest, zariscodec.DecodePutRequest, zariscodec.DecodePutRequestCopy),
	caseOf(zariscodec.AppendPutResponse, zariscodec.DecodePutResponse, zariscodec.DecodePutResponseCopy),
	caseOf(zariscodec.AppendDeleteRequest, zariscodec.DecodeDeleteRequest, zariscodec.DecodeDeleteRequestCopy),
	caseOf(zariscodec.AppendDeleteResponse, zariscodec.DecodeDeleteResponse, zariscodec.DecodeDeleteResponseCopy),
	caseOf(zariscodec.AppendRequestToken, zariscodec.DecodeRequestToken, zariscodec.DecodeRequestTokenCopy),
	caseOf(zariscodec.AppendIncrementRequest, zariscodec.DecodeIncrementRequest, zariscodec.DecodeIncrementRequestCopy),
	caseOf(zariscodec.AppendIncrementResponse, zariscodec.DecodeIncrementResponse, zariscodec.DecodeIncrementResponseCopy),
	caseOf(zariscodec.AppendGetItem, zariscodec.DecodeGetItem, zariscodec.DecodeGetItemCopy),
	caseOf(zariscodec.AppendMultiGetRequest, zariscodec.DecodeMultiGetRequest, zariscodec.DecodeMultiGetRequestCopy),
	caseOf(zariscodec.AppendGetOutcome, zariscodec.DecodeGetOutcome, zariscodec.DecodeGetOutcomeCopy),
	caseOf(zariscodec.AppendMultiGetResponse, zariscodec.DecodeMultiGetResponse, zariscodec.DecodeMultiGetResponseCopy),
	caseOf(zariscodec.AppendPutItem, zariscodec.DecodePutItem, zariscodec.DecodePutItemCopy),
	caseOf(zariscodec.AppendMultiPutRequest, zariscodec.DecodeMultiPutRequest, zariscodec.DecodeMultiPutRequestCopy),
	caseOf(zariscodec.AppendPutOutcome, zariscodec.DecodePutOutcome, zariscodec.DecodePutOutcomeCopy),
	caseOf(zariscodec.AppendMultiPutResponse, zariscodec.DecodeMultiPutResponse, zariscodec.DecodeMultiPutResponseCopy),
	caseOf(zariscodec.AppendDeleteItem, zariscodec.DecodeDeleteItem, zariscodec.DecodeDeleteItemCopy),
	caseOf(zariscodec.AppendMultiDeleteRequest, zariscodec.DecodeMultiDeleteRequest, zariscodec.DecodeMultiDeleteRequestCopy),
	caseOf(zariscodec.AppendDeleteOutcome, zariscodec.DecodeDeleteOutcome, zariscodec.DecodeDeleteOutcomeCopy),
	caseOf(zariscodec.AppendMultiDeleteResponse, zariscodec.DecodeMultiDeleteResponse, zariscodec.DecodeMultiDeleteResponseCopy),
	caseOf(zariscodec.AppendNodeInfo, zariscodec.DecodeNodeInfo, zariscodec.DecodeNodeInfoCopy),
	caseOf(zariscodec.AppendSegmentInfo, zariscodec.DecodeSegmentInfo, zariscodec.DecodeSegmentInfoCopy),
	caseOf(zariscodec.AppendClusterMap, zariscodec.DecodeClusterMap, zariscodec.DecodeClusterMapCopy),
	caseOf(zariscodec.AppendZarisKvGetArgs, zariscodec.DecodeZarisKvGetArgs, zariscodec.DecodeZarisKvGetArgsCopy),
	caseOf(zariscodec.AppendZarisKvGetResult, zariscodec.DecodeZarisKvGetResult, zariscodec.DecodeZarisKvGetResultCopy),
	caseOf(zariscodec.AppendZarisKvPutArgs, zariscodec.DecodeZarisKvPutArgs, zariscodec.DecodeZarisKvPutArgsCopy),
	caseOf(zariscodec.AppendZarisKvPutResult, zariscodec.DecodeZarisKvPutResult, zariscodec.DecodeZarisKvPutResultCopy),
	caseOf(zariscodec.AppendZarisKvDeleteArgs, zariscodec.DecodeZarisKvDeleteArgs, zariscodec.DecodeZarisKvDeleteArgsCopy),
	caseOf(zariscodec.AppendZarisKvDeleteResult, zariscodec.DecodeZarisKvDeleteResult, zariscodec.DecodeZarisKvDeleteResultCopy),
	caseOf(zariscodec.AppendZarisKvIncrementArgs, zariscodec.DecodeZarisKvIncrementArgs, zariscodec.DecodeZarisKvIncrementArgsCopy),
	caseOf(zariscodec.AppendZarisKvIncrementResult, zariscodec.DecodeZarisKvIncrementResult, zariscodec.DecodeZarisKvIncrementResultCopy),
	caseOf(zariscodec.AppendZarisKvMultiGetArgs, zariscodec.DecodeZarisKvMultiGetArgs, zariscodec.DecodeZarisKvMultiGetArgsCopy),
	caseOf(zariscodec.AppendZarisKvMultiGetResult, zariscodec.DecodeZarisKvMultiGetResult, zariscodec.DecodeZarisKvMultiGetResultCopy),
	caseOf(zariscodec.AppendZarisKvMultiPutArgs, zariscodec.DecodeZarisKvMultiPutArgs, zariscodec.DecodeZarisKvMultiPutArgsCopy),
	caseOf(zariscodec.AppendZarisKvMultiPutResult, zariscodec.DecodeZarisKvMultiPutResult, zariscodec.DecodeZarisKvMultiPutResultCopy),
	caseOf(zariscodec.AppendZarisKvMultiDeleteArgs, zariscodec.DecodeZarisKvMultiDeleteArgs, zariscodec.DecodeZarisKvMultiDeleteArgsCopy),
	caseOf(zariscodec.AppendZarisKvMultiDeleteResult, zariscodec.DecodeZarisKvMultiDeleteResult, zariscodec.DecodeZarisKvMultiDeleteResultCopy),
	caseOf(zariscodec.AppendZarisKvGetClusterMapArgs, zariscodec.DecodeZarisKvGetClusterMapArgs, zariscodec.DecodeZarisKvGetClusterMapArgsCopy),
	caseOf(zariscodec.AppendZarisKvGetClusterMapResult, zariscodec.DecodeZarisKvGetClusterMapResult, zariscodec.DecodeZarisKvGetClusterMapResultCopy),
}

// configs are the bounds decodes run with: the client's, and tight ones that the fuzzer's
// small inputs reach.
var configs = []*thrift.TConfiguration{
	{MaxMessageSize: 16 << 20, MaxFrameSize: 16 << 20, MaxContainerSize: 1 << 20},
	{MaxMessageSize: 40, MaxFrameSize: 40, MaxContainerSize: 3},
	nil,
}

// libEncode is v's encoding by the Thrift library's binary protocol.
func libEncode(t *testing.T, v thrift.TStruct, cfg *thrift.TConfiguration) []byte {
	buf := thrift.NewTMemoryBuffer()
	p := thrift.NewTBinaryProtocolConf(buf, cfg)
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
}](t *testing.T, name string, b []byte, app func([]byte, P) []byte, dec func([]byte, P, *thrift.TConfiguration) (int, error), cfg *thrift.TConfiguration, whole bool) {
	t.Helper()
	buf := thrift.NewTMemoryBuffer()
	buf.Write(b)
	want := P(new(T))
	wantErr := want.Read(context.Background(), thrift.NewTBinaryProtocolConf(buf, cfg))
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
	if g, w := app(nil, got), libEncode(t, want, cfg); !bytes.Equal(g, w) {
		t.Fatalf("%s: re-encoded %x, the library %x", name, g, w)
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
	// An unknown field of every type before the known ones (a newer peer's), and one nested
	// past the skip depth.
	unknown := []byte{
		byte(thrift.STRUCT), 0, 9, byte(thrift.LIST), 0, 1, byte(thrift.I32), 0, 0, 0, 1, 0, 0, 0, 7, 0,
		byte(thrift.MAP), 0, 10, byte(thrift.STRING), byte(thrift.BOOL), 0, 0, 0, 1, 0, 0, 0, 1, 'k', 1,
		byte(thrift.DOUBLE), 0, 11, 0, 0, 0, 0, 0, 0, 0, 0,
		byte(thrift.SET), 0, 12, byte(thrift.I16), 0, 0, 0, 1, 0, 5,
		byte(thrift.UUID), 0, 13, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		byte(thrift.BYTE), 0, 14, 9,
	}
	deep := slices.Concat(bytes.Repeat([]byte{byte(thrift.STRUCT), 0, 1}, 70), bytes.Repeat([]byte{0}, 71))
	for i, c := range cases {
		f.Add(uint8(i), uint8(0), slices.Concat(unknown, c.encoding(nil)))
		f.Add(uint8(i), uint8(0), deep)
	}
	f.Fuzz(func(t *testing.T, which, cfg uint8, data []byte) {
		c := cases[int(which)%len(cases)]
		conf := configs[int(cfg)%len(configs)]
		c.values(t, conf, data)
		c.wire(t, conf, data)
	})
}

// The cases cover every type the codec encodes: a type the IDL gains is checked once it is
// added to cases.
func TestCases_CoverTheCodec(t *testing.T) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "../../gen/zariscodec/codec.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var codec []string
	for _, d := range file.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Append") {
			codec = append(codec, strings.TrimPrefix(fn.Name.Name, "Append"))
		}
	}
	var checked []string
	for _, c := range cases {
		checked = append(checked, c.name)
	}
	slices.Sort(codec)
	slices.Sort(checked)
	if !slices.Equal(codec, checked) {
		t.Fatalf("gen/zariscodec encodes %v; the cases check %v: add a caseOf for each new type", codec, checked)
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
