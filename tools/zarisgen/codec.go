package main

import (
	"fmt"
	"go/token"
	"path"
	"slices"
	"strings"
)

// codecFile and compactFile are the files zarisgen writes in the codec's output directory:
// the binary protocol (and what both protocols share), and the compact protocol.
const (
	codecFile   = "codec.go"
	compactFile = "compact.go"
)

// codecModel is what the codec template needs: every struct of the IDL and the argument and
// result structs of every operation of its service, each with its fields in the order the
// Thrift Go generator writes them (by field id).
type codecModel struct {
	Source, Version string
	// Package is the codec's Go package name, ZarisImport the Thrift-generated package's path.
	Package, ZarisImport string
	Structs              []codecStruct
}

// codecStruct is one struct the codec encodes and decodes.
type codecStruct struct {
	Name   string // the Go type name in the Thrift-generated package
	IDL    string // the IDL name (for an argument or result struct, the operation's and "_args" or "_result")
	Fields []codecField
}

// Required are the fields a decode must find, as the Thrift-generated Read requires them.
func (s codecStruct) Required() []codecField {
	var r []codecField
	for _, f := range s.Fields {
		if f.Required {
			r = append(r, f)
		}
	}
	return r
}

// codecField is one field of a codecStruct.
type codecField struct {
	ID     int
	GoName string
	Type   *codecType
	// Required: a decode that does not find it fails. Optional: written only when set
	// (non-nil), and a scalar is a pointer in Go.
	Required, Optional bool
}

// codecType is a field's or an element's type on the wire.
type codecType struct {
	Kind   string     // bool, byte, i16, i32, i64, double, string, binary, struct or list
	Struct string     // a struct's Go type name
	Elem   *codecType // a list's element type
}

// ttype is the Thrift wire type constant (in the generated package) of t.
func (t *codecType) ttype() string {
	switch t.Kind {
	case "string", "binary":
		return "tString"
	}
	return "t" + strings.ToUpper(t.Kind[:1]) + t.Kind[1:]
}

// TType is the wire type constant of the field's type.
func (f codecField) TType() string { return f.Type.ttype() }

// scalar reports whether the Go type of t is a value the Thrift Go generator makes a pointer
// when the field is optional.
func (t *codecType) scalar() bool {
	switch t.Kind {
	case "binary", "struct", "list":
		return false
	}
	return true
}

// Pointer reports whether the field is a Go pointer to a scalar (an optional scalar).
func (f codecField) Pointer() bool { return f.Optional && f.Type.scalar() }

// Encode is the Go statements that append the field (its header and value) to b in the
// binary protocol.
func (f codecField) Encode() string {
	var b strings.Builder
	fmt.Fprintf(&b, "b = appendField(b, %s, %d)\n", f.TType(), f.ID)
	encodeValue(&b, binaryWire, f.Type, f.value(), 0)
	return f.ifSet(b.String())
}

// CompactEncode is Encode for the compact protocol, where a bool field's value is its
// header's type.
func (f codecField) CompactEncode() string {
	var b strings.Builder
	if f.Type.Kind == "bool" {
		fmt.Fprintf(&b, "b = appendCompactField(b, compactBool(bool(%s)), %d, &last)\n", f.value(), f.ID)
	} else {
		fmt.Fprintf(&b, "b = appendCompactField(b, %s, %d, &last)\n", compactWire.elem(f.Type), f.ID)
		encodeValue(&b, compactWire, f.Type, f.value(), 0)
	}
	return f.ifSet(b.String())
}

// value is the expression of the field's value in v.
func (f codecField) value() string {
	if f.Pointer() {
		return "*v." + f.GoName
	}
	return "v." + f.GoName
}

// ifSet wraps the statements that write the field in a check that it is set, for an
// optional field.
func (f codecField) ifSet(stmts string) string {
	if f.Optional {
		return fmt.Sprintf("if v.%s != nil {\n%s}", f.GoName, stmts)
	}
	return strings.TrimSuffix(stmts, "\n")
}

// wireFormat is how the codec writes values in one protocol: the statement appending a
// value of each kind (%s the value; for a list, the element type and the length) and the
// name of an element type's constant.
type wireFormat struct {
	appendFn map[string]string
	elem     func(t *codecType) string
}

// scalarKind is how the codec reads a value of one scalar kind: read the decoder's method
// reading one, and set the suffix of the function storing it (set<set>, or setPtr<set> into
// a pointer).
type scalarKind struct {
	read, set string
}

