package main

import (
	"fmt"
	"go/token"
	"strings"
)

// batchModel is what a multi-key operation adds to its opModel: where its items and
// results are, and how to read an item's key and guards.
type batchModel struct {
	// ItemsField is the Go name of the request's list of items.
	ItemsField string
	// Item is the Go type name of an item struct.
	Item string
	// KeyExpr is the Go expression for the routing key bytes of item it.
	KeyExpr string
	// Guards are the IDL names of the item fields that guard a replay.
	Guards []string
	// GuardExpr is the Go expression: does item it carry a guard.
	GuardExpr string
	// SizeExpr is the Go expression: about how many bytes item it adds to a request.
	SizeExpr string
	// ResultsField is the Go name of the response's list of per-item results.
	ResultsField string
	// Result is the Go type name of a per-item result struct.
	Result string
}

// buildBatch checks the annotations and shapes of a multi-key operation whose routing
// annotation is routing ("<list>[].<field>"). On failure it returns the field or annotation
// at fault and why.
func buildBatch(p *program, fn function, req, resp *structType, statusEnum string) (b *batchModel, field, msg string) {
	routing := fn.Annotations[annRouting]
	list, keyName, ok := strings.Cut(routing, "[].")
	if !ok || !token.IsIdentifier(list) || !token.IsIdentifier(keyName) {
		return nil, "annotation " + annRouting, fmt.Sprintf(`%q is not "<list field>[].<item field>"`, routing)
	}
	item, field, msg := listOfStructs(p, req, list, "request")
	if msg != "" {
		return nil, field, msg
	}
	b = &batchModel{ItemsField: goName(list), Item: goTypeName(item.Name)}
	kf := item.fieldByName(keyName)
	switch {
	case kf == nil:
		return nil, "field " + list + "[]." + keyName, fmt.Sprintf("routing-key field not found in item struct %s", item.Name)
	case kf.Required == "optional":
		return nil, "field " + list + "[]." + keyName, fmt.Sprintf("the routing-key field of %s must not be optional", item.Name)
	case kf.TypeID == "binary":
		b.KeyExpr = "it." + goName(keyName)
	case kf.TypeID == "string":
		b.KeyExpr = "[]byte(it." + goName(keyName) + ")"
	default:
		return nil, "field " + list + "[]." + keyName, fmt.Sprintf("the routing-key field must be binary or string, not %s", kf.TypeID)
	}

	results, ok := fn.Annotations[annResults]
	if !ok || results == "" {
		return nil, "annotation " + annResults, fmt.Sprintf("missing: a multi-key operation needs zaris.results naming the list of per-item results of %s", resp.Name)
	}
	if !token.IsIdentifier(results) {
		return nil, "annotation " + annResults, fmt.Sprintf("%q is not a field name", results)
	}
	result, field, msg := listOfStructs(p, resp, results, "response")
	if msg != "" {
		return nil, field, msg
	}
	if msg := statusField(p, result, "result", statusEnum); msg != "" {
		return nil, "field " + results + "[].status", msg
	}
	b.ResultsField, b.Result = goName(results), goTypeName(result.Name)

	var exprs []string
	if g := fn.Annotations[annGuards]; g != "" {
		for _, spec := range strings.Split(g, ",") {
			spec = strings.TrimSpace(spec)
			gl, name, ok := strings.Cut(spec, "[].")
			if !ok || gl != list || !token.IsIdentifier(name) {
				return nil, "annotation " + annGuards, fmt.Sprintf("%q is not %q followed by an item field", spec, list+"[].")
			}
			gf := item.fieldByName(name)
			if gf == nil {
				return nil, "field " + spec, fmt.Sprintf("guard field not found in item struct %s", item.Name)
			}
			if gf.Required != "optional" {
				return nil, "field " + spec, "a guard field must be optional, so that its absence means unguarded"
			}
			b.Guards = append(b.Guards, spec)
			exprs = append(exprs, guardExpr("it", gf))
		}
	}
	b.GuardExpr = "false"
	if len(exprs) > 0 {
		b.GuardExpr = strings.Join(exprs, " || ")
	}
	b.SizeExpr = sizeExpr("it", item)
	return b, "", ""
}

// fieldOverhead is what sizeExpr counts for each field of an item, and for the item itself:
// a field's header and length prefix in the binary protocol, with room to spare.
const fieldOverhead = 8

// sizeExpr is the Go expression for about how many bytes the item struct s named recv adds
// to a request: the lengths of its binary and string fields, and fieldOverhead for the
// item and for each field. A field of any other type counts its overhead only.
func sizeExpr(recv string, s *structType) string {
	terms := []string{fmt.Sprint(fieldOverhead * (len(s.Fields) + 1))}
	for _, f := range s.Fields {
		if f.TypeID == "binary" || f.TypeID == "string" {
			terms = append(terms, "len("+recv+".Get"+goName(f.Name)+"())")
		}
	}
	return strings.Join(terms, " + ")
}

// listOfStructs returns the struct type of the elements of s's field name, which must be a
// required list of structs declared in the IDL; what names s's role in messages.
func listOfStructs(p *program, s *structType, name, what string) (elem *structType, field, msg string) {
	f := s.fieldByName(name)
	switch {
	case f == nil:
		return nil, "field " + name, fmt.Sprintf("list field not found in %s struct %s", what, s.Name)
	case f.TypeID != "list" || f.Type == nil || f.Type.ElemTypeID != "struct" || f.Type.ElemType == nil:
		return nil, "field " + name, fmt.Sprintf("field %s of %s struct %s must be a list of structs, not %s", name, what, s.Name, f.TypeID)
	case f.Required == "optional":
		return nil, "field " + name, fmt.Sprintf("field %s of %s struct %s must not be optional", name, what, s.Name)
	}
	elem = p.structByName(f.Type.ElemType.Class)
	if elem == nil || !token.IsIdentifier(elem.Name) {
		return nil, "field " + name, fmt.Sprintf("element struct %q of %s is not declared in this IDL", f.Type.ElemType.Class, name)
	}
	return elem, "", ""
}
