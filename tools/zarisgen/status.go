package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The annotations on the status enum (see README.md). Thrift 0.17 keeps annotations on an
// enum in its JSON output but drops those on enum values, so each class lists its values.
const (
	annAnswer     = "zaris.answer"
	annRetry      = "zaris.retry"
	annRefresh    = "zaris.refresh"
	annSlow       = "zaris.slow_backoff"
	annOk         = "zaris.ok"
	annInvalid    = "zaris.invalid"
	annUnanswered = "zaris.unanswered"
)

// enumAnnotations are the annotations zarisgen knows on the status enum.
var enumAnnotations = []string{annAnswer, annRetry, annRefresh, annSlow, annOk, annInvalid, annUnanswered}

// statusModel is the class table of the status enum.
type statusModel struct {
	// Enum is the IDL name of the status enum, GoType its Go type name.
	Enum, GoType string
	Values       []statusValue
	// Ok, Invalid and Unanswered are the Go constant names of the roles (see
	// runtime.StatusRoles); empty when the IDL names none.
	Ok, Invalid, Unanswered string
}

// statusValue is one enum value and its class.
type statusValue struct {
	Name       string
	Const      string // the Go constant, e.g. KvStatus_Ok
	Class      string // the runtime constant: runtime.Answer, runtime.Retry, runtime.RefreshRetry
	SlowFactor int
}

// statusEnumOf returns the status enum: the one enum that carries zaris.answer.
func statusEnumOf(p *program, source string) (*enum, error) {
	var found []*enum
	for i := range p.Enums {
		if _, ok := p.Enums[i].Annotations[annAnswer]; ok {
			found = append(found, &p.Enums[i])
		}
	}
	switch len(found) {
	case 1:
		// A class annotation on another enum would be dropped: refuse it.
		for i := range p.Enums {
			e := &p.Enums[i]
			if e == found[0] {
				continue
			}
			l := p.declLine("enum", e.Name)
			if err := checkAnnotations(e.Annotations, nil, func(key, msg string) error {
				return &specError{Pos: pos(source, p.annotationLine(l, key)), Field: "enum " + e.Name + ": annotation " + key,
					Msg: fmt.Sprintf("%s (only the status enum, %s, carries zarisgen's annotations)", msg, found[0].Name)}
			}); err != nil {
				return nil, err
			}
		}
		return found[0], nil
	case 0:
		return nil, &specError{Pos: source, Msg: fmt.Sprintf("no status enum: annotate the enum of field 1 of the responses with %s, %s and %s (see tools/zarisgen/README.md)", annAnswer, annRetry, annRefresh)}
	}
	return nil, &specError{Pos: pos(source, p.declLine("enum", found[1].Name)), Field: "enum " + found[1].Name,
		Msg: fmt.Sprintf("a second status enum (%s is one already): only one enum may carry %s", found[0].Name, annAnswer)}
}

// buildStatus checks the class annotations of the status enum e and derives its table.
// Every value must be in exactly one of answer, retry and refresh; a slow value is a
// retried one with an integer factor of at least 2; each role names a value of its class.
func buildStatus(p *program, source string, e *enum, batch bool) (*statusModel, error) {
	declLine := p.declLine("enum", e.Name)
	fail := func(key, format string, args ...any) error {
		l := declLine
		if key != "" {
			l = p.annotationLine(declLine, key)
		}
		field := "enum " + e.Name
		if key != "" {
			field += ": annotation " + key
		}
		return &specError{Pos: pos(source, l), Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if err := checkAnnotations(e.Annotations, enumAnnotations, func(key, msg string) error { return fail(key, "%s", msg) }); err != nil {
		return nil, err
	}
	m := &statusModel{Enum: e.Name, GoType: goTypeName(e.Name)}
	class := map[string]string{}
	byName := map[string]bool{}
	for _, v := range e.Members {
		byName[v.Name] = true
	}
	for _, c := range []struct{ key, class string }{{annAnswer, "runtime.Answer"}, {annRetry, "runtime.Retry"}, {annRefresh, "runtime.RefreshRetry"}} {
		for _, name := range splitList(e.Annotations[c.key]) {
			if !byName[name] {
				return nil, fail(c.key, "%q is not a value of %s", name, e.Name)
			}
			if prev, ok := class[name]; ok {
				return nil, fail(c.key, "%s is in two classes (%s and %s): a value is in exactly one", name, annOf(prev), c.key)
			}
			class[name] = c.class
		}
	}
	slow := map[string]int{}
	for _, spec := range splitList(e.Annotations[annSlow]) {
		name, f, ok := strings.Cut(spec, ":")
		name = strings.TrimSpace(name)
		factor, err := strconv.Atoi(strings.TrimSpace(f))
		if !ok || err != nil || factor < 2 {
			return nil, fail(annSlow, `%q is not "<value>:<factor>" with an integer factor of at least 2`, spec)
		}
		if !byName[name] {
			return nil, fail(annSlow, "%q is not a value of %s", name, e.Name)
		}
		if c := class[name]; c != "runtime.Retry" && c != "runtime.RefreshRetry" {
			return nil, fail(annSlow, "%s is not retried (%s or %s), so it never backs off", name, annRetry, annRefresh)
		}
		if _, dup := slow[name]; dup {
			return nil, fail(annSlow, "%s is named twice", name)
		}
		slow[name] = factor
	}
	for _, v := range e.Members {
		c, ok := class[v.Name]
		if !ok {
			return nil, &specError{Pos: pos(source, p.memberLine(e.Name, v.Name)), Field: "enum " + e.Name + ": value " + v.Name,
				Msg: fmt.Sprintf("not classified: add it to %s, %s or %s on the enum", annAnswer, annRetry, annRefresh)}
		}
		m.Values = append(m.Values, statusValue{Name: v.Name, Const: m.GoType + "_" + v.Name, Class: c, SlowFactor: slow[v.Name]})
	}
	roles := []struct {
		key     string
		dst     *string
		classes []string
		want    string
	}{
		{annOk, &m.Ok, []string{"runtime.Answer"}, "an answer"},
		{annInvalid, &m.Invalid, []string{"runtime.Answer"}, "an answer"},
		{annUnanswered, &m.Unanswered, []string{"runtime.Retry", "runtime.RefreshRetry"}, "a retried value"},
	}
	for _, r := range roles {
		name, ok := e.Annotations[r.key]
		if !ok {
			if batch {
				return nil, fail("", "missing %s: a service with multi-key operations needs %s, %s and %s on its status enum", r.key, annOk, annInvalid, annUnanswered)
			}
			continue
		}
		name = strings.TrimSpace(name)
		if !byName[name] {
			return nil, fail(r.key, "%q is not a value of %s", name, e.Name)
		}
		if !slices.Contains(r.classes, class[name]) {
			return nil, fail(r.key, "%s must be %s", name, r.want)
		}
		*r.dst = m.GoType + "_" + name
	}
	return m, nil
}

func annOf(class string) string {
	switch class {
	case "runtime.Answer":
		return annAnswer
	case "runtime.Retry":
		return annRetry
	}
	return annRefresh
}

// splitList splits a comma-separated annotation value, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