// scalarKinds are the kinds encodeValue and decodeValue treat alike: all but binary, struct
// and list.
var scalarKinds = map[string]scalarKind{
	"bool":   {"bool", "Bool"},
	"byte":   {"i8", "Int"},
	"i16":    {"i16", "Int"},
	"i32":    {"i32", "Int"},
	"i64":    {"i64", "Int"},
	"double": {"double", "Float"},
	"string": {"string", "String"},
}

// appendStatements has, per kind, the statement appending a value in the binary protocol
// (first) and in compact (second). Compact writes integers as zigzag varints (an i16 as an
// i32), doubles little-endian, and a bool in a list as a byte (1 true, 2 false).
var appendStatements = map[string][2]string{
	"bool":   {"b = appendBool(b, bool(%s))\n", "b = appendCompactBool(b, bool(%s))\n"},
	"byte":   {"b = append(b, byte(%s))\n", "b = append(b, byte(%s))\n"},
	"i16":    {"b = appendI16(b, int16(%s))\n", "b = appendCompactI32(b, int32(%s))\n"},
	"i32":    {"b = appendI32(b, int32(%s))\n", "b = appendCompactI32(b, int32(%s))\n"},
	"i64":    {"b = appendI64(b, int64(%s))\n", "b = appendCompactI64(b, int64(%s))\n"},
	"double": {"b = appendDouble(b, float64(%s))\n", "b = appendCompactDouble(b, float64(%s))\n"},
	"string": {"b = appendString(b, string(%s))\n", "b = appendCompactString(b, string(%s))\n"},
	"binary": {"b = appendBinary(b, %s)\n", "b = appendCompactBinary(b, %s)\n"},
	"struct": {"b = Append%s(b, %s)\n", "b = AppendCompact%s(b, %s)\n"},
	"list":   {"b = appendList(b, %s, len(%s))\n", "b = appendCompactList(b, %s, len(%s))\n"},
}

// appendsOf returns the statements of one protocol of appendStatements: 0 binary, 1 compact.
func appendsOf(protocol int) map[string]string {
	m := make(map[string]string, len(appendStatements))
	for kind, st := range appendStatements {
		m[kind] = st[protocol]
	}
	return m
}

// binaryWire is the binary protocol.
var binaryWire = wireFormat{appendFn: appendsOf(0), elem: (*codecType).ttype}

// compactWire is the compact protocol.
var compactWire = wireFormat{
	appendFn: appendsOf(1),
	elem: func(t *codecType) string {
		switch t.Kind {
		case "bool":
			return "cTrue"
		case "string", "binary":
			return "cBinary"
		}
		return "c" + strings.ToUpper(t.Kind[:1]) + t.Kind[1:]
	},
}

// encodeValue writes the statements that append the value v of type t to b in the protocol
// w; depth names the loop variables of nested lists.
func encodeValue(b *strings.Builder, w wireFormat, t *codecType, v string, depth int) {
	switch t.Kind {
	case "struct":
		fmt.Fprintf(b, w.appendFn[t.Kind], t.Struct, v)
	case "list":
		e := fmt.Sprintf("e%d", depth)
		fmt.Fprintf(b, w.appendFn[t.Kind], w.elem(t.Elem), v)
		fmt.Fprintf(b, "for _, %s := range %s {\n", e, v)
		encodeValue(b, w, t.Elem, e, depth+1)
		b.WriteString("}\n")
	default:
		fmt.Fprintf(b, w.appendFn[t.Kind], v)
	}
}

// Decode is the Go statements that decode the field's value, its header read, into v; on an
// error they return it.
func (f codecField) Decode() string {
	var b strings.Builder
	decodeValue(&b, f.Type, "v."+f.GoName, f.Pointer(), 0)
	return strings.TrimSuffix(b.String(), "\n")
}

// CompactDecode is Decode for the compact protocol, where a bool field's value came with its
// header (compactDecoder.fieldBool).
func (f codecField) CompactDecode() string {
	if f.Type.Kind != "bool" {
		return f.Decode()
	}
	if f.Pointer() {
		return fmt.Sprintf("setPtrBool(&v.%s, d.fieldBool)", f.GoName)
	}
	return fmt.Sprintf("setBool(&v.%s, d.fieldBool)", f.GoName)
}

