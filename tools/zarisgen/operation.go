package main

import (
	"fmt"
	"go/token"
	"strings"
)

// One operation of the service, checked against what its typed method needs.

// buildOp checks one function. It reports data=false for admin operations, which get no
// typed method.
func buildOp(p *program, svc, statusEnum string, fn function) (opModel, bool, error) {
	c := opCheck{p: p, fn: fn, line: p.functionLine(svc, fn.Name)}
	kind, err := c.kind()
	if err != nil || kind == "admin" {
		return opModel{}, false, err
	}
	// The doc becomes part of a one-line comment: a line break in it would end the comment
	// and put the rest of the doc into the generated code, and a control character or a
	// byte-order mark is not allowed in Go source at all (see commentText).
	op := opModel{Name: goName(fn.Name), IDLName: fn.Name, Doc: commentText(fn.Doc), Kind: kind}
	if op.Idempotent, err = c.idempotent(); err != nil {
		return opModel{}, false, err
	}
	req, resp, err := c.structs(&op)
	if err != nil {
		return opModel{}, false, err
	}
	routing, ok := fn.Annotations[annRouting]
	if !ok || routing == "" {
		return opModel{}, false, c.fail("annotation "+annRouting, "missing: a data operation needs zaris.routing naming its routing-key field of %s", req.Name)
	}
	if field, msg := checkResponse(p, resp, statusEnum); msg != "" {
		return opModel{}, false, c.fail(field, "%s", msg)
	}
	if strings.Contains(routing, "[]") {
		op, err = c.multiKey(op, req, resp, statusEnum, routing)
	} else {
		op, err = c.singleKey(op, req, resp, routing)
	}
	if err != nil {
		return opModel{}, false, err
	}
	return op, true, nil
}

// opCheck checks one function fn, declared at line of p's IDL, for buildOp.
type opCheck struct {
	p    *program
	fn   function
	line int
}

