package main

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// FuzzParseProgram feeds arbitrary bytes to the generator as `thrift --gen json` output. It
// must never panic; it must either reject the input with an error that says what is wrong
// with the JSON or names the operation and field at fault (a *specError), or write Go source
// that parses and declares only what the template declares, so that nothing from the IDL
// (a name, a doc comment) can break or inject code. Seeds: testdata/fuzz/FuzzParseProgram
// and testdata/minimal.json. Fuzz for longer with
//
//	go test -run '^$' -fuzz '^FuzzParseProgram$' -fuzztime 30s ./tools/zarisgen
func FuzzParseProgram(f *testing.F) {
	minimal, err := os.ReadFile("testdata/minimal.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(minimal)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parseProgram(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "decoding thrift JSON: ") {
				t.Fatalf("a decoding error that does not say so: %v", err)
			}
			return
		}
		src, err := generate(p, "fuzz.thrift", defaultZarisImport)
		if err != nil {
			var se *specError
			if !errors.As(err, &se) {
				t.Fatalf("accepted an IDL it cannot render: %v", err)
			}
			return
		}
		m, err := buildModel(p, "fuzz.thrift", defaultZarisImport)
		if err != nil {
			t.Fatalf("generate succeeded but buildModel fails: %v", err)
		}
		file, err := parser.ParseFile(token.NewFileSet(), "zarisclient.go", src, parser.ParseComments)
		if err != nil {
			t.Fatalf("generated source does not parse: %v\n%s", err, src)
		}
		want := map[string]bool{"New": true}
		for _, op := range m.Ops {
			want[op.Name] = true
			want["invoke"+op.Name] = true
		}
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && !want[fd.Name.Name] {
				t.Fatalf("generated source declares func %s, which the template does not:\n%s", fd.Name.Name, src)
			}
		}
	})
}
