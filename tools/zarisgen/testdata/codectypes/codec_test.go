package kinds_test

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"example.com/kinds/gen/kinds"
	"example.com/kinds/gen/kindscodec"
)

// binary and compact are the library's protocols the codec speaks.
var (
	binary  = func(t thrift.TTransport) thrift.TProtocol { return thrift.NewTBinaryProtocolConf(t, nil) }
	compact = func(t thrift.TTransport) thrift.TProtocol { return thrift.NewTCompactProtocolConf(t, nil) }
)

// check encodes values of *T filled at random with the generated codec and the library's
// protocol proto and compares the bytes, then decodes them (and each of them cut short) with
// both and compares.
func check[T any, P interface {
	*T
	thrift.TStruct
}](t *testing.T, proto func(thrift.TTransport) thrift.TProtocol, app func([]byte, P) []byte, dec func([]byte, P, *thrift.TConfiguration) (int, error)) {
	name := reflect.TypeFor[T]().Name()
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		v := P(new(T))
		fill(reflect.ValueOf(v).Elem(), r, 0)
		buf := thrift.NewTMemoryBuffer()
		if err := v.Write(context.Background(), proto(buf)); err != nil {
			t.Fatal(err)
		}
		want := buf.Bytes()
		if got := app(nil, v); !bytes.Equal(got, want) {
			t.Fatalf("%s %+v: generated %x, the library %x", name, v, got, want)
		}
		for _, in := range [][]byte{want, want[:r.IntN(len(want))]} {
			b := thrift.NewTMemoryBuffer()
			b.Write(in)
			lib := P(new(T))
			libErr := lib.Read(context.Background(), proto(b))
			got := P(new(T))
			_, err := dec(bytes.Clone(in), got, nil)
			if (err == nil) != (libErr == nil) {
				t.Fatalf("%s from %x: generated %v, the library %v", name, in, err, libErr)
			}
			if err == nil && !reflect.DeepEqual(got, lib) {
				t.Fatalf("%s from %x: generated %+v, the library %+v", name, in, got, lib)
			}
		}
	}
}

func fill(v reflect.Value, r *rand.Rand, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		if depth > 4 || r.IntN(3) == 0 {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), r, depth+1)
	case reflect.Slice:
		if depth > 4 || r.IntN(4) == 0 {
			return
		}
		n := r.IntN(4)
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			fill(v.Index(i), r, depth+1)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), r, depth)
			}
		}
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 1)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(r.Uint64()))
	case reflect.Uint8:
		v.SetUint(uint64(r.UintN(256)))
	case reflect.Float64:
		if f := math.Float64frombits(r.Uint64()); !math.IsNaN(f) {
			v.SetFloat(f)
		}
	case reflect.String:
		v.SetString(string(rune('a' + r.IntN(26))))
	}
}

func TestEveryKind(t *testing.T) {
	check(t, binary, kindscodec.AppendLeaf, kindscodec.DecodeLeaf)
	check(t, binary, kindscodec.AppendEverything, kindscodec.DecodeEverything)
	check(t, binary, kindscodec.AppendEmpty, kindscodec.DecodeEmpty)
	check(t, binary, kindscodec.AppendGaps, kindscodec.DecodeGaps)
	check(t, binary, kindscodec.AppendRefused, kindscodec.DecodeRefused)
	check(t, binary, kindscodec.AppendKindsEchoArgs, kindscodec.DecodeKindsEchoArgs)
	check(t, binary, kindscodec.AppendKindsEchoResult, kindscodec.DecodeKindsEchoResult)
	check(t, binary, kindscodec.AppendKindsNothingArgs, kindscodec.DecodeKindsNothingArgs)
	check(t, binary, kindscodec.AppendKindsNothingResult, kindscodec.DecodeKindsNothingResult)
	check(t, binary, kindscodec.AppendKindsFireArgs, kindscodec.DecodeKindsFireArgs)
	check(t, binary, kindscodec.AppendKindsLeavesArgs, kindscodec.DecodeKindsLeavesArgs)
	check(t, binary, kindscodec.AppendKindsLeavesResult, kindscodec.DecodeKindsLeavesResult)
	check(t, compact, kindscodec.AppendCompactLeaf, kindscodec.DecodeCompactLeaf)
	check(t, compact, kindscodec.AppendCompactEverything, kindscodec.DecodeCompactEverything)
	check(t, compact, kindscodec.AppendCompactEmpty, kindscodec.DecodeCompactEmpty)
	check(t, compact, kindscodec.AppendCompactGaps, kindscodec.DecodeCompactGaps)
	check(t, compact, kindscodec.AppendCompactRefused, kindscodec.DecodeCompactRefused)
	check(t, compact, kindscodec.AppendCompactKindsEchoArgs, kindscodec.DecodeCompactKindsEchoArgs)
	check(t, compact, kindscodec.AppendCompactKindsEchoResult, kindscodec.DecodeCompactKindsEchoResult)
	check(t, compact, kindscodec.AppendCompactKindsNothingArgs, kindscodec.DecodeCompactKindsNothingArgs)
	check(t, compact, kindscodec.AppendCompactKindsNothingResult, kindscodec.DecodeCompactKindsNothingResult)
	check(t, compact, kindscodec.AppendCompactKindsFireArgs, kindscodec.DecodeCompactKindsFireArgs)
	check(t, compact, kindscodec.AppendCompactKindsLeavesArgs, kindscodec.DecodeCompactKindsLeavesArgs)
	check(t, compact, kindscodec.AppendCompactKindsLeavesResult, kindscodec.DecodeCompactKindsLeavesResult)
	var e kinds.Everything
	_ = e.OptColor // an optional enum is a pointer to the enum type
}
