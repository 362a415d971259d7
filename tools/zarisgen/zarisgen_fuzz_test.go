package main

import (
	"encoding/json"
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
//	go -C tools test -run '^$' -fuzz '^FuzzParseProgram$' -fuzztime 30s ./zarisgen
func FuzzParseProgram(f *testing.F) {
	minimal, err := os.ReadFile("testdata/minimal.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(minimal)
	f.Fuzz(checkGenerated)
}

// checkGenerated is the property of FuzzParseProgram and FuzzIDLNames for one input.
func checkGenerated(t *testing.T, data []byte) {
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
	want := map[string]bool{"New": true, "Dial": true, "Close": true, "Engine": true, "clusterMap": true, "wrongResponse": true}
	for _, op := range append(m.Ops, m.BatchOps...) {
		want[op.Name] = true
		want["invoke"+op.Name] = true
		want["status"+op.Name] = true
	}
	for _, d := range file.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && !want[fd.Name.Name] {
			t.Fatalf("generated source declares func %s, which the template does not:\n%s", fd.Name.Name, src)
		}
	}
}

// FuzzIDLNames starts from the JSON of idl/zaris.thrift (testdata/zaris.json, a snapshot of
// `thrift --gen json` output that need not track the IDL) and replaces the names and the doc
// of its first operation with arbitrary strings: the service, the operation, its doc, its
// routing and guard annotations and its request struct. The property is FuzzParseProgram's.
// Fuzz for longer with
//
//	go -C tools test -run '^$' -fuzz '^FuzzIDLNames$' -fuzztime 30s ./zarisgen
func FuzzIDLNames(f *testing.F) {
	base, err := os.ReadFile("testdata/zaris.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add("ZarisKv", "Get", "Reads a key.", "key", "", "GetRequest")
	f.Fuzz(func(t *testing.T, service, op, doc, routing, guards, request string) {
		var p map[string]any
		if err := json.Unmarshal(base, &p); err != nil {
			t.Fatal(err)
		}
		svc := p["services"].([]any)[0].(map[string]any)
		svc["name"] = service
		fn := svc["functions"].([]any)[0].(map[string]any)
		fn["name"], fn["doc"] = op, doc
		ann := fn["annotations"].(map[string]any)
		ann["zaris.routing"], ann["zaris.guards"] = routing, guards
		arg := fn["arguments"].([]any)[0].(map[string]any)
		arg["type"].(map[string]any)["class"] = request
		for _, st := range p["structs"].([]any) {
			if st := st.(map[string]any); st["name"] == "GetRequest" {
				st["name"] = request
			}
		}
		data, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		checkGenerated(t, data)
	})
}
