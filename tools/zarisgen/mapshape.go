package main

import (
	"fmt"
	"strings"
)

// The map operation: the service's zaris.map_operation, and the shape of the map struct it
// returns, which the generated client converts into clustermap.Map.

// mapModel is the map struct's shape: the Go names of its types, which of the optional
// segment fields it has, and whether it carries maxMessageBytes and dedupWindowMs.
type mapModel struct {
	Type, Node, Segment                string
	Replicas, Transitioning, Migrating bool
	MaxMessage                         bool
	DedupWindow                        bool
}

// mapShape checks that the map struct m has the shape clustermap.Map has (epoch: i64,
// segmentCount: i32, nodes: list of {id: i32, host: string, port: i32}, segments: list of
// {id: i32, optional owner: i32}, and optionally replicas: list<i32>, transitioning: bool,
// migrating: bool in a segment, and maxMessageBytes: i64 and dedupWindowMs: i64 in the map) and returns it, or the
// field at fault and why.
func mapShape(p *program, m *structType) (*mapModel, string, string) {
	want := func(s *structType, name, typeID string) string {
		f := s.fieldByName(name)
		if f == nil || f.TypeID != typeID {
			return fmt.Sprintf("map struct %s needs field %s: %s in %s", m.Name, name, typeID, s.Name)
		}
		return ""
	}
	list := func(s *structType, name string) (*structType, string) {
		f := s.fieldByName(name)
		if f == nil || f.TypeID != "list" || f.Type == nil || f.Type.ElemType == nil || f.Type.ElemType.TypeID != "struct" {
			return nil, fmt.Sprintf("map struct %s needs field %s: a list of structs", m.Name, name)
		}
		elem := p.structByName(f.Type.ElemType.Class)
		if elem == nil || strings.Contains(f.Type.ElemType.Class, ".") {
			return nil, fmt.Sprintf("map struct %s: %s's struct %s is not declared in this IDL", m.Name, name, f.Type.ElemType.Class)
		}
		return elem, ""
	}
	for _, c := range [][2]string{{"epoch", "i64"}, {"segmentCount", "i32"}} {
		if msg := want(m, c[0], c[1]); msg != "" {
			return nil, "field " + c[0], msg
		}
	}
	node, msg := list(m, "nodes")
	if msg != "" {
		return nil, "field nodes", msg
	}
	for _, c := range [][2]string{{"id", "i32"}, {"host", "string"}, {"port", "i32"}} {
		if msg := want(node, c[0], c[1]); msg != "" {
			return nil, "field nodes", msg
		}
	}
	seg, msg := list(m, "segments")
	if msg != "" {
		return nil, "field segments", msg
	}
	if msg := want(seg, "id", "i32"); msg != "" {
		return nil, "field segments", msg
	}
	if o := seg.fieldByName("owner"); o == nil || o.TypeID != "i32" || o.Required != "optional" {
		return nil, "field segments", fmt.Sprintf("map struct %s needs field owner: optional i32 in %s (unset: no live owner)", m.Name, seg.Name)
	}
	mm := &mapModel{Type: goTypeName(m.Name), Node: goTypeName(node.Name), Segment: goTypeName(seg.Name)}
	if f := seg.fieldByName("replicas"); f != nil && f.TypeID == "list" && f.Type != nil && f.Type.ElemTypeID == "i32" {
		mm.Replicas = true
	}
	mm.Transitioning = want(seg, "transitioning", "bool") == "" && seg.fieldByName("transitioning").Required != "optional"
	mm.Migrating = want(seg, "migrating", "bool") == "" && seg.fieldByName("migrating").Required != "optional"
	mm.MaxMessage = want(m, "maxMessageBytes", "i64") == ""
	mm.DedupWindow = want(m, "dedupWindowMs", "i64") == ""
	return mm, "", ""
}

// mapOperation checks the service's zaris.map_operation and returns the Go name of the
// operation it names, an admin operation of the service that takes no argument and returns
// a map struct of clustermap.Map's shape (mapShape), and that shape.
func mapOperation(p *program, source string, svc service) (string, *mapModel, error) {
	svcLine := p.declLine("service", svc.Name)
	name, ok := svc.Annotations[annMapOp]
	if !ok || name == "" {
		return "", nil, &specError{Pos: pos(source, svcLine), Field: "service " + svc.Name + ": annotation " + annMapOp,
			Msg: "missing: the service must name the operation that returns a node's cluster map"}
	}
	fail := func(msg string, args ...any) (string, *mapModel, error) {
		return "", nil, &specError{Pos: pos(source, p.annotationLine(svcLine, annMapOp)), Field: "service " + svc.Name + ": annotation " + annMapOp, Msg: fmt.Sprintf(msg, args...)}
	}
	for _, fn := range svc.Functions {
		if fn.Name != name {
			continue
		}
		if fn.Annotations[annKind] != "admin" {
			return fail(`operation %s is not zaris.kind = "admin"`, name)
		}
		if len(fn.Arguments) != 0 {
			return fail("operation %s must take no arguments", name)
		}
		if fn.ReturnTypeID != "struct" || fn.ReturnType == nil {
			return fail("operation %s must return the map struct", name)
		}
		ms := p.structByName(fn.ReturnType.Class)
		if ms == nil || strings.Contains(fn.ReturnType.Class, ".") {
			return fail("operation %s: map struct %s is not declared in this IDL", name, fn.ReturnType.Class)
		}
		mm, field, msg := mapShape(p, ms)
		if msg != "" {
			return "", nil, &specError{Pos: pos(source, p.declLine("struct", ms.Name)), Field: field, Msg: msg}
		}
		return goName(fn.Name), mm, nil
	}
	return fail("operation %q is not declared in service %s", name, svc.Name)
}