// fail is the *specError of a fault in field of the operation: at the line of the
// annotation when field is "annotation <key>", else at the function's line.
func (c opCheck) fail(field, format string, args ...any) error {
	l := c.line
	if key, ok := strings.CutPrefix(field, "annotation "); ok {
		l = c.p.annotationLine(c.line, key)
	}
	return &specError{Pos: pos(c.p.source, l), Op: c.fn.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// kind checks the function's name, that it is not oneway, and its annotations, and returns
// its zaris.kind: "read", "write" or "admin".
func (c opCheck) kind() (string, error) {
	fn := c.fn
	if !token.IsIdentifier(fn.Name) {
		return "", &specError{Pos: pos(c.p.source, c.line), Msg: fmt.Sprintf("operation name %q is not an identifier", fn.Name)}
	}
	if fn.Oneway {
		return "", c.fail("oneway", "a oneway operation gets no reply, so its status cannot be read; declare it without oneway, returning a response struct")
	}
	if err := checkAnnotations(fn.Annotations, opAnnotations, func(key, msg string) error {
		return c.fail("annotation "+key, "%s", msg)
	}); err != nil {
		return "", err
	}
	kind, ok := fn.Annotations[annKind]
	if !ok {
		return "", c.fail("annotation "+annKind, `missing: every operation needs zaris.kind = "read", "write" or "admin"`)
	}
	switch kind {
	case "read", "write", "admin":
		return kind, nil
	default:
		return "", c.fail("annotation "+annKind, `unknown value %q (want "read", "write" or "admin")`, kind)
	}
}

// idempotent returns the data operation's zaris.idempotent.
func (c opCheck) idempotent() (bool, error) {
	idem, ok := c.fn.Annotations[annIdempotent]
	if !ok {
		return false, c.fail("annotation "+annIdempotent, `missing: a data operation needs zaris.idempotent = "true" or "false"`)
	}
	switch idem {
	case "true":
		return true, nil
	case "false":
		return false, nil
	default:
		return false, c.fail("annotation "+annIdempotent, `unknown value %q (want "true" or "false")`, idem)
	}
}

// structs returns the data operation's request struct (its one argument) and response
// struct (its return type), each declared in this IDL, and names them in op.
func (c opCheck) structs(op *opModel) (req, resp *structType, err error) {
	fn := c.fn
	if len(fn.Arguments) != 1 || fn.Arguments[0].TypeID != "struct" || fn.Arguments[0].Type == nil {
		return nil, nil, c.fail("arguments", "a data operation takes exactly one request struct")
	}
	if req, err = c.declared("arguments", "request", fn.Arguments[0].Type.Class); err != nil {
		return nil, nil, err
	}
	op.Request = goTypeName(req.Name)
	op.ArgField = goName(fn.Arguments[0].Name)
	if fn.ReturnTypeID != "struct" || fn.ReturnType == nil {
		return nil, nil, c.fail("response", "a data operation returns a response struct")
	}
	if resp, err = c.declared("response", "response", fn.ReturnType.Class); err != nil {
		return nil, nil, err
	}
	op.Response = goTypeName(resp.Name)
	return req, resp, nil
}

// declared returns the struct named class, the operation's request or response (what),
// which must be declared in this IDL under a Go identifier; a fault is in field.
func (c opCheck) declared(field, what, class string) (*structType, error) {
	if strings.Contains(class, ".") {
		return nil, c.fail(field, "%s struct %s comes from an included file: structs from an include are not supported, declare it in this IDL", what, class)
	}
	s := c.p.structByName(class)
	if s != nil && !token.IsIdentifier(s.Name) {
		return nil, c.fail(field, "%s struct name %q is not an identifier", what, s.Name)
	}
	if s == nil {
		return nil, c.fail(field, "%s struct %q is not declared in this IDL", what, class)
	}
	return s, nil
}

// multiKey completes op, a multi-key operation (zaris.routing = "<list>[].<field>"): its
// items, their routing and guards (buildBatch). Such an operation takes no request token.
func (c opCheck) multiKey(op opModel, req, resp *structType, statusEnum, routing string) (opModel, error) {
	b, field, msg := buildBatch(c.p, c.fn, req, resp, statusEnum)
	if msg != "" {
		return opModel{}, c.fail(field, "%s", msg)
	}
	op.RoutingField, op.Guards, op.Batch = routing, b.Guards, b
	if d, ok := c.fn.Annotations[annDedup]; ok {
		_, field, msg := buildDedup(c.p, op, req, resp, d)
		return opModel{}, c.fail(field, "%s", msg)
	}
	return op, nil
}

// singleKey completes op, an operation on one key: its routing-key field, its guards and
// its request token.
func (c opCheck) singleKey(op opModel, req, resp *structType, routing string) (opModel, error) {
	if _, ok := c.fn.Annotations[annResults]; ok {
		return opModel{}, c.fail("annotation "+annResults, `only a multi-key operation (zaris.routing = "<list>[].<field>") has per-item results`)
	}
	expr, err := c.routingKey(req, routing)
	if err != nil {
		return opModel{}, err
	}
	op.RoutingField, op.RoutingExpr = routing, expr
	if op.Guards, op.GuardExpr, err = c.guards(req); err != nil {
		return opModel{}, err
	}
	if d, ok := c.fn.Annotations[annDedup]; ok {
		dm, field, msg := buildDedup(c.p, op, req, resp, d)
		if msg != "" {
			return opModel{}, c.fail(field, "%s", msg)
		}
		op.Dedup = dm
	}
	return op, nil
}

// routingKey returns the Go expression for the routing key of req, the request struct,
// read from its field named routing: a required binary or string.
func (c opCheck) routingKey(req *structType, routing string) (string, error) {
	if !token.IsIdentifier(routing) {
		return "", c.fail("annotation "+annRouting, "%q is not a field name", routing)
	}
	rf := req.fieldByName(routing)
	if rf == nil {
		return "", c.fail("field "+routing, "routing-key field not found in request struct %s", req.Name)
	}
	if rf.Required == "optional" {
		return "", c.fail("field "+routing, "the routing-key field of %s must not be optional", req.Name)
	}
	switch rf.TypeID {
	case "binary":
		return "req." + goName(routing), nil
	case "string":
		return "[]byte(req." + goName(routing) + ")", nil
	default:
		return "", c.fail("field "+routing, "the routing-key field must be binary or string, not %s", rf.TypeID)
	}
}

// guards returns the optional fields of req that zaris.guards names, and the Go
// expression that tells whether req carries any of them ("false" when there are none).
func (c opCheck) guards(req *structType) (names []string, expr string, err error) {
	var exprs []string
	if g := c.fn.Annotations[annGuards]; g != "" {
		for _, name := range strings.Split(g, ",") {
			name = strings.TrimSpace(name)
			if !token.IsIdentifier(name) {
				return nil, "", c.fail("annotation "+annGuards, "%q is not a field name", name)
			}
			gf := req.fieldByName(name)
			if gf == nil {
				return nil, "", c.fail("field "+name, "guard field not found in request struct %s", req.Name)
			}
			if gf.Required != "optional" {
				return nil, "", c.fail("field "+name, "a guard field must be optional, so that its absence means unguarded")
			}
			names = append(names, name)
			exprs = append(exprs, guardExpr("req", gf))
		}
	}
	if len(exprs) == 0 {
		return names, "false", nil
	}
	return names, strings.Join(exprs, " || "), nil
}

// guardExpr is the Go expression that reports whether recv carries the guard field f: a
// bool guard when it is true, any other when it is set.
func guardExpr(recv string, f *field) string {
	if f.TypeID == "bool" {
		return recv + ".Get" + goName(f.Name) + "()"
	}
	return recv + ".IsSet" + goName(f.Name) + "()"
}