// decodeValue writes the statements that decode a value of type t into dst, an addressable
// expression (a pointer to it when ptr).
func decodeValue(b *strings.Builder, t *codecType, dst string, ptr bool, depth int) {
	set := "set"
	if ptr {
		set = "setPtr"
	}
	if k, ok := scalarKinds[t.Kind]; ok {
		fmt.Fprintf(b, "x, err := d.%s()\nif err != nil {\nreturn err\n}\n%s%s(&%s, x)\n", k.read, set, k.set, dst)
		return
	}
	switch t.Kind {
	case "binary":
		fmt.Fprintf(b, "x, err := d.binary()\nif err != nil {\nreturn err\n}\n%s = x\n", dst)
	case "struct":
		fmt.Fprintf(b, "%s = new(zaris.%s)\nif err := d.decode%s(%s); err != nil {\nreturn err\n}\n", dst, t.Struct, t.Struct, dst)
	case "list":
		n, l, i, s := fmt.Sprintf("n%d", depth), fmt.Sprintf("l%d", depth), fmt.Sprintf("i%d", depth), fmt.Sprintf("s%d", depth)
		fmt.Fprintf(b, "%s, err := d.listBegin()\nif err != nil {\nreturn err\n}\n%s := makeSlice(%s, %s)\n", n, l, dst, n)
		elem := l + "[" + i + "]"
		if t.Elem.Kind == "struct" {
			// One allocation holds every element of the list.
			fmt.Fprintf(b, "%s := make([]zaris.%s, %s)\nfor %s := range %s {\n%s = &%s[%s]\n", s, t.Elem.Struct, n, i, l, elem, s, i)
			fmt.Fprintf(b, "if err := d.decode%s(%s); err != nil {\nreturn err\n}\n}\n", t.Elem.Struct, elem)
		} else {
			fmt.Fprintf(b, "for %s := range %s {\n", i, l)
			decodeValue(b, t.Elem, elem, false, depth+1)
			b.WriteString("}\n")
		}
		fmt.Fprintf(b, "%s = %s\n", dst, l)
	}
}

// buildCodec derives the codec's model from p: every struct, then every operation's argument
// and result structs. It refuses what the codec cannot encode as the Thrift Go generator's
// code does: maps, sets, unions, UUIDs and default values.
func buildCodec(p *program, source, zarisImport, pkg string) (*codecModel, error) {
	m := &codecModel{Source: source, Version: version, Package: pkg, ZarisImport: zarisImport}
	for _, s := range p.Structs {
		if s.IsUnion {
			where := pos(source, p.declLine("union", s.Name))
			return nil, &specError{Pos: where, Field: "union " + s.Name, Msg: "the codec does not encode unions"}
		}
		cs, err := codecStructOf(p, goTypeName(s.Name), s.Name, s.Fields, func(f field) string { return pos(source, p.fieldLine(s.Name, f.Name)) })
		if err != nil {
			return nil, err
		}
		m.Structs = append(m.Structs, cs)
	}
	for _, svc := range p.Services {
		for _, fn := range svc.Functions {
			at := func(field) string { return pos(source, p.functionLine(svc.Name, fn.Name)) }
			prefix := goName(svc.Name) + goName(fn.Name)
			args, err := codecStructOf(p, prefix+"Args", fn.Name+"_args", fn.Arguments, at)
			if err != nil {
				return nil, err
			}
			m.Structs = append(m.Structs, args)
			if fn.Oneway {
				continue
			}
			fields := slices.Clone(fn.Exceptions)
			for i := range fields {
				fields[i].Required = "optional"
			}
			if fn.ReturnTypeID != "void" {
				ret := field{Key: 0, Name: "success", TypeID: fn.ReturnTypeID, Required: "optional"}
				if fn.ReturnType != nil {
					ret.Type = &struct {
						Class      string   `json:"class"`
						ElemTypeID string   `json:"elemTypeId"`
						ElemType   *typeRef `json:"elemType"`
					}{fn.ReturnType.Class, fn.ReturnType.ElemTypeID, fn.ReturnType.ElemType}
				}
				fields = append([]field{ret}, fields...)
			}
			res, err := codecStructOf(p, prefix+"Result", fn.Name+"_result", fields, at)
			if err != nil {
				return nil, err
			}
			m.Structs = append(m.Structs, res)
		}
	}
	return m, nil
}

