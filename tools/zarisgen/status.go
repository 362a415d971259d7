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
	sc := newStatusCheck(p, source, e)
	if err := checkAnnotations(e.Annotations, enumAnnotations, func(key, msg string) error { return sc.fail(key, "%s", msg) }); err != nil {
		return nil, err
	}
	m := &statusModel{Enum: e.Name, GoType: goTypeName(e.Name)}
	if err := sc.classify(); err != nil {
		return nil, err
	}
	slow, err := sc.slowFactors()
	if err != nil {
		return nil, err
	}
	if m.Values, err = sc.values(m.GoType, slow); err != nil {
		return nil, err
	}
	if err := sc.roles(m, batch); err != nil {
		return nil, err
	}
	return m, nil
}

// statusCheck is buildStatus's view of the status enum e, read from source: the names of
// its values and, once classify has read the class annotations, each value's class.
type statusCheck struct {
	p        *program
	source   string
	e        *enum
	declLine int
	byName   map[string]bool   // the enum's value names
	class    map[string]string // value name: its runtime class (runtime.Answer, ...)
}

// newStatusCheck is the check of e with its value names read and no class yet.
func newStatusCheck(p *program, source string, e *enum) *statusCheck {
	sc := &statusCheck{p: p, source: source, e: e, declLine: p.declLine("enum", e.Name),
		byName: map[string]bool{}, class: map[string]string{}}
	for _, v := range e.Members {
		sc.byName[v.Name] = true
	}
	return sc
}

// fail is the error refusing the enum's annotation key (the enum itself when key is empty)
// for the reason format and args say.
func (sc *statusCheck) fail(key, format string, args ...any) error {
	l := sc.declLine
	if key != "" {
		l = sc.p.annotationLine(sc.declLine, key)
	}
	field := "enum " + sc.e.Name
	if key != "" {
		field += ": annotation " + key
	}
	return &specError{Pos: pos(sc.source, l), Field: field, Msg: fmt.Sprintf(format, args...)}
}

// classify reads the class annotations (answer, retry, refresh) into sc.class: each names
// values of the enum, and no value is in two classes.
func (sc *statusCheck) classify() error {
	for _, c := range []struct{ key, class string }{{annAnswer, "runtime.Answer"}, {annRetry, "runtime.Retry"}, {annRefresh, "runtime.RefreshRetry"}} {
		for _, name := range splitList(sc.e.Annotations[c.key]) {
			if !sc.byName[name] {
				return sc.fail(c.key, "%q is not a value of %s", name, sc.e.Name)
			}
			if prev, ok := sc.class[name]; ok {
				return sc.fail(c.key, "%s is in two classes (%s and %s): a value is in exactly one", name, annOf(prev), c.key)
			}
			sc.class[name] = c.class
		}
	}
	return nil
}

// slowFactors reads the slow-backoff annotation ("<value>:<factor>", comma-separated): the
// factor of each value it names, a retried value named once with an integer of at least 2.
func (sc *statusCheck) slowFactors() (map[string]int, error) {
	slow := map[string]int{}
	for _, spec := range splitList(sc.e.Annotations[annSlow]) {
		name, f, ok := strings.Cut(spec, ":")
		name = strings.TrimSpace(name)
		factor, err := strconv.Atoi(strings.TrimSpace(f))
		if !ok || err != nil || factor < 2 {
			return nil, sc.fail(annSlow, `%q is not "<value>:<factor>" with an integer factor of at least 2`, spec)
		}
		if !sc.byName[name] {
			return nil, sc.fail(annSlow, "%q is not a value of %s", name, sc.e.Name)
		}
		if c := sc.class[name]; c != "runtime.Retry" && c != "runtime.RefreshRetry" {
			return nil, sc.fail(annSlow, "%s is not retried (%s or %s), so it never backs off", name, annRetry, annRefresh)
		}
		if _, dup := slow[name]; dup {
			return nil, sc.fail(annSlow, "%s is named twice", name)
		}
		slow[name] = factor
	}
	return slow, nil
}

// values is the table's row of every value of the enum, in the IDL's order, with its Go
// constant (goType_name), its class and its slow factor; it refuses a value in no class.
func (sc *statusCheck) values(goType string, slow map[string]int) ([]statusValue, error) {
	var values []statusValue
	for _, v := range sc.e.Members {
		c, ok := sc.class[v.Name]
		if !ok {
			return nil, &specError{Pos: pos(sc.source, sc.p.memberLine(sc.e.Name, v.Name)), Field: "enum " + sc.e.Name + ": value " + v.Name,
				Msg: fmt.Sprintf("not classified: add it to %s, %s or %s on the enum", annAnswer, annRetry, annRefresh)}
		}
		values = append(values, statusValue{Name: v.Name, Const: goType + "_" + v.Name, Class: c, SlowFactor: slow[v.Name]})
	}
	return values, nil
}

// roles reads the role annotations (ok, invalid, unanswered) into m's Go constants: each
// names a value of its class. A service with multi-key operations (batch) needs all three.
func (sc *statusCheck) roles(m *statusModel, batch bool) error {
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
		name, ok := sc.e.Annotations[r.key]
		if !ok {
			if batch {
				return sc.fail("", "missing %s: a service with multi-key operations needs %s, %s and %s on its status enum", r.key, annOk, annInvalid, annUnanswered)
			}
			continue
		}
		name = strings.TrimSpace(name)
		if !sc.byName[name] {
			return sc.fail(r.key, "%q is not a value of %s", name, sc.e.Name)
		}
		if !slices.Contains(r.classes, sc.class[name]) {
			return sc.fail(r.key, "%s must be %s", name, r.want)
		}
		*r.dst = m.GoType + "_" + name
	}
	return nil
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
