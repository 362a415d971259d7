package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The codec of the real IDL is the committed gen/zariscodec, and rendering it twice gives the
// same bytes.
func TestGoldenCodec(t *testing.T) {
	thriftBin := requireThrift(t)
	p, err := loadIDL(thriftBin, "../../idl/zaris.thrift")
	require.NoError(t, err)
	gen := func() map[string][]byte {
		m, err := buildCodec(p, "idl/zaris.thrift", defaultZarisImport, "zariscodec")
		require.NoError(t, err)
		out, err := renderCodec(m)
		require.NoError(t, err)
		return out
	}
	got := gen()
	require.Equal(t, got, gen(), "output must be deterministic")
	require.Len(t, got, 2)
	for _, name := range []string{codecFile, compactFile} {
		want, err := os.ReadFile("../../gen/zariscodec/" + name)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got[name]), "%s: regenerate with make generate", name)
	}
}

// The codec of an IDL with every kind of field it encodes (testdata/codectypes: scalars,
// enums, typedefs, nested lists, structs, exceptions, each required, optional and neither,
// out of id order; void, oneway and throwing operations) writes the library's bytes and
// reads what the library reads: a module of its own is generated and its test run.
func TestCodecOfEveryKind(t *testing.T) {
	thriftBin := requireThrift(t)
	newModule(t, thriftBin, "codectypes", "kinds")
	p, err := loadIDL(thriftBin, "idl/kinds.thrift")
	require.NoError(t, err)
	m, err := buildCodec(p, "idl/kinds.thrift", "example.com/kinds/gen/kinds", "kindscodec")
	require.NoError(t, err)
	files, err := renderCodec(m)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join("gen", "kindscodec"), 0o755))
	for name, src := range files {
		require.NoError(t, os.WriteFile(filepath.Join("gen", "kindscodec", name), src, 0o644))
	}

	out := goTestModule(t, "kinds")
	assert.Contains(t, out, "--- PASS: TestEveryKind")
}

// What the codec cannot encode as the Thrift Go generator's code does is refused, naming
// the IDL line.
func TestCodecRefuses(t *testing.T) {
	thriftBin := requireThrift(t)
	for _, tc := range []struct{ name, idl, want string }{
		{"map", "struct S { 1: map<string, i32> m }", "S.m: the codec does not encode the type map"},
		{"set", "struct S { 1: set<i32> s }", "S.s: the codec does not encode the type set"},
		{"default", "struct S { 1: optional i32 n = 3 }", "S.n: the codec does not encode a field with a default value"},
		{"union", "union U { 1: i32 a, 2: string b }", "union U: the codec does not encode unions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.thrift")
			require.NoError(t, os.WriteFile(path, []byte("namespace go x\n"+tc.idl+"\n"), 0o644))
			p, err := loadIDL(thriftBin, path)
			require.NoError(t, err)
			_, err = buildCodec(p, "x.thrift", "example.com/x", "xcodec")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "x.thrift:2: ")
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