// codecStructOf is the codec's view of a struct named goName (in Go) and idl whose fields
// are fields; at is where a field's error points.
func codecStructOf(p *program, goName, idl string, fields []field, at func(field) string) (codecStruct, error) {
	cs := codecStruct{Name: goName, IDL: idl}
	for _, f := range fields {
		fail := func(msg string) (codecStruct, error) {
			return codecStruct{}, &specError{Pos: at(f), Field: fmt.Sprintf("%s.%s", idl, f.Name), Msg: msg}
		}
		if len(f.Default) > 0 {
			return fail("the codec does not encode a field with a default value")
		}
		var ref *typeRef
		if f.Type != nil {
			ref = &typeRef{TypeID: f.TypeID, Class: f.Type.Class, ElemTypeID: f.Type.ElemTypeID, ElemType: f.Type.ElemType}
		}
		t, err := codecTypeOf(p, f.TypeID, ref)
		if err != nil {
			return fail(err.Error())
		}
		if f.Key < -32768 || f.Key > 32767 {
			return fail(fmt.Sprintf("field id %d is not an i16", f.Key))
		}
		cs.Fields = append(cs.Fields, codecField{ID: f.Key, GoName: goNameOfField(f.Name), Type: t,
			Required: f.Required == "required", Optional: f.Required == "optional"})
	}
	slices.SortStableFunc(cs.Fields, func(a, b codecField) int { return a.ID - b.ID })
	return cs, nil
}

// goNameOfField is the Go name the Thrift Go generator gives a field.
func goNameOfField(name string) string { return goName(name) }

// codecTypeOf is the codec's type for typeID, with ref its details (a struct's class, a
// list's element type).
func codecTypeOf(p *program, typeID string, ref *typeRef) (*codecType, error) {
	switch typeID {
	case "bool", "byte", "i8", "i16", "i32", "i64", "double", "string", "binary":
		if typeID == "i8" {
			typeID = "byte"
		}
		return &codecType{Kind: typeID}, nil
	case "struct", "exception":
		if ref == nil || ref.Class == "" {
			return nil, fmt.Errorf("a struct type with no name")
		}
		if strings.Contains(ref.Class, ".") {
			return nil, fmt.Errorf("struct %s comes from an included file: the codec encodes only this IDL's structs", ref.Class)
		}
		s := p.structByName(ref.Class)
		if s == nil {
			return nil, fmt.Errorf("struct %s is not declared in this IDL", ref.Class)
		}
		if s.IsUnion {
			return nil, fmt.Errorf("the codec does not encode unions (%s)", ref.Class)
		}
		return &codecType{Kind: "struct", Struct: goTypeName(ref.Class)}, nil
	case "list":
		if ref == nil || ref.ElemTypeID == "" {
			return nil, fmt.Errorf("a list with no element type")
		}
		elem, err := codecTypeOf(p, ref.ElemTypeID, ref.ElemType)
		if err != nil {
			return nil, err
		}
		return &codecType{Kind: "list", Elem: elem}, nil
	}
	return nil, fmt.Errorf("the codec does not encode the type %s (it encodes bool, byte, i16, i32, i64, double, string, binary, enums, structs and lists of them)", typeID)
}

// codecImport is the import path of the codec written to dir: a sibling of the
// Thrift-generated package zarisImport, named after dir.
func codecImport(zarisImport, dir string) string {
	return path.Join(path.Dir(zarisImport), path.Base(pathSlash(dir)))
}

func pathSlash(dir string) string { return strings.TrimRight(strings.ReplaceAll(dir, `\`, "/"), "/") }

// renderCodec renders the codec for m: its files' contents by name.
func renderCodec(m *codecModel) (map[string][]byte, error) {
	if !token.IsIdentifier(m.Package) {
		return nil, fmt.Errorf("zarisgen: codec package name %q is not an identifier", m.Package)
	}
	files := map[string][]byte{}
	for name, tmpl := range map[string]string{codecFile: "codec.go.tmpl", compactFile: "compact.go.tmpl"} {
		var buf strings.Builder
		if err := templates.ExecuteTemplate(&buf, tmpl, m); err != nil {
			return nil, fmt.Errorf("zarisgen: rendering the codec: %w", err)
		}
		src, err := formatSource([]byte(buf.String()), "the codec")
		if err != nil {
			return nil, err
		}
		files[name] = src
	}
	return files, nil
}
