package main

import (
	"fmt"
	"strings"
)

// serverMethod is one method of the service's generated Go interface, as the Unimplemented
// base implements it.
type serverMethod struct {
	// Name is the Go method name, IDLName the operation's name in the IDL.
	Name, IDLName string
	// Params and Results are the Go parameter and result lists, without names.
	Params, Results string
	// Return is what the method returns: the zero values and the error.
	Return string
}

// goBaseTypes maps the Thrift base types to Go types and their zero values.
var goBaseTypes = map[string][2]string{
	"bool": {"bool", "false"}, "byte": {"int8", "0"}, "i8": {"int8", "0"}, "i16": {"int16", "0"},
	"i32": {"int32", "0"}, "i64": {"int64", "0"}, "double": {"float64", "0"},
	"string": {"string", `""`}, "binary": {"[]byte", "nil"},
}

// goTypeOf is the Go type and zero value of a parameter or result of Thrift type typeID
// (class names the struct), as the Thrift Go generator writes it.
func goTypeOf(typeID string, ref *typeRef) (typ, zero string, ok bool) {
	if t, ok := goBaseTypes[typeID]; ok {
		return t[0], t[1], true
	}
	if (typeID == "struct" || typeID == "exception" || typeID == "union") && ref != nil && !strings.Contains(ref.Class, ".") {
		return "*zaris." + goTypeName(ref.Class), "nil", true
	}
	return "", "", false
}

// buildServer derives the methods of the Unimplemented base from every function of the
// service, admin operations included. A parameter or result type it cannot write (a
// container, or a type from an include) is refused.
func buildServer(p *program, svc service) ([]serverMethod, error) {
	var out []serverMethod
	for _, fn := range svc.Functions {
		fail := func(what string) error {
			return &specError{Pos: pos(p.source, p.functionLine(svc.Name, fn.Name)), Op: fn.Name, Field: what,
				Msg: "zarisgen cannot write this type in the Unimplemented base: use a struct or a base type"}
		}
		params := []string{"context.Context"}
		for _, a := range fn.Arguments {
			var ref *typeRef
			if a.Type != nil {
				ref = &typeRef{TypeID: a.TypeID, Class: a.Type.Class}
			}
			t, _, ok := goTypeOf(a.TypeID, ref)
			if !ok {
				return nil, fail("argument " + a.Name)
			}
			params = append(params, t)
		}
		m := serverMethod{Name: goName(fn.Name), IDLName: fn.Name, Params: strings.Join(params, ", ")}
		err := fmt.Sprintf("unimplemented(%q)", fn.Name)
		if fn.ReturnTypeID == "void" {
			m.Results, m.Return = "error", err
		} else {
			t, zero, ok := goTypeOf(fn.ReturnTypeID, fn.ReturnType)
			if !ok {
				return nil, fail("response")
			}
			m.Results, m.Return = "("+t+", error)", zero+", "+err
		}
		out = append(out, m)
	}
	return out, nil
}
