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
	if b.KeyExpr, field, msg = routingKeyExpr(item, list, keyName); msg != "" {
		return nil, field, msg
	}
	if field, msg = b.addResults(p, fn, resp, statusEnum); msg != "" {
		return nil, field, msg
	}
	if field, msg = b.addGuards(fn, item, list); msg != "" {
		return nil, field, msg
	}
	b.SizeExpr = sizeExpr("it", item)
	return b, "", ""
}

// routingKeyExpr is the Go expression of the routing key of an item named it, the item
// struct's field keyName, which must be binary or string and not optional; list is the
// request's field of items. On failure it returns the field at fault and why.
func routingKeyExpr(item *structType, list, keyName string) (expr, field, msg string) {
	kf := item.fieldByName(keyName)
	switch {
	case kf == nil:
		return "", "field " + list + "[]." + keyName, fmt.Sprintf("routing-key field not found in item struct %s", item.Name)
	case kf.Required == "optional":
		return "", "field " + list + "[]." + keyName, fmt.Sprintf("the routing-key field of %s must not be optional", item.Name)
	case kf.TypeID == "binary":
		return "it." + goName(keyName), "", ""
	case kf.TypeID == "string":
		return "[]byte(it." + goName(keyName) + ")", "", ""
	default:
		return "", "field " + list + "[]." + keyName, fmt.Sprintf("the routing-key field must be binary or string, not %s", kf.TypeID)
	}
}

// addResults checks the operation's zaris.results annotation, which must name a list of
// per-item result structs in the response resp whose field 1 is the status, and records the
// list and the struct in b. On failure it returns the field or annotation at fault and why.
func (b *batchModel) addResults(p *program, fn function, resp *structType, statusEnum string) (field, msg string) {
	results, ok := fn.Annotations[annResults]
	if !ok || results == "" {
		return "annotation " + annResults, fmt.Sprintf("missing: a multi-key operation needs zaris.results naming the list of per-item results of %s", resp.Name)
	}
	if !token.IsIdentifier(results) {
		return "annotation " + annResults, fmt.Sprintf("%q is not a field name", results)
	}
	result, field, msg := listOfStructs(p, resp, results, "response")
	if msg != "" {
		return field, msg
	}
	if msg := statusField(p, result, "result", statusEnum); msg != "" {
		return "field " + results + "[].status", msg
	}
	b.ResultsField, b.Result = goName(results), goTypeName(result.Name)
	return "", ""
}

// addGuards checks the operation's zaris.guards annotation, a comma-separated list of
// optional fields of the item struct, each as "<list>[].<field>", and records them and the
// Go expression that reports whether an item named it sets any ("false" for none) in b. On
// failure it returns the field or annotation at fault and why.
func (b *batchModel) addGuards(fn function, item *structType, list string) (field, msg string) {
	var exprs []string
	if g := fn.Annotations[annGuards]; g != "" {
		for _, spec := range strings.Split(g, ",") {
			spec = strings.TrimSpace(spec)
			gl, name, ok := strings.Cut(spec, "[].")
			if !ok || gl != list || !token.IsIdentifier(name) {
				return "annotation " + annGuards, fmt.Sprintf("%q is not %q followed by an item field", spec, list+"[].")
			}
			gf := item.fieldByName(name)
			if gf == nil {
				return "field " + spec, fmt.Sprintf("guard field not found in item struct %s", item.Name)
			}
			if gf.Required != "optional" {
				return "field " + spec, "a guard field must be optional, so that its absence means unguarded"
			}
			b.Guards = append(b.Guards, spec)
			exprs = append(exprs, guardExpr("it", gf))
		}
	}
	b.GuardExpr = "false"
	if len(exprs) > 0 {
		b.GuardExpr = strings.Join(exprs, " || ")
	}
	return "", ""
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
